"""Transactions across a real 3-broker cluster (`logbus server start` processes on a real
ZooKeeper): `__transaction_state` replicated three ways, markers sent to leaders on every
broker, and the transaction coordinator's broker killed with kill -9 in the middle of a
transaction. The coordinator of the id moves to the new leader of its partition, which
loads the open transaction; confluent-kafka's producer finds it and commits; a
read_committed consumer sees every committed record once and no aborted one."""

from __future__ import annotations

import time
from pathlib import Path

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TXN = "ha-producer"
TOPIC = "ha-out"
PARTITIONS = 3


def read_committed(bootstrap: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ha-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        # assigned, not subscribed: __consumer_offsets (replication factor 3) cannot be
        # created with a broker down, so a group would find no coordinator (Kafka's rule)
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        quiet_since = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
                quiet_since = None
                continue
            if len(got) >= expected:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2:
                    break
        return got
    finally:
        consumer.close()


@pytest.mark.timeout(300)
def test_coordinator_killed_mid_transaction_in_a_cluster(zk_connect: str, tmp_path: Path) -> None:
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        min_insync_replicas="2",
        transaction_state_log_num_partitions="3",
        transaction_state_log_replication_factor="3",
        transaction_state_log_min_isr="2",
        offsets_topic_num_partitions="3",
        group_initial_rebalance_delay_ms="0",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": TXN,
                "log_level": 0,
                "transaction.timeout.ms": 120_000,
            }
        )
        producer.init_transactions(60)
        # one committed and one aborted transaction with every broker up
        producer.begin_transaction()
        for i in range(30):
            producer.produce(TOPIC, b"a%d" % i, partition=i % PARTITIONS)
        producer.commit_transaction(60)
        producer.begin_transaction()
        for i in range(30):
            producer.produce(TOPIC, b"x%d" % i, partition=i % PARTITIONS)
        producer.abort_transaction(60)
        # the coordinator dies with a transaction open on every partition
        coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition_for(TXN, 3))
        assert coordinator >= 0
        producer.begin_transaction()
        for i in range(30):
            producer.produce(TOPIC, b"b%d" % i, partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        cluster.kill(coordinator)
        cluster.wait_for(
            lambda: (
                cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition_for(TXN, 3))
                not in (-1, coordinator)
            ),
            90,
            "a new transaction coordinator",
        )
        producer.commit_transaction(120)
        producer.begin_transaction()
        producer.produce(TOPIC, b"c0", partition=0)
        producer.commit_transaction(60)
        producer.flush(30)
        got = read_committed(cluster.bootstrap, 61)
        expected = {b"a%d" % i for i in range(30)} | {b"b%d" % i for i in range(30)} | {b"c0"}
        assert len(got) == len(set(got)), "a duplicate"
        assert set(got) == expected
