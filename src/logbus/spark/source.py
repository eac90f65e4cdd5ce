"""The `logbus` data source: batch and streaming reads, batch and streaming writes.

`LogbusDataSource` is what `spark.dataSource.register` takes; Spark makes one per query
from the options and asks it for a reader or writer. Readers plan on the driver (through
`OffsetReader`) and read each `OffsetRange` on an executor (`read_range`). Planning state
(connections, event loops) never travels to executors: `__getstate__` leaves it out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from logbus.spark.avro_format import AvroColumnDecoder, decode_batch, decoded_schema, read_decoders
from logbus.spark.offset_range import OffsetRange, split_ranges
from logbus.spark.offset_reader import TP, OffsetReader, describe
from logbus.spark.options import (
    LogbusSparkError,
    ReadOptions,
    parse_read_options,
    parse_write_options,
    read_formats,
)
from logbus.spark.partition_reader import read_range
from logbus.spark.schema import arrow_schema, source_schema
from logbus.spark.sink import LogbusBatchWriter, LogbusStreamWriter
from logbus.spark.worker_guard import ShippedToWorkers
from logbus.types import TopicPartition

JsonOffsets = dict[str, dict[str, int]]


def offsets_to_json(offsets: dict[TP, int]) -> JsonOffsets:
    """{topic: {partition: offset}} with keys in sorted order, as Spark's Kafka source
    writes them (so equal positions give equal JSON)."""
    out: JsonOffsets = {}
    for topic, partition in sorted(offsets, key=lambda tp: (tp[0], str(tp[1]))):
        out.setdefault(topic, {})[str(partition)] = offsets[TopicPartition(topic, partition)]
    return {topic: dict(sorted(parts.items())) for topic, parts in sorted(out.items())}


def offsets_from_json(offsets: dict[str, Any]) -> dict[TP, int]:
    try:
        return {
            TopicPartition(topic, int(p)): int(off)
            for topic, parts in offsets.items()
            for p, off in parts.items()
        }
    except (AttributeError, TypeError, ValueError):
        raise LogbusSparkError(f"malformed logbus source offsets {offsets!r}") from None


class LogbusDataSource(DataSource):
    """Spark's Kafka source and sink, for logbus: `spark.read.format("logbus")`."""

    @classmethod
    def name(cls) -> str:
        return "logbus"

    def schema(self) -> StructType:
        """Spark's Kafka source's columns; with keyFormat/valueFormat=avro, the key or
        value is the struct of the subject's reader schema."""
        lowered = {str(k).lower(): str(v) for k, v in self.options.items()}
        text = lowered.get("includeheaders", "false").strip().lower()
        decoders = read_decoders(read_formats(lowered))
        return decoded_schema(source_schema(text == "true"), decoders)

    def reader(self, schema: StructType) -> DataSourceReader:
        reader = LogbusBatchReader(parse_read_options(self.options, streaming=False))
        _check_reader_schemas(reader.decoders, schema)
        return reader

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        reader = LogbusStreamReader(parse_read_options(self.options, streaming=True))
        _check_reader_schemas(reader.decoders, schema)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return LogbusBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return LogbusStreamWriter(parse_write_options(self.options), schema)


def _check_reader_schemas(decoders: tuple[AvroColumnDecoder, ...], schema: StructType) -> None:
    """The reader schemas fetched for the tasks give the columns Spark planned with (a
    version registered in between would not)."""
    for decoder in decoders:
        planned = schema[decoder.column].dataType if decoder.column in schema.names else None
        if planned is None or planned.simpleString() != decoder.spark_type.simpleString():
            raise LogbusSparkError(
                f"the latest version of the subject of column {decoder.column!r} changed "
                "while the query was planned; run it again (or set "
                f"'{decoder.column}SchemaVersion')"
            )


def _read(
    options: ReadOptions, decoders: tuple[AvroColumnDecoder, ...], partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, OffsetRange):
        return  # Spark asks for one partition of its own when the plan has none
    batches = read_range(
        options.client, partition, arrow_schema(options.include_headers),
        options.fail_on_data_loss,
    )
    if not decoders:
        yield from batches
        return
    schema = to_arrow_schema(
        decoded_schema(source_schema(options.include_headers), decoders), timezone="UTC"
    )
    for batch in batches:
        yield decode_batch(batch, decoders, schema)


