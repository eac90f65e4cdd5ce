"""The row schema of Spark's Kafka source, as a Spark schema and as the matching Arrow
schema, and the conversion of decoded record columns into Arrow record batches."""

from __future__ import annotations

import numpy as np
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

from logbus.records.columnar import RecordColumns

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


def _repeated_string(text: str, n: int) -> pa.Array:
    """A string array holding `text` n times, built from its buffers in one step."""
    data = text.encode()
    large = len(data) * n >= 2**31  # past what int32 offsets (pa.string) can hold
    offsets = np.arange(n + 1, dtype=np.int64 if large else np.int32) * len(data)
    array = pa.Array.from_buffers(
        pa.large_string() if large else pa.string(), n,
        [None, pa.py_buffer(offsets), pa.py_buffer(data * n)],
    )
    return array.cast(pa.string()) if large else array


def columns_to_record_batch(
    schema: pa.Schema, topic: str, partition: int, columns: RecordColumns
) -> pa.RecordBatch:
    """One Arrow batch from the decoded columns of one partition's records: numpy and
    Arrow arrays throughout, no Python object per record (except headers, when asked for
    and present)."""
    n = len(columns)
    arrays = [
        columns.keys,
        columns.values,
        _repeated_string(topic, n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(columns.offsets),
        pa.array(columns.timestamps, _MILLIS).cast(schema.field("timestamp").type),
        pa.array(columns.timestamp_types),
    ]
    if "headers" in schema.names:
        headers = columns.headers if columns.headers is not None else [()] * n
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
