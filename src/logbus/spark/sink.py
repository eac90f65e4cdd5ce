"""Writing a DataFrame to logbus, batch or streaming, as Spark's Kafka sink does.

Columns: `value` (required, binary or string), `key` (binary or string), `topic` (string;
the `topic` option overrides it), `partition` (int), `headers` (array of struct<key string,
value binary>); other columns are ignored. Each task sends its rows with an idempotent
`ArrowProducer`, which encodes record batches straight from the Arrow columns and hands
them to logbus's producer (or, when the data has a `headers` column, through logbus's
`Producer.send_batch`); both go out through the producer's one sender and return
only once the broker has acknowledged every record, so a task that succeeded has nothing
left in flight: a micro-batch Spark commits is never lost. A failed task is retried and
may write its rows again (at-least-once). With `exactlyOnce=true` (streaming writes) each
task writes in a transaction of its own that also records the micro-batch it wrote, and
the driver commits the transactions once the micro-batch succeeded
(`transactional_writer.py`): a retried task or replayed micro-batch is written once.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from logbus.client.loop_thread import LoopThread
from logbus.client.producer import ProducerRecord
from logbus.client.producer.config import parse_producer_config
from logbus.client.producer.sync import Producer
from logbus.common.config_def import ConfigError
from logbus.spark.arrow_producer import ArrowProducer, Rows
from logbus.spark.avro_format import AvroColumnEncoder, encode_batch, write_encoders
from logbus.spark.options import LogbusSparkError, WriteOptions
from logbus.spark.schema import HEADERS_TYPE
from logbus.spark.transactional_writer import TaskTransaction, WriterTask, end_transactions
from logbus.spark.worker_guard import ShippedToWorkers

_BYTES_OR_TEXT = (BinaryType(), StringType())


@dataclass
class WrittenRecords(WriterCommitMessage):
    """What one task wrote."""

    records: int


def check_input_schema(options: WriteOptions, schema: StructType) -> None:
    """Reject a DataFrame the sink cannot write, naming the column at fault, and producer
    settings the producer would refuse."""
    config: dict[str, str] = dict(options.producer_config)
    if options.exactly_once is not None:
        config["transactional.id"] = options.exactly_once.transactional_id_prefix
    try:
        parse_producer_config(config, {})
    except ConfigError as exc:
        raise LogbusSparkError(f"the kafka.* options: {exc}") from None
    # keyFormat/valueFormat=avro columns are structs, checked by `write_encoders`
    avro = {column.column for column in options.formats.avro}
    types: dict[str, DataType] = {
        f.name: f.dataType for f in schema.fields if f.name not in avro
    }

    def expect(column: str, allowed: tuple[DataType, ...], what: str) -> None:
        # Types compared as Spark prints them: nullability does not matter (a headers
        # array made with array(named_struct(...)) has non-null elements).
        if column in types and types[column].simpleString() not in {
            a.simpleString() for a in allowed
        }:
            raise LogbusSparkError(
                f"column {column!r} must be {what}, not {types[column].simpleString()}"
            )

    if "value" not in types and "value" not in avro:
        raise LogbusSparkError("a 'value' column (binary or string) is required to write")
    if options.topic is None and "topic" not in types:
        raise LogbusSparkError(
            "the 'topic' option is required when the data has no 'topic' column"
        )
    expect("value", _BYTES_OR_TEXT, "binary or string")
    expect("key", _BYTES_OR_TEXT, "binary or string")
    if options.topic is None:
        expect("topic", (StringType(),), "string")
    expect("partition", (IntegerType(),), "int")
    expect("headers", (HEADERS_TYPE,), "array<struct<key:string,value:binary>>")


def _as_bytes(values: list[Any]) -> list[bytes | None]:
    return [v.encode() if isinstance(v, str) else v for v in values]


# How many rows (or bytes) of Spark's batches the sink hands its producer at a time.
_GROUP_ROWS = 100_000
_GROUP_BYTES = 16 * 1024 * 1024

_NULL_TOPIC = "a row has a null 'topic' and no 'topic' option was given"


def write_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of `batches`; returns how many were acknowledged."""
    first = next(batches, None)
    if first is None:
        return 0
    rest = itertools.chain([first], batches)
    if "headers" in first.schema.names:
        return _write_records(options, rest)
    return _write_columns(options, rest)


def _binary(column: pa.Array) -> pa.Array:
    """A binary or string column as a binary array (a string's bytes are its UTF-8)."""
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _topic_rows(options: WriteOptions, batch: pa.RecordBatch) -> list[tuple[str, Rows]]:
    """Each topic the rows of `batch` go to, with the positions of its rows."""
    if options.topic is not None:
        return [(options.topic, np.arange(batch.num_rows, dtype=np.int64))]
    column = batch.column("topic")
    if column.null_count:
        raise LogbusSparkError(_NULL_TOPIC)
    encoded = column.dictionary_encode()
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return [
        (topic, np.flatnonzero(indices == i).astype(np.int64))
        for i, topic in enumerate(encoded.dictionary.to_pylist())
    ]


def _groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Spark's batches (10,000 rows each by default) joined into batches of about
    `_GROUP_ROWS` rows or `_GROUP_BYTES` bytes: the producer's work per call (partitioning,
    sizing, laying out runs) costs the same for ten thousand rows as for a hundred
    thousand, so fewer, larger calls cost a third less per row than the copy they take."""
    group: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        group.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= _GROUP_ROWS or size >= _GROUP_BYTES:
            yield _joined(group)
            group, rows, size = [], 0, 0
    if group:
        yield _joined(group)


def _joined(group: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(group) == 1:
        return group[0]
    return pa.Table.from_batches(group).combine_chunks().to_batches()[0]


def _write_columns(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """The fast path: Arrow columns to encoded record batches, no object per row. The
    producer lives on its own event loop thread, so requests go out and answers come in
    while this thread waits for Spark's next rows."""
    thread = LoopThread("logbus-spark-sink")
    producer = ArrowProducer(options.producer_config)
    try:
        written = _send_columns(options, thread, producer, batches)
        thread.run(producer.flush())
    finally:
        try:
            thread.run(producer.close())
        finally:
            thread.close()
    return written


