"""The `ProcessCluster` test helper: real `logbus server start` processes with
`zookeeper.connect`, the faults it injects, and its questions to the cluster."""

from __future__ import annotations

import time
from pathlib import Path

import cluster_processes
import pytest
from checker import History, check
from cluster_processes import ProcessCluster, listening

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


def test_brokers_start_with_zookeeper_connect_and_are_cleaned_up(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect, 3, tmp_path, await_registration=False, num_partitions="2"
    ) as cluster:
        assert cluster.live_ids() == [0, 1, 2]
        ports = [node.port for node in cluster.nodes.values()]
        assert len(set(ports)) == 3 and all(listening(p) for p in ports)
        assert cluster.bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
        for broker_id, node in cluster.nodes.items():
            assert node.properties["zookeeper.connect"] == zk_connect
            assert node.properties["num.partitions"] == "2"
            assert node.data_dir == tmp_path / f"broker-{broker_id}"
            assert (node.data_dir / "meta.properties").is_file()
        cluster.pause(1)  # a stopped process must still be cleaned up
        procs = [node.proc for node in cluster.nodes.values()]
    assert all(proc is not None and proc.poll() is not None for proc in procs)
    assert not any(listening(p) for p in ports)


def test_kill_terminate_pause_resume_and_restart(zk_connect: str, tmp_path: Path) -> None:
    with ProcessCluster(zk_connect, 2, tmp_path, await_registration=False) as cluster:
        with logbus.Producer(bootstrap_servers=cluster.bootstrap_of(0)) as producer:
            producer.send("kept", b"before", partition=0).result(30)

        cluster.pause(0)
        assert cluster.nodes[0].state() == "T"
        assert cluster.live_ids() == [1]
        assert cluster.bootstrap == cluster.bootstrap_of(1)
        cluster.resume(0)
        assert cluster.nodes[0].state() in {"R", "S"}
        assert cluster.live_ids() == [0, 1]

        assert cluster.terminate(0) == 0  # a clean shutdown
        assert (cluster.data_dir(0) / ".kafka_cleanshutdown").is_file()
        cluster.start_broker(0)
        assert listening(cluster.nodes[0].port)

        cluster.kill(1)
        assert cluster.nodes[1].returncode == -9
        assert cluster.live_ids() == [0]
        cluster.restart(1)
        assert cluster.live_ids() == [0, 1]

        cluster.restart(0, clean=False)  # kill -9 then start: recovery keeps the record
        with logbus.Consumer(
            bootstrap_servers=cluster.bootstrap_of(0), auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([logbus.TopicPartition("kept", 0)])
            values = cluster.wait_for(
                lambda: [r.value for r in consumer.poll(0.5)], 30, "the record"
            )
        assert values == [b"before"]


def test_wait_for_returns_the_value_or_names_what_it_waited_for() -> None:
    calls = iter([0, None, ValueError("not yet"), "done"])

    def predicate() -> object:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    assert ProcessCluster.wait_for(predicate, 10) == "done"

    def failing() -> bool:
        raise ValueError("still down")

    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"waiting for the leader .*still down"):
        ProcessCluster.wait_for(failing, 0.5, "the leader")
    assert time.monotonic() - start < 30


# --- needs the replicated cluster (zookeeper.connect wired into the broker) -----------------


def test_a_formed_cluster_answers_leader_controller_and_replica_logs(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        assert cluster.broker_ids() == [0, 1, 2]
        controller = cluster.controller()
        assert controller in {0, 1, 2}
        assert all(cluster.controller(via=b) == controller for b in range(3))

        cluster.create_topic("orders", partitions=2, replication_factor=3)
        history = History()
        with logbus.Producer(bootstrap_servers=cluster.bootstrap, acks="all") as producer:
            for i in range(50):
                send = history.send("p0", "orders", partition=i % 2)
                send.record_future(producer.send("orders", send.value, partition=i % 2))
            producer.flush()
        cluster.wait_for(
            lambda: all(len(cluster.isr_of("orders", p)) == 3 for p in range(2)), 60, "full ISR"
        )
        logs = cluster.replica_logs("orders", range(2))
        assert sum(ls.high_watermark for ls in logs.values()) == 50
        assert check(history, [], logs).divergent_batches == []

        leader = cluster.leader_of("orders", 0)
        cluster.kill(leader)
        cluster.wait_for(
            lambda: cluster.leader_of("orders", 0) not in (-1, leader), 60, "a new leader"
        )
        assert cluster.leader_of("orders", 0) in {0, 1, 2} - {leader}
