"""The row schema of Spark's Kafka source, as a Spark schema and as the matching Arrow
schema, and the column-wise conversion of decoded records into Arrow record batches."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from logbus.records.batch import BatchHeader
from logbus.records.record import Record

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType[, headers]."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for `source_schema` (timestamps in UTC micros)."""
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def to_record_batch(
    schema: pa.Schema,
    topic: str,
    partition: int,
    batches: Iterable[tuple[BatchHeader, list[Record]]],
) -> pa.RecordBatch:
    """One Arrow batch from decoded record batches, built column by column."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int] = []
    types: list[int] = []
    headers: list[list[dict[str, object]]] | None = (
        [] if "headers" in schema.names else None
    )
    for header, records in batches:
        keys.extend([r.key for r in records])
        values.extend([r.value for r in records])
        offsets.extend([r.offset for r in records])
        stamps.extend([r.timestamp * 1000 for r in records])
        types.extend([1 if header.is_log_append_time else 0] * len(records))
        if headers is not None:
            headers.extend(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records]
            )
    n = len(offsets)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, pa.int64()).cast(schema.field("timestamp").type),
        pa.array(types, pa.int32()),
    ]
    if headers is not None:
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
