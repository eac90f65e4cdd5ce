"""The logbus transactional producer in a real 3-broker cluster (`logbus server start`
processes on a real ZooKeeper) whose transaction coordinator is killed with kill -9 in
the middle of a transaction: the producer finds the new coordinator (NOT_COORDINATOR, a
broken connection, COORDINATOR_LOAD_IN_PROGRESS while it loads) and commits; a
read_committed consumer sees every committed record once and no aborted one
(`txn_failover.py`)."""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from txn_failover import PARTITIONS, TOPIC, commit_across_a_coordinator_kill, txn_cluster

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TXN = "logbus-ha-producer"


@pytest.mark.timeout(300)
def test_logbus_producer_commits_after_its_coordinator_is_killed(
    zk_connect: str, tmp_path: Path
) -> None:
    with txn_cluster(zk_connect, tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        with logbus.Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": TXN,
                "transaction.timeout.ms": 120_000,
            }
        ) as producer:

            def send(value: bytes, partition: int) -> None:
                producer.send(TOPIC, value, partition=partition)

            commit_across_a_coordinator_kill(
                cluster, TXN, producer, send, lambda: producer.flush(60)
            )
