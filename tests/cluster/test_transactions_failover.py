"""Transactions across a real 3-broker cluster (`logbus server start` processes on a real
ZooKeeper): `__transaction_state` replicated three ways, markers sent to leaders on every
broker, and the transaction coordinator's broker killed with kill -9 in the middle of a
transaction. The coordinator of the id moves to the new leader of its partition, which
loads the open transaction; confluent-kafka's producer finds it and commits; a
read_committed consumer sees every committed record once and no aborted one
(`txn_failover.py`)."""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from confluent_kafka import Producer
from txn_failover import PARTITIONS, TOPIC, commit_across_a_coordinator_kill, txn_cluster

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TXN = "ha-producer"


@pytest.mark.timeout(300)
def test_coordinator_killed_mid_transaction_in_a_cluster(zk_connect: str, tmp_path: Path) -> None:
    with txn_cluster(zk_connect, tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": TXN,
                "log_level": 0,
                "transaction.timeout.ms": 120_000,
            }
        )

        def send(value: bytes, partition: int) -> None:
            producer.produce(TOPIC, value, partition=partition)

        def flush() -> None:
            assert producer.flush(60) == 0

        commit_across_a_coordinator_kill(cluster, TXN, producer, send, flush)
