"""Streaming reads: restarts from a checkpoint with no record lost or repeated, the read
limit, Trigger.AvailableNow, new partitions, a failed micro-batch replayed, progress."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType
from spark_support import create_topic, produce

from kafka_wire import wait_for
from logbus.spark.offset_range import OffsetRange
from logbus.spark.offset_reader import OffsetReader
from logbus.spark.options import ClientSettings, LogbusSparkError, parse_read_options
from logbus.spark.partition_reader import read_range
from logbus.spark.schema import arrow_schema


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


class HeldAtBatchOne:
    """A running query over a topic whose segments retention deletes: micro-batch 1 waits
    in its tasks (a UDF at a gate) while the test writes enough for retention to remove
    the next offsets the query would read; `release()` lets it go on, and micro-batch 2
    starts at an offset no longer in the log."""

    def __init__(self, spark: Any, b: str, topic: str, tmp: Path, fail: str) -> None:
        self.spark, self.b, self.topic, self.name = spark, b, topic, f"{topic}_rows"
        self.gate = tmp / "gate"
        self.gate.mkdir()
        gate_dir = str(self.gate)

        def hold_batch_one(value: bytes) -> bytes:
            from pyspark import TaskContext

            context = TaskContext.get()
            if context is not None and context.getLocalProperty("streaming.sql.batchId") == "1":
                Path(gate_dir, "held").touch()
                deadline = time.monotonic() + 300
                while not Path(gate_dir, "go").exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
            return value

        create_topic(b, topic, 1, **{"segment.bytes": "1024", "retention.bytes": "1024"})
        produce(b, topic, [b"a" * 200 for _ in range(3)], batch_num_messages=1)
        self.query = (
            stream(spark, b, subscribe=topic, startingOffsets="earliest", failOnDataLoss=fail)
            .select("offset", udf(hold_batch_one, BinaryType(), useArrow=False)("value"))
            .writeStream.format("memory").queryName(self.name)
            .option("checkpointLocation", str(tmp / "checkpoint"))
            .trigger(processingTime="100 milliseconds").start()
        )

    def offsets(self) -> list[int]:
        return [r.offset for r in self.spark.table(self.name).select("offset").collect()]

    def wait_rows(self, count: int) -> None:
        wait_for(lambda: self.query.exception() is not None or len(self.offsets()) >= count,
                 120, 0.2, what=f"{count} rows read")
        assert self.query.exception() is None

    def hold_while_retention_deletes(self) -> int:
        """Micro-batch 0 reads offsets 0-2; micro-batch 1 (offset 3) waits at the gate
        while 40 more records (4-43) arrive and retention deletes the segments holding
        offset 4 and more. The log's new start offset."""
        self.wait_rows(3)
        produce(self.b, self.topic, [b"b" * 200], batch_num_messages=1)
        wait_for(lambda: self.query.exception() is not None or (self.gate / "held").exists(),
                 120, 0.2, what="micro-batch 1 at the gate")
        assert self.query.exception() is None
        produce(self.b, self.topic, [b"c" * 200 for _ in range(40)], batch_num_messages=1)
        offsets = OffsetReader(ClientSettings(self.b))
        try:
            return int(wait_for(
                lambda: (start := offsets.earliest([(self.topic, 0)])[(self.topic, 0)]) > 4
                and start,
                30, 0.2, what="retention to remove offset 4",
            ))
        finally:
            offsets.close()

    def release(self) -> None:
        (self.gate / "go").touch()

    def stop(self) -> None:
        self.release()
        self.query.stop()


