"""What Spark's Python data source machinery itself allows: a source that yields Arrow
batches already built (a `value` column, or the rows of Kafka's schema as the logbus
source yields them) and a sink that drops the rows it is handed. `spark_bench`
times them beside the logbus source and sink, so its figures can be read against the
most any Python data source reaches on the same machine in the same run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from logbus.spark.schema import arrow_schema, source_schema

_BATCH_ROWS = 65536


class _Reader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, batch: pa.RecordBatch) -> None:
        self.rows, self.partitions_count, self.batch = rows, partitions, batch

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.partitions_count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        share = self.rows // self.partitions_count
        if partition.value == self.partitions_count - 1:
            share += self.rows % self.partitions_count
        for start in range(0, share, _BATCH_ROWS):
            yield self.batch.slice(0, min(_BATCH_ROWS, share - start))


def _value_batch(value_bytes: int) -> pa.RecordBatch:
    values = pa.array([b"x" * value_bytes] * _BATCH_ROWS, pa.binary())
    return pa.record_batch([values], names=["value"])


def _kafka_batch(value_bytes: int) -> pa.RecordBatch:
    """Rows as the logbus source hands them to Spark: Kafka's row schema, no key."""
    n = _BATCH_ROWS
    schema = arrow_schema(include_headers=False)
    arrays = [
        pa.nulls(n, pa.binary()),
        pa.array([b"x" * value_bytes] * n, pa.binary()),
        pa.array(["bench"] * n, pa.string()),
        pa.array(np.zeros(n, np.int32)),
        pa.array(np.arange(n, dtype=np.int64)),
        pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(schema.field("timestamp").type),
        pa.array(np.zeros(n, np.int32)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class _Writer(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class CeilingDataSource(DataSource):
    """`format("ceiling")`: option `rows` (and `partitions`, `valueBytes`) to read; option
    `schema` "kafka" yields the logbus source's row schema (key, value, topic, partition,
    offset, timestamp, timestampType), anything else a `value` column only."""

    @classmethod
    def name(cls) -> str:
        return "ceiling"

    def _kafka(self) -> bool:
        return self.options.get("schema", "value") == "kafka"

    def schema(self) -> StructType | str:
        return source_schema(include_headers=False) if self._kafka() else "value binary"

    def reader(self, schema: StructType) -> DataSourceReader:
        o = self.options
        value_bytes = int(o.get("valueBytes", 100))
        batch = _kafka_batch(value_bytes) if self._kafka() else _value_batch(value_bytes)
        return _Reader(int(o["rows"]), int(o.get("partitions", 4)), batch)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer()
