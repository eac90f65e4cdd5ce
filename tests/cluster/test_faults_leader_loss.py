"""Fault test (issue 14, scenario c): under an acks=all idempotent load on rf=3,
min.insync.replicas=2, a partition's leader is killed (kill -9) and stopped (SIGTERM),
then the controller is; each broker comes back and the ISR is whole before the next loss.
Afterwards a fresh consumer reads everything and the checker finds no acknowledged record
lost, no duplicate, no reordering, and identical batches on the in-sync replicas. The
five-times-each variant is a `soak` test (`pytest -m soak tests/cluster`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from checker import History
from cluster_processes import ProcessCluster
from fault_checks import read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "faults"
PARTITIONS = 2
STEP = 200  # acknowledged sends between losses


def victim(cluster: ProcessCluster, whom: str) -> int:
    if whom == "leader":
        return cluster.leader_of(TOPIC, 0)
    controller = cluster.controller()
    assert controller is not None
    return controller


LOGBUS_LOAD: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "delivery_timeout_ms": 120000,
}
CONFLUENT_LOAD: dict[str, Any] = {
    "client": "confluent",
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 120000,
    "log_level": 0,
}


def lose(
    cluster: ProcessCluster,
    losses: list[tuple[str, str]],
    load_config: dict[str, Any] | None = None,
) -> None:
    """For each (whom, how) of `losses` ("leader" of partition 0 or "controller";
    "kill" or "terminate"): lose that broker under load, wait for the cluster to move on
    and for more acknowledgements, bring it back, wait for the whole ISR."""
    history = History()
    with ProducerLoad(
        cluster.bootstrap, history, TOPIC, producers=2, **(load_config or LOGBUS_LOAD)
    ) as load:
        load.wait_acknowledged(STEP)
        for whom, how in losses:
            broker = victim(cluster, whom)
            epoch = cluster.controller_epoch()
            if how == "kill":
                cluster.kill(broker)
            else:
                assert cluster.terminate(broker) == 0
            if whom == "leader":
                cluster.wait_for(
                    lambda old=broker: cluster.leader_of(TOPIC, 0) not in (-1, old),
                    60,
                    f"a new leader after {how} of broker {broker}",
                )
            else:
                cluster.wait_for(
                    lambda old=broker: cluster.controller() not in (None, old),
                    60,
                    f"a new controller after {how} of broker {broker}",
                )
                assert cluster.controller_epoch() > epoch
            load.wait_acknowledged(load.acknowledged() + STEP)
            cluster.start_broker(broker)
            # the next loss is survivable only once the ISR is whole again: with unclean
            # election off, a partition whose whole ISR is gone stays offline (correctly)
            wait_isr(cluster, TOPIC, PARTITIONS)
        load.wait_acknowledged(load.acknowledged() + STEP)
    assert not load.errors, load.errors
    result = read_and_check(cluster, history, TOPIC, PARTITIONS)
    assert result.ok, str(result)
    assert result.acknowledged >= STEP * (len(losses) + 2)
    for partition in range(PARTITIONS):
        wait_identical_logs(cluster, TOPIC, partition)


@pytest.mark.timeout(400)
def test_leader_then_controller_killed_and_terminated_under_acks_all_load(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        lose(
            cluster,
            [
                ("leader", "kill"),
                ("leader", "terminate"),
                ("controller", "kill"),
                ("controller", "terminate"),
            ],
        )


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_leader_and_controller_killed_and_terminated_five_times_each(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        losses = [("leader", "kill"), ("leader", "terminate")] * 5
        lose(cluster, losses + [("controller", "kill"), ("controller", "terminate")] * 5)


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_leader_and_controller_lost_five_times_each_under_confluent_kafka_load(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        losses = [("leader", "kill"), ("controller", "terminate")] * 5
        losses += [("leader", "terminate"), ("controller", "kill")] * 5
        lose(cluster, losses, CONFLUENT_LOAD)