class LogbusBatchReader(ShippedToWorkers, DataSourceReader):
    """A batch read: plans offset ranges on the driver, reads them on executors."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        # the reader schemas, fetched on the driver once for the query's tasks
        self.decoders = read_decoders(options.formats)

    def partitions(self) -> list[OffsetRange]:
        reader = OffsetReader(self.options.client)
        try:
            tps = reader.topic_partitions(self.options)
            starts = reader.starting_offsets(self.options, tps)
            ends = reader.ending_offsets(self.options, tps)
        finally:
            reader.close()
        ranges = []
        for tp in tps:
            if starts[tp] > ends[tp]:
                raise LogbusSparkError(
                    f"partition {describe(tp)}: the starting offset {starts[tp]} is after the "
                    f"ending offset {ends[tp]} (check startingOffsets and endingOffsets)"
                )
            ranges.append(OffsetRange(tp[0], tp[1], starts[tp], ends[tp]))
        return split_ranges(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.decoders, partition)


class LogbusStreamReader(
    ShippedToWorkers, DataSourceStreamReader, SupportsTriggerAvailableNow
):
    """A streaming read. Offsets are {topic: {partition: next offset}} JSON; each
    micro-batch reads [start, end) of every partition. Partitions that appear later
    (new partitions, new topics matching the pattern) are read from their earliest
    offset. `maxOffsetsPerTrigger` becomes the default read limit, spread over the
    partitions in proportion to what each has waiting."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.decoders = read_decoders(options.formats)
        self._reader: OffsetReader | None = None
        self._target: dict[TP, int] | None = None
        self._latest: dict[TP, int] | None = None
        self._last_trigger = 0.0  # time.time() of the last micro-batch minOffsetsPerTrigger let go

    def __getstate__(self) -> dict[str, Any]:
        return {
            "options": self.options, "decoders": self.decoders, "_reader": None,
            "_target": None, "_latest": None, "_last_trigger": 0.0,
        }

    @property
    def reader(self) -> OffsetReader:
        if self._reader is None:
            self._reader = OffsetReader(self.options.client)
        return self._reader

    def initialOffset(self) -> JsonOffsets:
        tps = self.reader.topic_partitions(self.options)
        return offsets_to_json(self.reader.starting_offsets(self.options, tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.reader.topic_partitions(self.options, missing_ok=True)
        self._target = self.reader.latest(tps)

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        begin = offsets_from_json(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            tps = self.reader.topic_partitions(self.options, missing_ok=True)
            latest = self.reader.latest(tps)
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        begin.update(self.reader.earliest(new))
        for tp, offset in list(begin.items()):
            if tp not in latest:
                if self._target is None and self.options.fail_on_data_loss:
                    raise LogbusSparkError(
                        f"partition {describe(tp)} no longer exists; some data may have been "
                        "lost (set failOnDataLoss=false to go on without it)"
                    )
                latest[tp] = offset
            elif offset > latest[tp]:
                if self.options.fail_on_data_loss:
                    raise LogbusSparkError(
                        f"partition {describe(tp)}: offset {offset} is beyond the end of the "
                        f"log ({latest[tp]}); the log was truncated or recreated (set "
                        "failOnDataLoss=false to go on from its end)"
                    )
                begin[tp] = latest[tp]
        if self._target is None and self._wait_for_more(begin, latest):
            return offsets_to_json(begin)
        end = dict(latest)
        if isinstance(limit, ReadMaxRows):
            end = _rate_limit(begin, latest, limit.max_rows)
        return offsets_to_json(end)

    def _wait_for_more(self, begin: dict[TP, int], latest: dict[TP, int]) -> bool:
        """minOffsetsPerTrigger: hold the micro-batch back while fewer records wait and
        maxTriggerDelay has not passed since the last one (as Spark's Kafka source; the
        first is never held back, nor an AvailableNow run)."""
        minimum = self.options.min_offsets_per_trigger
        if minimum is None:
            return False
        waiting = sum(max(0, latest[tp] - begin.get(tp, latest[tp])) for tp in latest)
        now = time.time()
        if waiting < minimum and (now - self._last_trigger) * 1000 < (
            self.options.max_trigger_delay_ms
        ):
            return True
        self._last_trigger = now
        return False

    def reportLatestOffset(self) -> JsonOffsets | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> list[OffsetRange]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.reader.earliest(new))
        ranges = [
            OffsetRange(tp[0], tp[1], begin[tp], until[tp])
            for tp in sorted(until)
            if until[tp] > begin[tp]
        ]
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.decoders, partition)

    def commit(self, end: JsonOffsets) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to the broker."""

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _rate_limit(begin: dict[TP, int], latest: dict[TP, int], max_rows: int) -> dict[TP, int]:
    """End offsets admitting at most `max_rows` records, shared in proportion to what each
    partition has waiting (largest remainders get the rounding, so the total is exact)."""
    waiting = {tp: max(0, latest[tp] - begin.get(tp, latest[tp])) for tp in latest}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: waiting[tp] * max_rows / total for tp in waiting}
    taken = {tp: int(share) for tp, share in shares.items()}
    left = max_rows - sum(taken.values())
    for tp in sorted(shares, key=lambda tp: (taken[tp] - shares[tp], tp))[:left]:
        taken[tp] += 1
    return {tp: begin.get(tp, latest[tp]) + min(taken[tp], waiting[tp]) for tp in latest}
