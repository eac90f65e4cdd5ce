"""Every client follows leader, coordinator and controller changes in a real 3-broker
cluster (`logbus server start` processes on a real ZooKeeper): confluent-kafka,
kafka-python, aiokafka, kcat and logbus's own client.

- Producers (acks=all, idempotent, rf=3, min.insync.replicas=2) of all four libraries
  send at once while the partition leader is stopped with SIGTERM and then killed with
  kill -9; each finds the new leader by itself and goes on; the checker finds nothing
  acknowledged lost, no duplicate, no reordering, and every send acknowledged. kcat then
  produces and consumes bootstrapping from a live broker after the kill.
- Group consumers of the four libraries (each its own group API and group) consume and
  commit across the kill of a partition leader and then of their group coordinator's
  broker: no record skipped (a lost commit would skip, as they reset to "latest"), and
  what they had committed before the coordinator died is still committed after.
- Admin clients (logbus Admin, confluent-kafka AdminClient) bootstrapped from a broker
  that is not the controller create topics (sent on to the controller) and, after the
  controller's kill -9, describe the new controller and create through it; a client
  whose first bootstrap server is dead uses the next one.

One cluster per test and every client at once, so the session-timeout waits of a kill
are paid once per test rather than once per client.
"""

from __future__ import annotations

import shutil
import subprocess
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from checker import Consumed, History, Outcome, check
from client_loads import CLIENTS, ClientProducerLoad, GroupConsumer
from cluster_processes import ProcessCluster
from load import read_all

import logbus
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC, offsets_partition_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "failover"
KCAT = shutil.which("kcat")
FAILOVER = 60.0  # seconds for a new leader: the dead broker's session (6 s) must expire

# acks=all with idempotence, in each client's own names
PRODUCER_CONFIGS: dict[str, dict[str, Any]] = {
    "logbus": {"acks": "all", "enable_idempotence": True, "delivery_timeout_ms": 120000},
    "confluent": {
        "acks": "all",
        "enable.idempotence": True,
        "delivery.timeout.ms": 120000,
        "log_level": 0,
    },
    "kafka-python": {"acks": "all", "enable_idempotence": True, "delivery_timeout_ms": 120000},
    "aiokafka": {"acks": "all", "enable_idempotence": True, "request_timeout_ms": 60000},
}


def acknowledged_by(history: History, producer: str) -> int:
    return sum(1 for s in history.sends if s.producer == producer and s.outcome is Outcome.OK)


def each_goes_on(cluster: ProcessCluster, loads: dict[str, ClientProducerLoad], more: int) -> None:
    """Until every client's producer has `more` acknowledgements beyond what it has now."""
    history = next(iter(loads.values())).history
    targets = {f"{c}0": acknowledged_by(history, f"{c}0") + more for c in loads}

    def all_went_on() -> bool:
        for load in loads.values():
            assert not load.errors, load.errors
        return all(acknowledged_by(history, p) >= n for p, n in targets.items())

    cluster.wait_for(all_went_on, 120, f"every producer to get {more} more acknowledgements")


def new_leader(cluster: ProcessCluster, topic: str, partition: int, old: int) -> int:
    """Waits for a leader other than `old` (and -1) and returns it."""
    found: list[int] = []

    def moved() -> bool:
        found[:] = [cluster.leader_of(topic, partition)]
        return found[0] not in (-1, old)

    cluster.wait_for(moved, FAILOVER, f"a new leader of {topic}-{partition} after broker {old}")
    return found[0]


def full_isr(cluster: ProcessCluster, topic: str, partitions: int) -> None:
    cluster.wait_for(
        lambda: all(len(cluster.isr_of(topic, p)) == 3 for p in range(partitions)),
        120,
        f"every replica of {topic} back in the ISR",
    )


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None, "kcat is not installed (`make test` installs it)"
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=120, check=False)


# --- producers ---------------------------------------------------------------------------


