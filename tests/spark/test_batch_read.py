"""Batch reads through `spark.read.format("logbus")` against a real broker: the row schema,
every option, split ranges, and the errors for bad input."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.errors import PySparkException
from spark_support import create_topic, produce, reader

from logbus.spark.options import parse_read_options
from logbus.spark.source import LogbusBatchReader


def rows_by_offset(df: Any) -> dict[tuple[str, int, int], Any]:
    return {(r.topic, r.partition, r.offset): r for r in df.collect()}


def test_schema_and_rows_of_every_codec(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "codecs", 4)
    codecs = ["none", "gzip", "snappy", "zstd"]
    for p, codec in enumerate(codecs):
        produce(
            broker.bootstrap, "codecs", [f"{codec}-{i}".encode() for i in range(50)],
            partition=p, keys=[f"k{i}".encode() if i % 2 else None for i in range(50)],
            compression_codec=codec, timestamps=[1_700_000_000_000 + i for i in range(50)],
        )
    df = reader(spark, broker.bootstrap, subscribe="codecs").load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
    ]
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    rows = rows_by_offset(df)
    assert len(rows) == 200
    for p, codec in enumerate(codecs):
        for i in range(50):
            row = rows[("codecs", p, i)]
            assert row.value == f"{codec}-{i}".encode()
            assert row.key == (f"k{i}".encode() if i % 2 else None)
            assert row.timestampType == 0
            ts = row.timestamp.replace(tzinfo=UTC)
            assert ts == datetime.fromtimestamp((1_700_000_000_000 + i) / 1000, UTC)
    # Spark's own operators work on the rows.
    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {0: 50, 1: 50, 2: 50, 3: 50}


def test_headers_and_log_append_time(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "hdrs", 1, **{"message.timestamp.type": "LogAppendTime"})
    produce(
        broker.bootstrap, "hdrs", [b"v0", b"v1"],
        headers=[[("a", b"1"), ("b", None)], []],
    )
    plain = reader(spark, broker.bootstrap, subscribe="hdrs").load()
    assert "headers" not in plain.columns
    df = reader(spark, broker.bootstrap, subscribe="hdrs", includeHeaders="true").load()
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [(h.key, h.value) for h in rows[0].headers] == [("a", b"1"), ("b", None)]
    assert rows[1].headers == []
    assert {r.timestampType for r in rows} == {1}


def test_offsets_json_assign_pattern_and_timestamps(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "ev-a", 2)
    create_topic(broker.bootstrap, "ev-b", 1)
    create_topic(broker.bootstrap, "other", 1)
    base = 1_600_000_000_000
    for topic, p in (("ev-a", 0), ("ev-a", 1), ("ev-b", 0), ("other", 0)):
        produce(
            broker.bootstrap, topic, [b"x"] * 10, partition=p,
            timestamps=[base + i * 1000 for i in range(10)],
        )
    b = broker.bootstrap

    def keys(df: Any) -> set[tuple[str, int, int]]:
        return set(rows_by_offset(df))

    ranged = reader(
        spark, b, subscribe="ev-a",
        startingOffsets=json.dumps({"ev-a": {"0": 2, "1": -2}}),
        endingOffsets=json.dumps({"ev-a": {"0": 5, "1": -1}}),
    ).load()
    assert keys(ranged) == {("ev-a", 0, o) for o in range(2, 5)} | {
        ("ev-a", 1, o) for o in range(10)
    }

    assigned = reader(spark, b, assign=json.dumps({"ev-a": [1], "ev-b": [0]})).load()
    assert {(t, p) for t, p, _ in keys(assigned)} == {("ev-a", 1), ("ev-b", 0)}

    pattern = reader(spark, b, subscribePattern="ev-.*").load()
    assert {(t, p) for t, p, _ in keys(pattern)} == {("ev-a", 0), ("ev-a", 1), ("ev-b", 0)}

    by_time = reader(
        spark, b, subscribe="other", startingTimestamp=str(base + 7000),
        endingTimestamp=str(base + 9000),
    ).load()
    assert keys(by_time) == {("other", 0, 7), ("other", 0, 8)}

    by_partition_time = reader(
        spark, b, subscribe="ev-b",
        startingOffsetsByTimestamp=json.dumps({"ev-b": {"0": base + 8500}}),
    ).load()
    assert keys(by_partition_time) == {("ev-b", 0, 9)}

    with pytest.raises(PySparkException, match="no record of other-0 has a timestamp"):
        reader(spark, b, subscribe="other", startingTimestamp=str(base + 60_000)).load().collect()
    past_end = reader(
        spark, b, subscribe="other", startingTimestamp=str(base + 60_000),
        startingOffsetsByTimestampStrategy="latest",
    ).load()
    assert past_end.count() == 0


def test_min_partitions_splits_ranges_and_reads_are_repeatable(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "big", 2)
    produce(broker.bootstrap, "big", [b"%d" % i for i in range(300)], partition=0)
    produce(broker.bootstrap, "big", [b"%d" % i for i in range(100)], partition=1)
    df = reader(spark, broker.bootstrap, subscribe="big", minPartitions="8").load()
    assert df.rdd.getNumPartitions() >= 8
    rows = df.collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(300)] + [
        (1, o) for o in range(100)
    ]
    # A retried task reads its planned range again: the same rows, byte for byte.
    options = parse_read_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "big", "minPartitions": "8"},
        streaming=False,
    )
    source = LogbusBatchReader(options)
    ranges = source.partitions()
    assert len(ranges) >= 8
    for rng in ranges[:3]:
        first = [b.to_pylist() for b in source.read(rng)]
        produce(broker.bootstrap, "big", [b"later"], partition=rng.partition)
        again = [b.to_pylist() for b in source.read(rng)]
        assert first == again
        assert sum(len(b) for b in first) == rng.end - rng.start


def test_bad_input_names_the_option_or_partition(spark: Any, broker: Any) -> None:
    create_topic(broker.bootstrap, "known", 1)
    produce(broker.bootstrap, "known", [b"a", b"b", b"c"])
    b = broker.bootstrap
    cases = [
        ({"subscribe": "known", "startingOffset": "earliest"},
         "unknown option 'startingoffset'.*did you mean 'startingOffsets'"),
        ({"subscribe": "known", "startingOffsets": "{not json"},
         "option 'startingOffsets' is not valid JSON"),
        ({"subscribe": "known", "startingOffsets": '{"known": [0]}'},
         "option 'startingOffsets': topic 'known' must map to an object"),
        ({"subscribe": "missing-topic"},
         "option 'subscribe': topic 'missing-topic' does not exist"),
        ({"assign": '{"known": [3]}'}, "partition known-3 does not exist"),
        ({"subscribe": "known", "assign": '{"known": [0]}'}, "Exactly one of the options"),
        ({"subscribe": "known", "startingOffsets": '{"known": {"0": 10}}'},
         "offset 10 of partition known-0 is out of range"),
        ({"subscribe": "known", "kafka.auto.offset.reset": "earliest"},
         "'kafka.auto.offset.reset' is not supported"),
        ({"subscribe": "known", "minPartitions": "zero"},
         "option 'minPartitions' must be a whole number"),
        ({"subscribe": "known", "startingOffsets": "latest"},
         "'startingOffsets' cannot be 'latest' for a batch query"),
    ]
    for options, message in cases:
        with pytest.raises(PySparkException, match=message):
            reader(spark, b, **options).load().collect()
    with pytest.raises(PySparkException, match=r"'kafka\.bootstrap\.servers' must be specified"):
        spark.read.format("logbus").option("subscribe", "known").load().collect()
    # failOnDataLoss=false stops at the end of the log instead.
    clamped = reader(
        spark, b, subscribe="known", failOnDataLoss="false",
        endingOffsets='{"known": {"0": 10}}',
    ).load()
    assert clamped.count() == 3


def test_records_removed_by_retention(spark: Any, broker_factory: Any) -> None:
    broker = broker_factory(log_retention_check_interval_ms="100")
    create_topic(
        broker.bootstrap, "short", 1, **{"segment.bytes": "1024", "retention.bytes": "1024"}
    )
    produce(broker.bootstrap, "short", [b"x" * 200 for _ in range(40)], batch_num_messages=1)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "short"}
    deadline = time.monotonic() + 30
    while True:
        source = LogbusBatchReader(parse_read_options(options, streaming=False))
        earliest = source.partitions()[0].start
        if earliest > 0:
            break
        assert time.monotonic() < deadline, "retention never removed a segment"
        time.sleep(0.2)
    with pytest.raises(PySparkException, match="offset 0 of partition short-0 is out of range"):
        reader(spark, broker.bootstrap, subscribe="short",
               startingOffsets='{"short": {"0": 0}}').load().collect()
    kept = reader(spark, broker.bootstrap, subscribe="short", failOnDataLoss="false",
                  startingOffsets='{"short": {"0": 0}}').load()
    offsets = sorted(r.offset for r in kept.collect())
    assert offsets and offsets[0] >= earliest and offsets[-1] == 39