def test_retention_under_a_running_query_fails_it(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    b = broker_factory(log_retention_check_interval_ms="100").bootstrap
    held = HeldAtBatchOne(spark, b, "aging", tmp_path, fail="true")
    try:
        start = held.hold_while_retention_deletes()
        held.release()
        # The offsets lost (from the first one the query planned up to where the log
        # starts now, at least `start`), and the option that would let the query go on.
        with pytest.raises(Exception, match=(
            r"partition aging-0: offset 4 is out of range \(the log now starts at \d+\); "
            r"offsets 4 to \d+ planned for this query are gone \(set failOnDataLoss=false"
        )) as failed:
            held.query.awaitTermination(120)
        lost = re.search(r"now starts at (\d+)\); offsets 4 to (\d+) ", str(failed.value))
        assert lost is not None
        assert int(lost.group(1)) >= start and int(lost.group(2)) == int(lost.group(1)) - 1
    finally:
        held.stop()
    # Nothing of micro-batch 2 was added: the rows read are those of 0 and 1.
    assert sorted(held.offsets()) == [0, 1, 2, 3]


def test_retention_under_a_running_query_with_fail_on_data_loss_false(
    spark: Any, broker_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = broker_factory(log_retention_check_interval_ms="100").bootstrap
    held = HeldAtBatchOne(spark, b, "fading", tmp_path, fail="false")
    try:
        start = held.hold_while_retention_deletes()
        held.release()
        wait_for(lambda: held.query.exception() is not None or 43 in held.offsets(),
                 120, 0.2, what="micro-batch 2")
        assert held.query.exception() is None
        produce(b, "fading", [b"d" * 200 for _ in range(3)], batch_num_messages=1)
        wait_for(lambda: held.query.exception() is not None or 46 in held.offsets(),
                 120, 0.2, what="micro-batch 3")
        assert held.query.exception() is None
        assert held.query.isActive
    finally:
        held.stop()
    # Micro-batch 2 went on from where the log started then (the offsets retention had
    # removed were skipped), and the query kept reading: each offset read once.
    offsets = held.offsets()
    assert len(offsets) == len(set(offsets))
    resumed = min(o for o in offsets if o > 3)
    assert resumed >= start > 4
    assert sorted(offsets) == [0, 1, 2, 3, *range(resumed, 47)]

    # What a task logs as it skips them (Spark's Kafka source warns too): the same range,
    # read in this process.
    with caplog.at_level(logging.WARNING, logger="logbus.spark.partition_reader"):
        batches = list(read_range(ClientSettings(b), OffsetRange("fading", 0, 4, 47),
                                  arrow_schema(False), fail_on_data_loss=False))
    read = [o for batch in batches for o in batch.column("offset").to_pylist()]
    assert read == list(range(read[0], 47))
    assert read[0] >= resumed
    assert (
        f"partition fading-0: offset 4 is out of range (the log now starts at {read[0]}); "
        f"offsets 4 to {read[0] - 1} planned for this query are gone and skipped "
        "(failOnDataLoss=false)"
    ) in caplog.messages


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


def _delete_topic(b: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": b})
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, 0.2,
             what=f"{topic} gone from metadata")


def test_a_topic_deleted_under_a_running_query_fails_it(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "doomed", 2)
    produce(b, "doomed", [b"%d" % i for i in range(10)])
    query = (
        stream(spark, b, subscribe="doomed", startingOffsets="earliest")
        .select("partition", "offset").writeStream.format("memory").queryName("doomed_rows")
        .trigger(processingTime="100 milliseconds").start()
    )
    try:
        wait_for(lambda: query.exception() is not None
                 or spark.table("doomed_rows").count() >= 10, 120, 0.2, what="10 rows read")
        assert query.exception() is None
        _delete_topic(b, "doomed")
        # The planner's next look finds the partitions gone: data may have been lost, and
        # failOnDataLoss (true by default) stops the query, naming the option.
        with pytest.raises(Exception, match=(
            r"partition doomed-\d no longer exists; some data may have been lost "
            r"\(set failOnDataLoss=false to go on without it\)"
        )):
            query.awaitTermination(120)
    finally:
        query.stop()


def test_a_task_whose_topic_was_deleted(broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A range planned before its topic was deleted: the task fails with failOnDataLoss,
    or warns, naming the offsets, and ends without them."""
    b = broker.bootstrap
    create_topic(b, "vanished", 1)
    produce(b, "vanished", [b"v" * 10 for _ in range(5)])
    _delete_topic(b, "vanished")
    planned = OffsetRange("vanished", 0, 0, 5)
    with pytest.raises(LogbusSparkError, match=(
        r"partition vanished-0: the topic or partition was deleted; offsets 0 to 4 planned "
        r"for this query are gone \(set failOnDataLoss=false to read what is left\)"
    )):
        list(read_range(ClientSettings(b), planned, arrow_schema(False),
                        fail_on_data_loss=True))
    with caplog.at_level(logging.WARNING, logger="logbus.spark.partition_reader"):
        assert list(read_range(ClientSettings(b), planned, arrow_schema(False),
                               fail_on_data_loss=False)) == []
    assert (
        "partition vanished-0: the topic or partition was deleted; offsets 0 to 4 planned "
        "for this query are gone and skipped (failOnDataLoss=false)"
    ) in caplog.messages