@pytest.mark.timeout(400)
def test_every_producer_follows_the_leader_through_terminate_and_kill(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        history = History()
        loads = {
            client: ClientProducerLoad(
                cluster.bootstrap,
                history,
                TOPIC,
                producers=1,
                client=client,
                interval=0.01,
                max_pending=20,
                **PRODUCER_CONFIGS[client],
            )
            for client in CLIENTS
        }
        with ExitStack() as running:
            for load in loads.values():
                running.enter_context(load)
            each_goes_on(cluster, loads, 30)
            stopped = cluster.leader_of(TOPIC, 0)
            assert cluster.terminate(stopped) == 0
            new_leader(cluster, TOPIC, 0, stopped)
            each_goes_on(cluster, loads, 30)
            cluster.start_broker(stopped)
            full_isr(cluster, TOPIC, 1)
            killed = cluster.leader_of(TOPIC, 0)
            cluster.kill(killed)
            new_leader(cluster, TOPIC, 0, killed)
            each_goes_on(cluster, loads, 30)
        for client, load in loads.items():
            assert not load.errors, (client, load.errors)
        # every send of every client ended acknowledged: none given up on
        unsettled = [s for s in history.sends if s.outcome is not Outcome.OK]
        assert not unsettled, unsettled[:10]

        # kcat, bootstrapping from a live broker after the kill, produces and consumes
        live = cluster.bootstrap_of(cluster.live_ids()[0])
        kcat_sends = [history.send("kcat", TOPIC) for _ in range(20)]
        produced = kcat(
            "-P",
            "-b",
            live,
            "-t",
            TOPIC,
            "-X",
            "acks=all",
            "-X",
            "enable.idempotence=true",
            stdin=b"".join(s.value + b"\n" for s in kcat_sends),
        )
        assert produced.returncode == 0, produced.stderr
        for send in kcat_sends:  # kcat reports no offsets: the read-back below decides
            send.unknown("kcat -P reports no offsets")

        records = read_all(cluster.bootstrap, TOPIC)
        result = check(history, records, cluster.replica_logs(TOPIC, [0]))
        assert result.ok, result
        assert {r.value for r in records} >= {s.value for s in kcat_sends}
        for client in CLIENTS:
            assert acknowledged_by(history, f"{client}0") >= 90, client

        consumed = kcat("-C", "-b", live, "-t", TOPIC, "-o", "beginning", "-e", "-f", "%p %o %s\n")
        assert consumed.returncode == 0, consumed.stderr
        lines = [line.split(b" ", 2) for line in consumed.stdout.splitlines()]
        by_kcat = [Consumed(TOPIC, int(p), int(o), v) for p, o, v in lines]
        assert by_kcat == records


# --- group consumers ---------------------------------------------------------------------


def groups_coordinated_by(cluster: ProcessCluster, broker: int) -> dict[str, str]:
    """A group id per client whose coordinator (the leader of its __consumer_offsets
    partition) is `broker`."""
    offsets = cluster.metadata(OFFSETS_TOPIC)
    count = len(offsets.partitions)
    groups: dict[str, str] = {}
    for client in CLIENTS:
        for i in range(10000):
            group = f"{client}-group-{i}"
            if offsets.partitions[offsets_partition_for(group, count)].leader == broker:
                groups[client] = group
                break
    assert len(groups) == len(CLIENTS), groups
    return groups


def offsets_topic_ready(cluster: ProcessCluster) -> None:
    """Have the brokers create __consumer_offsets (FindCoordinator does) and wait for its
    leaders."""
    with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.list_consumer_group_offsets("warm-up", [logbus.TopicPartition(TOPIC, 0)])

    def has_leaders() -> bool:
        parts = cluster.metadata(OFFSETS_TOPIC).partitions
        return bool(parts) and all(p.leader >= 0 for p in parts.values())

    cluster.wait_for(has_leaders, 60, "leaders for __consumer_offsets")


@pytest.mark.timeout(400)
def test_group_consumers_follow_leader_and_coordinator_kills(
    zk_connect: str, tmp_path: Path
) -> None:
    partitions = 2
    consumers: list[GroupConsumer] = []
    # the consumers stop (leave their groups) before the cluster does
    with (
        ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster,
        ExitStack() as stack,
    ):
        cluster.create_topic(TOPIC, partitions=partitions, replication_factor=3)
        offsets_topic_ready(cluster)
        leader = cluster.leader_of(TOPIC, 0)
        coordinator = next(b for b in cluster.live_ids() if b != leader)
        groups = groups_coordinated_by(cluster, coordinator)
        tps = [logbus.TopicPartition(TOPIC, p) for p in range(partitions)]
        with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
            for group in groups.values():  # each group starts at 0; a lost commit skips
                admin.alter_consumer_group_offsets(group, dict.fromkeys(tps, 0))
        history = History()
        load = ClientProducerLoad(
            cluster.bootstrap,
            history,
            TOPIC,
            producers=1,
            interval=0.005,
            acks="all",
            enable_idempotence=True,
            delivery_timeout_ms=120000,
        )
        with load:
            for client, group in groups.items():
                consumers.append(
                    stack.enter_context(GroupConsumer(client, cluster.bootstrap, TOPIC, group))
                )
            for consumer in consumers:
                consumer.wait_consumed(50)
            # the leader of partition 0 dies
            cluster.kill(leader)
            new_leader(cluster, TOPIC, 0, leader)
            load.wait_acknowledged(load.acknowledged() + 100)
            for consumer in consumers:
                consumer.wait_consumed(consumer.count() + 50)
            cluster.start_broker(leader)
            full_isr(cluster, TOPIC, partitions)
            # then the broker coordinating every group dies
            before = {c.client: dict(c.committed) for c in consumers}
            cluster.kill(coordinator)
            offsets_partition = offsets_partition_for(
                groups["logbus"], len(cluster.metadata(OFFSETS_TOPIC).partitions)
            )
            new_leader(cluster, OFFSETS_TOPIC, offsets_partition, coordinator)
            with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
                for consumer in consumers:
                    kept = admin.list_consumer_group_offsets(consumer.group_id, tps)
                    for p, offset in before[consumer.client].items():
                        assert kept[logbus.TopicPartition(TOPIC, p)] >= offset, (
                            consumer.client,
                            kept,
                            before[consumer.client],
                        )
            load.wait_acknowledged(load.acknowledged() + 100)
            for consumer in consumers:
                consumer.wait_consumed(consumer.count() + 50)
        assert not load.errors, load.errors
        ends = {p: cluster.high_watermark(TOPIC, p) for p in range(partitions)}
        for consumer in consumers:
            cluster.wait_for(
                lambda c=consumer: c.caught_up(ends),
                120,
                f"the {consumer.client} consumer to read and commit everything",
            )
        records = read_all(cluster.bootstrap, TOPIC)
        result = check(history, records, cluster.replica_logs(TOPIC, range(partitions)))
        assert result.ok, result
        stored = {(r.partition, r.offset): r.value for r in records}
        with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
            for consumer in consumers:
                for p, end in ends.items():  # no record skipped
                    missing = set(range(end)) - consumer.offsets_read(p)
                    assert not missing, (consumer.client, p, sorted(missing)[:10])
                for r in consumer.consumed:  # and each read as stored
                    assert stored[(r.partition, r.offset)] == r.value, (consumer.client, r)
                committed = admin.list_consumer_group_offsets(consumer.group_id, tps)
                assert committed == {logbus.TopicPartition(TOPIC, p): e for p, e in ends.items()}


# --- admin ---------------------------------------------------------------------------------


def topic_led_everywhere(cluster: ProcessCluster, topic: str, partitions: int) -> None:
    def led() -> bool:
        for broker in cluster.live_ids():
            parts = cluster.metadata(topic, via=broker).partitions
            if len(parts) != partitions or any(p.leader < 0 for p in parts.values()):
                return False
        return True

    cluster.wait_for(led, 60, f"{topic} with leaders on every live broker")


@pytest.mark.timeout(300)
def test_admin_clients_follow_the_controller(zk_connect: str, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import NewTopic as ConfluentNewTopic

    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        controller = cluster.controller()
        assert controller is not None
        other = next(b for b in cluster.live_ids() if b != controller)
        via = cluster.bootstrap_of(other)
        # librdkafka learns the controller only from Metadata; the refresh after losing
        # its connection to the old controller comes before the new one is elected (a
        # session timeout later, as in Kafka), so the next is its periodic refresh
        confluent = AdminClient(
            {"bootstrap.servers": via, "topic.metadata.refresh.interval.ms": 1000, "log_level": 0}
        )

        def confluent_create(name: str, rf: int) -> None:
            futures = confluent.create_topics(
                [ConfluentNewTopic(name, 2, rf)], request_timeout=30, operation_timeout=30
            )
            futures[name].result(60)

        def confluent_controller() -> int:
            return int(confluent.describe_cluster(request_timeout=10).result(30).controller.id)

        with logbus.Admin(bootstrap_servers=via, request_timeout_ms=5000) as admin:
            # through a broker that is not the controller: the clients find the controller
            admin.create_topics([logbus.NewTopic("by-logbus", 2, 3)])
            confluent_create("by-confluent", 3)
            for topic in ("by-logbus", "by-confluent"):
                topic_led_everywhere(cluster, topic, 2)
            described = admin.describe_cluster().controller
            assert described is not None and described.node_id == controller
            assert confluent_controller() == controller

            cluster.kill(controller)
            cluster.wait_for(
                lambda: cluster.controller() not in (None, controller), FAILOVER, "a new controller"
            )
            successor = cluster.controller()
            # the same clients, whose metadata named the dead controller, follow
            cluster.wait_for(
                lambda: getattr(admin.describe_cluster().controller, "node_id", -1) == successor,
                30,
                "the logbus Admin to describe the new controller",
            )
            cluster.wait_for(
                lambda: confluent_controller() == successor,
                30,
                "the confluent AdminClient to describe the new controller",
            )
            admin.create_topics([logbus.NewTopic("by-logbus-after", 2, 2)])
            confluent_create("by-confluent-after", 2)
            for topic in ("by-logbus-after", "by-confluent-after"):
                topic_led_everywhere(cluster, topic, 2)

        # a dead first bootstrap server: the clients try the next one
        dead_first = f"{cluster.bootstrap_of(controller)},{via}"
        with logbus.Admin(bootstrap_servers=dead_first, request_timeout_ms=5000) as admin:
            described = admin.describe_cluster().controller
            assert described is not None and described.node_id == successor
            admin.create_topics([logbus.NewTopic("by-logbus-dead-first", 1, 2)])
        with logbus.Producer(bootstrap_servers=dead_first, acks="all") as producer:
            producer.send("by-logbus-dead-first", b"after the controller died").get(60)
        topic_led_everywhere(cluster, "by-logbus-dead-first", 1)
        records = read_all(dead_first, "by-logbus-dead-first")
        assert [r.value for r in records] == [b"after the controller died"]
