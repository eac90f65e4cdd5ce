"""What Spark's Python data source machinery itself allows: a source that yields Arrow
batches already built and a sink that only counts the rows it is handed. `spark_bench`
times them beside the logbus source and sink, so its figures can be read against the
most any Python data source reaches on the same machine in the same run."""

from __future__ import annotations

from collections.abc import Iterator

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

_BATCH_ROWS = 65536


class _Reader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, value_bytes: int) -> None:
        self.rows, self.partitions_count, self.value_bytes = rows, partitions, value_bytes

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.partitions_count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        share = self.rows // self.partitions_count
        if partition.value == self.partitions_count - 1:
            share += self.rows % self.partitions_count
        values = pa.array([b"x" * self.value_bytes] * min(_BATCH_ROWS, share), pa.binary())
        batch = pa.record_batch([values], names=["value"])
        for start in range(0, share, _BATCH_ROWS):
            yield batch.slice(0, min(_BATCH_ROWS, share - start))


class _Writer(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


class CeilingDataSource(DataSource):
    """`format("ceiling")`: option `rows` (and `partitions`, `valueBytes`) to read."""

    @classmethod
    def name(cls) -> str:
        return "ceiling"

    def schema(self) -> str:
        return "value binary"

    def reader(self, schema: StructType) -> DataSourceReader:
        o = self.options
        return _Reader(int(o["rows"]), int(o.get("partitions", 4)), int(o.get("valueBytes", 100)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer()
