"""The logbus source with `kafka.isolation.level=read_committed`: rows of aborted
transactions are never returned, and "latest" is the last stable offset, so rows of a
transaction still open (and whatever follows it) wait until it ends. Written with the
logbus transactional producer and confluent-kafka's idempotent one, interleaved."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import PySparkException
from spark_support import create_topic, produce, reader

import logbus


def values(df: Any) -> list[bytes]:
    return sorted(bytes(r.value) for r in df.select("value").collect())


def test_read_committed_drops_aborted_and_stops_at_the_open_transaction(
    spark: Any, broker: Any
) -> None:
    b = broker.bootstrap
    create_topic(b, "txn", 2)
    with logbus.Producer(bootstrap_servers=b, transactional_id="rc-writer") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send("txn", b"c%d" % i, partition=i % 2)
        producer.commit_transaction()
        produce(b, "txn", [b"plain0"], partition=0)  # outside any transaction
        producer.begin_transaction()
        for i in range(10):
            producer.send("txn", b"a%d" % i, partition=i % 2)
        producer.flush()  # written, then aborted
        producer.abort_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send("txn", b"d%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("txn", b"open0", partition=1)
        producer.flush()
        produce(b, "txn", [b"plain1"], partition=1)  # after the open transaction's start

        committed = {b"c%d" % i for i in range(10)} | {b"d%d" % i for i in range(4)}
        rc = reader(spark, b, subscribe="txn", **{"kafka.isolation.level": "read_committed"})
        assert values(rc.load()) == sorted(committed | {b"plain0"})
        everything = values(reader(spark, b, subscribe="txn").load())
        assert {b"a0", b"open0", b"plain1"} <= set(everything)

        producer.commit_transaction()
    assert values(rc.load()) == sorted(committed | {b"plain0", b"open0", b"plain1"})


def test_isolation_level_must_be_known(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "t", 1)
    with pytest.raises(PySparkException, match="must be read_uncommitted or read_committed"):
        reader(spark, broker.bootstrap, subscribe="t",
               **{"kafka.isolation.level": "serializable"}).load().collect()


def test_exactly_once_pipeline_reads_and_writes_committed_rows(
    spark: Any, broker: Any, tmp_path: Any
) -> None:
    """Spark to Spark: a query reads a topic read_committed (an aborted transaction in
    it) and writes it with exactlyOnce; a batch query reads the output read_committed."""
    b = broker.bootstrap
    create_topic(b, "raw", 2)
    create_topic(b, "clean", 2)
    with logbus.Producer(bootstrap_servers=b, transactional_id="pipeline-in") as producer:
        producer.init_transactions()
        for n, commit in ((0, True), (1, False), (2, True)):
            producer.begin_transaction()
            for i in range(15):
                producer.send("raw", b"%d-%02d" % (n, i), partition=i % 2)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    committed_only = {"kafka.isolation.level": "read_committed"}
    source = (
        spark.readStream.format("logbus").option("kafka.bootstrap.servers", b)
        .option("subscribe", "raw").option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10").options(**committed_only).load()
    )
    query = (
        source.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("logbus").option("kafka.bootstrap.servers", b)
        .option("topic", "clean").option("exactlyOnce", "true")
        .option("transactionalIdPrefix", "pipeline")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    got = values(reader(spark, b, subscribe="clean", **committed_only).load())
    assert got == sorted(b"%d-%02d" % (n, i) for n in (0, 2) for i in range(15))