def _send_columns(
    options: WriteOptions,
    thread: LoopThread,
    producer: ArrowProducer,
    batches: Iterator[pa.RecordBatch],
) -> int:
    written = 0
    for batch in _groups(batches):
        n = batch.num_rows
        names = batch.schema.names
        values = _binary(batch.column("value"))
        keys = _binary(batch.column("key")) if "key" in names else pa.nulls(n, pa.binary())
        partitions = batch.column("partition") if "partition" in names else None
        thread.run(producer.send(keys, values, _topic_rows(options, batch), partitions))
        written += n
    return written


def write_transaction(
    options: WriteOptions, batches: Iterator[pa.RecordBatch]
) -> WriterCommitMessage:
    """exactlyOnce: the task's rows in one transaction with its micro-batch's record, left
    open for the driver to commit (`PreparedTransaction`); nothing is written when the
    task has no rows or an earlier attempt's transaction committed this micro-batch."""
    settings = options.exactly_once
    assert settings is not None
    first = next(batches, None)
    if first is None:
        return WrittenRecords(0)
    rest = itertools.chain([first], batches)
    task = WriterTask.current(settings)
    config = dict(options.producer_config) | {"transactional.id": task.transactional_id}
    thread = LoopThread("logbus-spark-sink")
    producer = ArrowProducer(config)
    txn = TaskTransaction(settings, task, thread, producer.producer)
    try:
        if not txn.begin():
            for _ in rest:  # Spark's rows are read to the end, and dropped
                pass
            return WrittenRecords(0)
        if "headers" in first.schema.names:
            written = 0
            for batch in rest:
                records = _records(options, batch)
                thread.run(producer.producer.send_batch(records))
                written += len(records)
        else:
            written = _send_columns(options, thread, producer, rest)
            thread.run(producer.flush())
        return txn.prepare(written)
    except BaseException:
        txn.abort()
        raise
    finally:
        try:
            thread.run(producer.close())
        finally:
            thread.close()


def _write_records(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Rows with headers: one ProducerRecord each, through logbus's Producer."""
    written = 0
    # Idempotence is on by default, as in Kafka's producer (settings that conflict with it,
    # such as kafka.acks=1, turn it off).
    with Producer(dict(options.producer_config)) as producer:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            records = _records(options, batch)
            producer.send_batch(records)
            written += len(records)
        producer.flush()
    return written


def _records(options: WriteOptions, batch: pa.RecordBatch) -> list[ProducerRecord]:
    """The rows of `batch` as ProducerRecords."""
    n = batch.num_rows
    names = batch.schema.names
    values = _as_bytes(batch.column("value").to_pylist())
    keys = _as_bytes(batch.column("key").to_pylist()) if "key" in names else [None] * n
    if options.topic is not None:
        topics: list[Any] = [options.topic] * n
    else:
        topics = batch.column("topic").to_pylist()
        if None in topics:
            raise LogbusSparkError(_NULL_TOPIC)
    partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    headers: list[Any] = (
        [
            None if h is None else [(e["key"], e["value"]) for e in h]
            for h in batch.column("headers").to_pylist()
        ]
        if "headers" in names
        else [None] * n
    )
    return [
        ProducerRecord(t, v, key=k, partition=p, headers=h)
        for t, v, k, p, h in zip(topics, values, keys, partitions, headers, strict=True)
    ]


def _encoded(
    encoders: tuple[AvroColumnEncoder, ...], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Spark's batches with their Avro columns encoded (Confluent's framing)."""
    if not encoders:
        return batches
    return (encode_batch(batch, encoders) for batch in batches)


class LogbusBatchWriter(ShippedToWorkers, DataSourceArrowWriter):
    """`df.write.format("logbus")`: every task sends its rows, acknowledged."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        if options.exactly_once is not None:
            raise LogbusSparkError(
                "option 'exactlyOnce' is for streaming writes (writeStream); a batch write "
                "has no micro-batch to commit"
            )
        check_input_schema(options, schema)
        self.options = options
        # the writer schemas, registered on the driver before any task runs
        self.encoders = write_encoders(options.formats, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return WrittenRecords(write_batches(self.options, _encoded(self.encoders, iterator)))


class LogbusStreamWriter(ShippedToWorkers, DataSourceStreamArrowWriter):
    """`df.writeStream.format("logbus")`: each micro-batch's tasks send and wait for
    acknowledgement before the batch can commit (at-least-once). With exactlyOnce each
    task leaves its rows in an open transaction, which the driver commits once every
    task of the micro-batch succeeded (docs/spark.md, "Exactly-once")."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_input_schema(options, schema)
        self.options = options
        self.encoders = write_encoders(options.formats, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        batches = _encoded(self.encoders, iterator)
        if self.options.exactly_once is not None:
            return write_transaction(self.options, batches)
        return WrittenRecords(write_batches(self.options, batches))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: every record was acknowledged when its task ended, nothing is
        left to do. exactlyOnce: commit the tasks' transactions."""
        if self.options.exactly_once is not None:
            end_transactions(self.options.producer_config, messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: records already sent stay in the log, the retried batch writes
        them again. exactlyOnce: abort the transactions of the tasks that succeeded."""
        if self.options.exactly_once is not None:
            end_transactions(self.options.producer_config, messages, commit=False)
