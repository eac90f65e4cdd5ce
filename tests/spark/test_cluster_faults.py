"""The source and sink over a replicated cluster (three `logbus server start` processes on a
real ZooKeeper, topics replicated three times, min.insync.replicas=2) while partition
leaders and a transaction coordinator are killed with -9: planning (Metadata, ListOffsets
in `prepareForTriggerAvailableNow` and `latestOffset`) and the executors' fetches use the
live brokers and follow the new leaders; a batch read, an AvailableNow query and a running
query read every record once; the sink with acks=all loses nothing; the exactly-once sink
commits through the new coordinator. confluent-kafka writes the input and reads the
output back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType
from spark_support import consume_all, produce, read_all, reader, transactional_cluster

from logbus.coordinator.transaction.state_topic import (
    TRANSACTION_STATE_TOPIC,
    txn_partition_for,
)

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


@pytest.fixture
def cluster(zk_connect: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    with transactional_cluster(zk_connect, tmp_path) as made:
        yield made


def every_address(cluster: ProcessCluster) -> str:
    """All three brokers, dead or alive: what a user configures once."""
    return ",".join(node.address for node in cluster.nodes.values())


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": "hw-probe"})
    try:
        return sum(
            consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()


def test_reads_follow_leaders_killed_before_and_during_queries(
    spark: Any, cluster: ProcessCluster, tmp_path: Path
) -> None:
    cluster.create_topic("events", partitions=3, replication_factor=3)
    expected = []
    for p in range(3):
        values = [b"%d-%05d" % (p, i) for i in range(1500)]
        produce(cluster.bootstrap, "events", values, partition=p, acks="all")
        expected += values
    addresses = every_address(cluster)

    # A leader killed just before the queries plan: its metadata still names it for a while.
    first = cluster.leader_of("events", 0)
    cluster.kill(first)
    batch = reader(spark, addresses, subscribe="events").load()
    assert sorted(r.value for r in batch.select("value").collect()) == sorted(expected)

    query = (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", addresses)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("memory")
        .queryName("after_kill")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    rows = spark.table("after_kill").collect()
    assert sorted(r.value for r in rows) == sorted(expected)

    # A running query (40 micro-batches' worth of backlog) while the leader of another
    # partition dies: it goes on from the new leaders, nothing missing or read twice.
    second = next(
        leader for p in range(3)
        if (leader := cluster.leader_of("events", p)) not in (-1, first)
    )
    running = (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", addresses)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "120")
        .load()
        .select("value")
        .writeStream.format("memory")
        .queryName("during_kill")
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        cluster.wait_for(
            lambda: running.exception() is not None or spark.table("during_kill").count() > 0,
            300,
            "a first batch",
        )
        assert running.exception() is None
        cluster.kill(second)
        cluster.wait_for(
            lambda: running.exception() is not None
            or spark.table("during_kill").count() >= len(expected),
            300,
            "the query to read everything",
        )
        assert running.exception() is None
        assert running.isActive
    finally:
        running.stop()
    rows = spark.table("during_kill").collect()
    assert sorted(r.value for r in rows) == sorted(expected)


def test_sink_with_acks_all_loses_nothing_when_a_leader_dies(
    spark: Any, cluster: ProcessCluster
) -> None:
    cluster.create_topic("sunk", partitions=3, replication_factor=3)
    addresses = every_address(cluster)
    total = 12000
    # The leader dies as the write starts: the metadata the tasks first get still names it.
    cluster.kill(cluster.leader_of("sunk", 0))
    (spark.range(0, total, numPartitions=2)
     .selectExpr("CAST(format_string('row-%06d', id) AS BINARY) AS value")
     .write.format("logbus")
     .option("kafka.bootstrap.servers", addresses)
     .option("topic", "sunk")
     .option("kafka.acks", "all")
     .mode("append")
     .save())
    records = consume_all(cluster.bootstrap, "sunk", 3, total)
    values = sorted(m.value() for m in records)
    assert values == sorted(b"row-%06d" % i for i in range(total))


def test_exactly_once_sink_commits_through_a_new_coordinator(
    spark: Any, cluster: ProcessCluster, tmp_path: Path
) -> None:
    cluster.create_topic("src", partitions=2, replication_factor=3)
    cluster.create_topic("dst", partitions=1, replication_factor=3)
    for p in (0, 1):
        produce(cluster.bootstrap, "src", [b"%d-%03d" % (p, i) for i in range(60)],
                partition=p, acks="all")
    addresses = every_address(cluster)
    gate = tmp_path / "gate"
    gate.mkdir()
    gate_dir = str(gate)

    def hold_batch_one(value: bytes) -> bytes:
        # Micro-batch 1 waits, its transactions open, until the coordinator is killed.
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.getLocalProperty("streaming.sql.batchId") == "1":
            Path(gate_dir, "held").touch()
            deadline = time.monotonic() + 300
            while not Path(gate_dir, "go").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        return value

    query = (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", addresses)
        .option("subscribe", "src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .select("key", udf(hold_batch_one, BinaryType(), useArrow=False)("value").alias("value"))
        .writeStream.format("logbus")
        .option("kafka.bootstrap.servers", addresses)
        .option("topic", "dst")
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", "dst-copy")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        cluster.wait_for(
            lambda: (gate / "held").exists() or query.exception() is not None,
            300,
            "micro-batch 1 to start",
        )
        assert query.exception() is None
        partition = txn_partition_for("dst-copy-0", 3)
        coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, partition)
        assert coordinator >= 0
        cluster.kill(coordinator)
        cluster.wait_for(
            lambda: cluster.leader_of(TRANSACTION_STATE_TOPIC, partition)
            not in (-1, coordinator),
            90,
            "a new transaction coordinator",
        )
        (gate / "go").touch()
        query.awaitTermination(300)
        assert query.exception() is None
    finally:
        (gate / "go").touch()
        query.stop()
    values = read_all(cluster.bootstrap, "dst", "read_committed")
    assert sorted(values) == sorted(b"%d-%03d" % (p, i) for p in (0, 1) for i in range(60))
