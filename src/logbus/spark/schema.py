"""The row schema of Spark's Kafka source, as a Spark schema and as the matching Arrow
schema, and the column-wise conversion of decoded records into Arrow record batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

# A decoded record: (topic, partition, offset, timestamp ms, timestamp type, key, value,
# headers), the layout of `records.reader.decode_record_tuples` with cls=tuple.
RecordTuple = tuple[Any, ...]
_MILLIS = pa.timestamp("ms", tz="UTC")
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


def to_record_batch(schema: pa.Schema, records: Sequence[RecordTuple]) -> pa.RecordBatch:
    """One Arrow batch from record tuples as `records.reader.decode_record_tuples` makes
    them (topic, partition, offset, timestamp, timestamp_type, key, value, headers): the
    tuples are transposed into columns in one step and each column converted in one call.
    """
    (topics, partitions, offsets, stamps, types, keys, values, headers) = zip(
        *records, strict=True
    )
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(topics, pa.string()),
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, _MILLIS).cast(schema.field("timestamp").type),
        pa.array(types, pa.int32()),
    ]
    if "headers" in schema.names:
        # Header pairs convert to the (key, value) structs as they are.
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
