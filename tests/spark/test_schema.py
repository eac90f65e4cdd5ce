"""`columns_to_record_batch` turns decoded record columns into the Arrow batch of Spark's
Kafka source schema, column for column (no SparkSession needed)."""

from __future__ import annotations

import datetime

import pytest

from logbus.records.batch import BatchHeader
from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar import decode_columns
from logbus.spark.schema import arrow_schema, columns_to_record_batch

UTC = datetime.UTC


@pytest.mark.parametrize("topic", ["events", "tøpic.ünïcode-1"])
@pytest.mark.parametrize("include_headers", [False, True])
def test_every_column_holds_the_records(topic: str, include_headers: bool) -> None:
    # A long regular batch (read in runs) and a short one with keys and a header.
    long = [NewRecord(None, b"v%04d" % i, (), 1_700_000_000_000) for i in range(600)]
    short = [NewRecord(b"k", None, [("h", b"x")], 1_700_000_000_123), NewRecord(b"", b"")]
    raws = [build_batch(long, base_offset=10),
            build_batch(short, base_offset=610, log_append_time=True,
                        max_timestamp=1_700_000_009_000)]
    columns = decode_columns([(raw, BatchHeader.parse(raw)) for raw in raws], min_offset=12)
    schema = arrow_schema(include_headers)
    batch = columns_to_record_batch(schema, topic, 3, columns)
    batch.validate(full=True)
    assert batch.schema == schema and batch.num_rows == 600
    rows = batch.to_pylist()
    start = datetime.datetime.fromtimestamp(1_700_000_000, UTC)
    for i, row in enumerate(rows[:598]):
        assert row["key"] is None and row["value"] == b"v%04d" % (i + 2)
        assert (row["topic"], row["partition"], row["offset"]) == (topic, 3, 12 + i)
        assert (row["timestamp"], row["timestampType"]) == (start, 0)
    appended = datetime.datetime.fromtimestamp(1_700_000_009, UTC)
    assert [(r["key"], r["value"], r["offset"], r["timestamp"], r["timestampType"])
            for r in rows[598:]] == [(b"k", None, 610, appended, 1), (b"", b"", 611, appended, 1)]
    if include_headers:
        assert [r["headers"] for r in rows[597:]] == [
            [], [{"key": "h", "value": b"x"}], []
        ]


def test_no_records_give_an_empty_batch() -> None:
    batch = columns_to_record_batch(arrow_schema(False), "t", 0, decode_columns([]))
    batch.validate(full=True)
    assert batch.num_rows == 0 and batch.column(2).to_pylist() == []
