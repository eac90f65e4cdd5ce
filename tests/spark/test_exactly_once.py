"""The exactly-once streaming sink (`exactlyOnce=true`): a query (tests/spark/eos_job.py,
in its own process and JVM) copies a topic through the sink while its tasks fail once
each and are retried, or while its driver is killed with -9 mid-batch and started again
from its checkpoint; a read_committed confluent-kafka consumer then sees every row once.
Bad options are refused with a clear error (in the shared test session)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.errors import PySparkException
from spark_support import Job, create_topic, output, produce, read_all


def kcat_values(bootstrap: str, topic: str) -> list[bytes]:
    """Partition 0 of `topic` read to its end by kcat with isolation.level=read_committed."""
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
         "-X", "isolation.level=read_committed", "-f", "%s\\n"],
        capture_output=True, timeout=60, check=True,
    )
    return out.stdout.splitlines()


def committed_batch(bootstrap: str, group: str, topic: str) -> int:
    """The offset committed by `group` for partition 0 of `topic` (-1001 when none)."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()






def test_task_retries_write_every_row_once(broker: Any, tmp_path: Path, jobs: list[Job]) -> None:
    b = broker.bootstrap
    create_topic(b, "in", 2)
    create_topic(b, "out", 1)
    pad = b"x" * 65536  # 256 rows of a task fill the sink's 16 MiB group: sent before the failure
    for p in (0, 1):
        produce(b, "in", [b"%d-%03d-" % (p, i) + pad for i in range(320)], partition=p,
                batch_size=500_000)
    failed = tmp_path / "failed"
    failed.mkdir()
    job = Job(b, tmp_path, "--master", "local[2,4]", "--fail-once", str(failed),
              "--fail-after", "300")
    jobs.append(job)
    assert job.wait() == 0, output(tmp_path)
    assert sorted(f.name for f in failed.iterdir()) == ["failed-0-0", "failed-0-1"]

    committed = read_all(b, "out", "read_committed")
    expected = {b"%d-%03d-" % (p, i) + pad for p in (0, 1) for i in range(320)}
    assert len(committed) == 640 and set(committed) == expected
    # The failed attempts had sent rows (their input ended early, as Spark ends it when
    # a task fails upstream of the sink), in transactions that were never committed.
    assert len(read_all(b, "out", "read_uncommitted")) > 640
    # Each writer recorded micro-batch 0 with its rows.
    assert committed_batch(b, "copy-0", "out") == 0
    assert committed_batch(b, "copy-1", "out") == 0


def test_driver_killed_mid_batch_restarts_exactly_once(
    broker: Any, tmp_path: Path, jobs: list[Job]
) -> None:
    b = broker.bootstrap
    create_topic(b, "in", 2)
    create_topic(b, "out", 1)
    for p in (0, 1):
        produce(b, "in", [b"%d-%03d" % (p, i) for i in range(60)], partition=p)
    signal_dir = tmp_path / "signal"
    signal_dir.mkdir()
    # Micro-batches of 40 rows (20 of each partition); in micro-batch 1 the task of Spark
    # partition 1 stalls, while the task of partition 0 has written its 20 rows in its
    # transaction, which waits for the driver to commit it.
    first = Job(b, tmp_path, "--max-offsets", "40", "--stall-batch", "1",
                "--stall-partition", "1", "--signal", str(signal_dir))
    jobs.append(first)
    deadline = time.monotonic() + 240
    while not (
        (signal_dir / "stalled").exists() and len(read_all(b, "out", "read_uncommitted")) >= 60
    ):
        assert first.proc.poll() is None, output(tmp_path)
        assert time.monotonic() < deadline, output(tmp_path)
        time.sleep(0.5)
    first.kill()  # the whole driver (JVM, Python workers) at once
    # Micro-batch 0 is committed; micro-batch 1 is half written and not visible.
    assert len(read_all(b, "out", "read_uncommitted")) == 60
    assert sorted(read_all(b, "out", "read_committed")) == sorted(
        b"%d-%03d" % (p, i) for p in (0, 1) for i in range(20)
    )

    again = Job(b, tmp_path, "--max-offsets", "40")
    jobs.append(again)
    assert again.wait() == 0, output(tmp_path)
    values = read_all(b, "out", "read_committed")
    assert len(values) == 120
    assert set(values) == {b"%d-%03d" % (p, i) for p in (0, 1) for i in range(60)}
    if shutil.which("kcat"):  # kcat reads read_committed too
        assert sorted(kcat_values(b, "out")) == sorted(values)
    # The 20 rows of the killed driver's open transaction were aborted, written again.
    assert len(read_all(b, "out", "read_uncommitted")) == 140
    assert committed_batch(b, "copy-0", "out") == 2
    assert committed_batch(b, "copy-1", "out") == 2


