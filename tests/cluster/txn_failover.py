"""What the transaction failover tests share: a 3-broker cluster (`logbus server start`
processes on a real ZooKeeper) with `__transaction_state` replicated three ways, and the
scenario of a transaction coordinator killed with kill -9 in the middle of a transaction,
checked with a read_committed consumer. The tests differ in the producer they drive
(confluent-kafka's, logbus's)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_processes import ProcessCluster
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for

TOPIC = "ha-out"
PARTITIONS = 3
# the brokers' settings: transactions and groups replicated on every broker of three
TXN_CLUSTER_SETTINGS = {
    "min_insync_replicas": "2",
    "transaction_state_log_num_partitions": "3",
    "transaction_state_log_replication_factor": "3",
    "transaction_state_log_min_isr": "2",
    "offsets_topic_num_partitions": "3",
    "group_initial_rebalance_delay_ms": "0",
}


def txn_cluster(zk_connect: str, tmp_path: Path) -> ProcessCluster:
    """The 3-broker cluster, to be entered with `with`."""
    return ProcessCluster(zk_connect, 3, tmp_path, **TXN_CLUSTER_SETTINGS)


def txn_coordinator(cluster: ProcessCluster, transactional_id: str) -> int:
    """The broker coordinating `transactional_id` (-1 while none leads its partition)."""
    return int(cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition_for(transactional_id, 3)))


def read_committed(bootstrap: str, expected: int) -> list[bytes]:
    """Every committed value of TOPIC, once at least `expected` have come and 2 s passed
    without more (60 s at most)."""
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


def commit_across_a_coordinator_kill(
    cluster: ProcessCluster,
    transactional_id: str,
    producer: Any,
    send: Callable[[bytes, int], None],
    flush: Callable[[], None],
) -> None:
    """One committed and one aborted transaction with every broker up; then the
    coordinator dies with a transaction open on every partition, the producer commits it
    through the new coordinator, and one more transaction commits. A read_committed
    consumer sees every committed value once and no aborted one. `producer` has Kafka's
    transactional methods; `send(value, partition)` sends to TOPIC."""

    def coordinator() -> int:
        return txn_coordinator(cluster, transactional_id)

    producer.init_transactions(60)
    for prefix, end in ((b"a", producer.commit_transaction), (b"x", producer.abort_transaction)):
        producer.begin_transaction()
        for i in range(30):
            send(prefix + b"%d" % i, i % PARTITIONS)
        end(60)
    killed = coordinator()
    assert killed >= 0
    producer.begin_transaction()
    for i in range(30):
        send(b"b%d" % i, i % PARTITIONS)
    flush()
    cluster.kill(killed)
    cluster.wait_for(lambda: coordinator() not in (-1, killed), 90, "a new transaction coordinator")
    producer.commit_transaction(120)
    producer.begin_transaction()
    send(b"c0", 0)
    producer.commit_transaction(60)
    got = read_committed(cluster.bootstrap, 61)
    expected = {b"a%d" % i for i in range(30)} | {b"b%d" % i for i in range(30)} | {b"c0"}
    assert len(got) == len(set(got)), "a duplicate"
    assert set(got) == expected
