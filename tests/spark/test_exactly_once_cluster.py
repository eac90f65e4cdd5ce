"""The exactly-once Spark sink on a real 3-broker cluster (`logbus server start` processes
on a real ZooKeeper; topics and `__transaction_state` replicated three times): the
writers' transaction coordinators, group coordinators and partition leaders are spread
over the brokers, and the driver commits each writer's transaction at its own
coordinator. The driver is killed with -9 while a micro-batch is half written, then the
transaction coordinator of the writer whose transaction is open is killed with -9 too;
the query restarted from its checkpoint writes every row exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import cluster_processes
from spark_support import Job, output, produce, read_all, transactional_cluster

from logbus.coordinator.transaction.state_topic import (
    TRANSACTION_STATE_TOPIC,
    txn_partition_for,
)

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


def test_driver_and_coordinator_killed_mid_batch_on_a_cluster(
    zk_connect: str, tmp_path: Path, jobs: list[Job]
) -> None:
    with transactional_cluster(zk_connect, tmp_path) as cluster:
        b = cluster.bootstrap
        cluster.create_topic("in", partitions=2, replication_factor=3)
        cluster.create_topic("out", partitions=1, replication_factor=3)
        for p in (0, 1):
            produce(b, "in", [b"%d-%03d" % (p, i) for i in range(60)], partition=p)
        signal_dir = tmp_path / "signal"
        signal_dir.mkdir()
        first = Job(b, tmp_path, "--max-offsets", "40", "--stall-batch", "1",
                    "--stall-partition", "1", "--signal", str(signal_dir))
        jobs.append(first)
        deadline = time.monotonic() + 240
        while not (
            (signal_dir / "stalled").exists()
            and len(read_all(b, "out", "read_uncommitted")) >= 60
        ):
            assert first.proc.poll() is None, output(tmp_path)
            assert time.monotonic() < deadline, output(tmp_path)
            time.sleep(0.5)
        first.kill()
        assert len(read_all(b, "out", "read_committed")) == 40

        # The coordinator of writer copy-0, whose transaction is open, dies too.
        partition = txn_partition_for("copy-0", 3)
        coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, partition)
        assert coordinator >= 0
        cluster.kill(coordinator)
        cluster.wait_for(
            lambda: cluster.leader_of(TRANSACTION_STATE_TOPIC, partition)
            not in (-1, coordinator),
            90,
            "a new transaction coordinator",
        )

        again = Job(b, tmp_path, "--max-offsets", "40")
        jobs.append(again)
        assert again.wait() == 0, output(tmp_path)
        values = read_all(b, "out", "read_committed")
        assert len(values) == 120
        assert set(values) == {b"%d-%03d" % (p, i) for p in (0, 1) for i in range(60)}
