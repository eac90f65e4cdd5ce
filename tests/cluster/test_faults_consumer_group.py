"""Fault test: a KIP-848 consumer group (confluent-kafka, `group.protocol=consumer`) of 3,
then 6, then 2 members over 12 partitions, under an acks=all idempotent load, on three
`logbus server start` processes (rf=3, __consumer_offsets rf=3); the group coordinator is
killed (kill -9) while the group grows.

The new coordinator loads the group (its epochs, members, target and current assignments)
from the ConsumerGroup* records of its __consumer_offsets replica, the members find it and
go on heartbeating with the epochs they had. What they polled, checked against the
producers' history: nothing acknowledged missing; no partition handed to a member while
another still owned it, and none taken from a member that keeps it.
"""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from checker import Consumed, History, Outcome, check
from cluster_processes import ProcessCluster
from fault_checks import wait_isr
from load import ProducerLoad

from consumer_protocol_members import ConsumerProtocolMember, Ownership
from kafka_wire import WireClient
from logbus.coordinator.group.offsets_topic import offsets_partition_for
from logbus.protocol import ApiKey, ErrorCode

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "work"
PARTITIONS = 12
GROUP = "kip848-workers"


def stable_with(cluster: ProcessCluster, members: list[ConsumerProtocolMember]) -> bool:
    """The group is Stable with exactly these members, and they own every partition."""
    for broker_id in cluster.live_ids():
        try:
            with WireClient(cluster.bootstrap_of(broker_id), timeout=5) as client:
                body = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
                    "group_ids": [GROUP], "include_authorized_operations": False,
                })
        except OSError:
            continue
        described = body["groups"][0]
        if described["error_code"] != ErrorCode.NONE:
            continue  # not the coordinator
        if described["group_state"] != "Stable" or len(described["members"]) != len(members):
            return False
        owned = sorted(p for m in members for p in m.assignment)
        return owned == list(range(PARTITIONS))
    return False


@pytest.mark.timeout(420)
def test_consumer_group_scales_through_a_coordinator_kill(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect, 3, tmp_path, min_insync_replicas="2",
        group_consumer_heartbeat_interval_ms="500",
        group_consumer_session_timeout_ms="15000",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        history = History()
        ownership = Ownership()
        load_config = {"acks": "all", "enable_idempotence": True, "request_timeout_ms": 5000}

        def member() -> ConsumerProtocolMember:
            return ConsumerProtocolMember(cluster.bootstrap, TOPIC, GROUP, ownership)

        members = [member() for _ in range(3)]
        everyone = list(members)
        try:
            with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
                load.wait_acknowledged(100)
                cluster.wait_for(lambda: stable_with(cluster, members), 120, "3 members")
                ownership.next_phase()
                group_partition = offsets_partition_for(
                    GROUP, len(cluster.metadata("__consumer_offsets").partitions)
                )
                coordinator = cluster.leader_of("__consumer_offsets", group_partition)
                joining = [member() for _ in range(3)]
                members += joining
                everyone += joining
                cluster.kill(coordinator)
                cluster.wait_for(lambda: stable_with(cluster, members), 180, "6 members")
                ownership.next_phase()
                for m in members[2:]:
                    m.stop()
                members = members[:2]
                cluster.wait_for(lambda: stable_with(cluster, members), 120, "2 members")
                load.wait_acknowledged(load.acknowledged() + 100)
            assert not load.errors, load.errors
            acknowledged = {s.value for s in history.sends if s.outcome is Outcome.OK}
            cluster.wait_for(
                lambda: acknowledged <= {v for m in everyone for v in m.received()},
                120,
                "every acknowledged record consumed",
            )
        finally:
            for m in everyone:
                if m.is_alive():
                    m.stop()
        assert ownership.violations == []
        assert ownership.taken_back == {}, ownership.history_of(ownership.taken_back)
        # Per member, the records it polled: nothing acknowledged is missing, and no
        # member's polls of a partition went backwards.
        polled = [Consumed(*r) for m in everyone for r in m.records()]
        result = check(history, polled)
        assert not result.lost, str(result)
