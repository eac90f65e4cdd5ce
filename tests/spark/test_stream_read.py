"""Streaming reads: restarts from a checkpoint with no record lost or repeated, the read
limit, Trigger.AvailableNow, new partitions, a failed micro-batch replayed, progress."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from spark_support import create_topic, produce

from logbus.spark.options import LogbusSparkError, parse_read_options


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    builder = spark.readStream.format("logbus").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder.load()


def run_available_now(df: Any, out: Path, checkpoint: Path) -> Any:
    query = (
        df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert query.exception() is None
    return query


def test_restart_from_checkpoint_limit_and_new_partitions(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    b = broker.bootstrap
    create_topic(b, "clicks", 2)
    produce(b, "clicks", [b"a%d" % i for i in range(18)], partition=0)
    produce(b, "clicks", [b"b%d" % i for i in range(12)], partition=1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, b, subscribe="clicks", startingOffsets="earliest",
                maxOffsetsPerTrigger="10")
    query = run_available_now(df, out, checkpoint)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(progress) == 3
    assert all(p["numInputRows"] <= 10 for p in progress)
    assert sum(p["numInputRows"] for p in progress) == 30
    source = progress[-1]["sources"][0]
    assert json.loads(source["endOffset"]) == {"clicks": {"0": 18, "1": 12}}
    assert source["endOffset"] == json.dumps({"clicks": {"0": 18, "1": 12}}, sort_keys=True)
    assert json.loads(source["latestOffset"]) == {"clicks": {"0": 18, "1": 12}}

    # More records and a new partition while the query is down; the restart reads them all.
    produce(b, "clicks", [b"a%d" % i for i in range(18, 25)], partition=0)
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_partitions([NewPartitions("clicks", 3)])["clicks"].result(30)
    produce(b, "clicks", [b"c%d" % i for i in range(5)], partition=2)
    run_available_now(df, out, checkpoint)

    rows = spark.read.parquet(str(out)).collect()
    keys = sorted((r.partition, r.offset) for r in rows)
    expected = sorted(
        [(0, o) for o in range(25)] + [(1, o) for o in range(12)] + [(2, o) for o in range(5)]
    )
    assert keys == expected  # each record exactly once
    assert {(r.partition, r.offset): r.value for r in rows}[(2, 4)] == "c4"

    # A third run with nothing new adds nothing.
    run_available_now(df, out, checkpoint)
    assert spark.read.parquet(str(out)).count() == len(expected)


def test_failed_micro_batch_is_replayed(spark: Any, broker: Any, tmp_path: Path) -> None:
    b = broker.bootstrap
    create_topic(b, "orders", 1)
    produce(b, "orders", [b"o%d" % i for i in range(20)])
    seen = tmp_path / "seen"
    seen.mkdir()
    marker = tmp_path / "failed-once"

    def sink(batch: Any, batch_id: int) -> None:
        offsets = sorted(r.offset for r in batch.select("offset").collect())
        attempt = "retry" if marker.exists() else "first"
        (seen / f"{batch_id}-{attempt}.json").write_text(json.dumps(offsets))
        if batch_id == 1 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("the sink failed in batch 1")

    def start() -> Any:
        df = stream(spark, b, subscribe="orders", startingOffsets="earliest",
                    maxOffsetsPerTrigger="8")
        return (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )

    failed = start()
    with pytest.raises(Exception, match="the sink failed in batch 1"):
        failed.awaitTermination(120)
    assert json.loads((seen / "1-first.json").read_text()) == list(range(8, 16))

    start().awaitTermination(120)
    # The failed batch ran again over exactly the same offsets, then the rest followed.
    assert json.loads((seen / "1-retry.json").read_text()) == list(range(8, 16))
    done = sorted(
        o
        for name in ("0-first.json", "1-retry.json", "2-retry.json")
        for o in json.loads((seen / name).read_text())
    )
    assert done == list(range(20))


def test_offsets_removed_by_retention_fail_the_stream(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    broker = broker_factory(log_retention_check_interval_ms="100")
    b = broker.bootstrap
    create_topic(b, "logs", 1, **{"segment.bytes": "1024", "retention.bytes": "1024"})
    produce(b, "logs", [b"x" * 200], batch_num_messages=1)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    df = stream(spark, b, subscribe="logs", startingOffsets="earliest")
    run_available_now(df, out, checkpoint)  # the query is now at offset 1
    produce(b, "logs", [b"y" * 200 for _ in range(40)], batch_num_messages=1)
    from logbus.spark.offset_reader import OffsetReader
    from logbus.spark.options import ClientSettings

    offsets = OffsetReader(ClientSettings(b))
    try:
        deadline = time.monotonic() + 30
        while offsets.earliest([("logs", 0)])[("logs", 0)] <= 1:
            assert time.monotonic() < deadline, "retention never removed a segment"
            time.sleep(0.2)
    finally:
        offsets.close()

    query = (
        df.writeStream.format("parquet").option("path", str(out))
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )
    with pytest.raises(Exception, match="partition logs-0: offset 1 is out of range"):
        query.awaitTermination(120)

    lenient = stream(spark, b, subscribe="logs", startingOffsets="earliest",
                     failOnDataLoss="false")
    run_available_now(lenient, out, checkpoint)
    offsets_read = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets_read[0] == 0 and offsets_read[-1] == 40
    assert 1 not in offsets_read  # removed before it was read, skipped as asked


def test_stream_bad_options(spark: Any, broker: Any) -> None:
    cases = [
        ({"subscribe": "x", "endingOffsets": "latest"},
         "option 'endingOffsets' is for batch queries only"),
        ({"subscribe": "x", "maxOffsetsPerTrigger": "0"},
         "option 'maxOffsetsPerTrigger' must be at least 1"),
        ({"subscribe": "no-such-topic"},
         "option 'subscribe': topic 'no-such-topic' does not exist"),
    ]
    for options, message in cases:
        query = stream(spark, broker.bootstrap, **options).writeStream.format("console").start()
        try:
            with pytest.raises(Exception, match=message):
                query.awaitTermination(120)
        finally:
            query.stop()


def test_min_offsets_per_trigger_and_max_trigger_delay(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "trickle", 1)
    produce(b, "trickle", [b"a%d" % i for i in range(30)])

    def start(name: str, **options: str) -> Any:
        df = stream(spark, b, subscribe="trickle", startingOffsets="earliest", **options)
        return (df.select("value").writeStream.format("memory").queryName(name)
                .trigger(processingTime="100 milliseconds").start())

    held = start("held", minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    try:
        held.processAllAvailable()  # the first micro-batch is never held back (as in Spark)
        assert spark.table("held").count() == 30
        produce(b, "trickle", [b"b%d" % i for i in range(20)])
        held.processAllAvailable()  # 20 waiting, fewer than 50: no micro-batch
        assert spark.table("held").count() == 30
        produce(b, "trickle", [b"c%d" % i for i in range(30)])
        held.processAllAvailable()  # 50 waiting: one micro-batch takes them all
        assert spark.table("held").count() == 80
    finally:
        held.stop()

    # With a short maxTriggerDelay a few records go through once it has passed.
    delayed = start("delayed", minOffsetsPerTrigger="1000", maxTriggerDelay="1s")
    try:
        delayed.processAllAvailable()
        assert spark.table("delayed").count() == 80
        produce(b, "trickle", [b"d%d" % i for i in range(5)])
        deadline = time.monotonic() + 120
        while spark.table("delayed").count() < 85 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert spark.table("delayed").count() == 85
    finally:
        delayed.stop()


def test_min_offsets_per_trigger_checks() -> None:
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    options = parse_read_options(
        base | {"minOffsetsPerTrigger": "10", "maxTriggerDelay": "2m"}, streaming=True
    )
    assert (options.min_offsets_per_trigger, options.max_trigger_delay_ms) == (10, 120_000)
    assert parse_read_options(base, streaming=True).max_trigger_delay_ms == 15 * 60_000
    with pytest.raises(LogbusSparkError, match="must not be more than 'maxOffsetsPerTrigger'"):
        parse_read_options(
            base | {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, streaming=True
        )
    with pytest.raises(LogbusSparkError, match="'maxTriggerDelay' must be a duration"):
        parse_read_options(base | {"maxTriggerDelay": "soon"}, streaming=True)
    with pytest.raises(LogbusSparkError, match="for streaming queries only"):
        parse_read_options(base | {"minOffsetsPerTrigger": "10"}, streaming=False)