def test_exactly_once_bad_options(spark: Any, broker: Any, tmp_path: Path) -> None:
    b = broker.bootstrap
    create_topic(b, "src", 1)
    stream = (
        spark.readStream.format("logbus").option("kafka.bootstrap.servers", b)
        .option("subscribe", "src").load()
    )

    def start(source: Any = stream, **options: str) -> None:
        writer = source.writeStream.format("logbus").option("kafka.bootstrap.servers", b)
        for name, value in options.items():
            writer = writer.option(name, value)
        # Spark makes the sink when the query starts, in the query's thread: the error
        # ends the query.
        query = writer.option("checkpointLocation", str(tmp_path / "cp")).start()
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    with pytest.raises(PySparkException, match="'transactionalIdPrefix' is required"):
        start(topic="t", exactlyOnce="true")
    with pytest.raises(PySparkException, match="'exactlyOnceMarkerTopic' must name"):
        start(exactlyOnce="true", transactionalIdPrefix="p")
    with pytest.raises(PySparkException, match="'transactionalIdPrefix' needs exactlyOnce"):
        start(topic="t", transactionalIdPrefix="p")
    with pytest.raises(PySparkException, match="'exactlyOnce' must be true or false"):
        start(topic="t", exactlyOnce="yes")
    with pytest.raises(PySparkException, match=r"'kafka\.transactional\.id' is not supported"):
        start(topic="t", exactlyOnce="true", transactionalIdPrefix="p",
              **{"kafka.transactional.id": "x"})
    with pytest.raises(PySparkException, match="acks must be all"):
        start(topic="t", exactlyOnce="true", transactionalIdPrefix="p", **{"kafka.acks": "1"})
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="'exactlyOnce' is for streaming writes"):
        (df.write.format("logbus").option("kafka.bootstrap.servers", b).option("topic", "t")
         .option("exactlyOnce", "true").option("transactionalIdPrefix", "p")
         .mode("append").save())


def test_replayed_batch_committed_before_is_skipped(
    spark: Any, broker: Any, tmp_path: Path
) -> None:
    """Rows with headers, to two topics (the `topic` column) with the writers' records
    under a marker topic; then the checkpoint loses its last commit, as when the driver
    dies after committing the transactions and before recording the micro-batch: the
    restarted query replays it, and its writers find it committed and write nothing."""
    b = broker.bootstrap
    create_topic(b, "events", 2)
    for name in ("evens", "odds", "marks"):
        create_topic(b, name, 1)
    for p in (0, 1):
        produce(b, "events", [b"%d" % (p * 100 + i) for i in range(25)], partition=p)
    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        source = (
            spark.readStream.format("logbus").option("kafka.bootstrap.servers", b)
            .option("subscribe", "events").option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20").load()
        )
        query = (
            source.selectExpr(
                "value",
                "IF(CAST(CAST(value AS STRING) AS INT) % 2 = 0, 'evens', 'odds') AS topic",
                "array(named_struct('key', 'offset', "
                "'value', CAST(CAST(offset AS STRING) AS BINARY))) AS headers",
            )
            .writeStream.format("logbus").option("kafka.bootstrap.servers", b)
            .option("exactlyOnce", "true").option("transactionalIdPrefix", "split")
            .option("exactlyOnceMarkerTopic", "marks")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination(300)
        assert query.exception() is None
        return query

    run()
    commits = sorted(int(f.name) for f in (checkpoint / "commits").iterdir()
                     if f.name.isdigit())
    assert commits == [0, 1, 2]  # 50 rows, 20 a micro-batch
    for name in ("2", ".2.crc"):  # the commit and its checksum file
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    replay = run()
    assert [p["batchId"] for p in replay.recentProgress if p["numInputRows"]] == [2]

    values: list[bytes] = []
    for name in ("evens", "odds"):
        values += read_all(b, name, "read_committed")
        assert read_all(b, name, "read_uncommitted") == read_all(b, name, "read_committed")
    assert sorted(values) == sorted(b"%d" % (p * 100 + i) for p in (0, 1) for i in range(25))
    assert committed_batch(b, "split-0", "marks") == 2


def test_a_marker_topic_that_does_not_exist_is_named(
    spark: Any, broker_factory: Any, tmp_path: Path
) -> None:
    """Where brokers do not create topics on first use, a missing marker topic fails the
    first task with an error naming it (where they do, it is created, as the output
    topic is)."""
    b = broker_factory(auto_create_topics_enable="false").bootstrap
    create_topic(b, "src", 1)
    produce(b, "src", [b"v"])
    query = (
        spark.readStream.format("logbus").option("kafka.bootstrap.servers", b)
        .option("subscribe", "src").option("startingOffsets", "earliest").load()
        .select("value")
        .writeStream.format("logbus").option("kafka.bootstrap.servers", b)
        .option("topic", "src").option("exactlyOnce", "true")
        .option("transactionalIdPrefix", "p").option("exactlyOnceMarkerTopic", "no-such")
        .option("kafka.max.block.ms", "2000")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True).start()
    )
    try:
        with pytest.raises(PySparkException, match=r"the marker topic 'no-such' .* is not there"):
            query.awaitTermination(120)
    finally:
        query.stop()
