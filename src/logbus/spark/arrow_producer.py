"""Sending Arrow columns to logbus as pre-encoded record batches: the sink's fast path.

The entry point is `ArrowProducer`. It keeps what is particular to Arrow rows and hands
the rest to logbus's `Producer`: rows are partitioned as Kafka's default partitioner
does (the `partition` column, else murmur2 of the key, else sticky `batch.size` runs for
keyless rows, KIP-480), without a Python object per row (but for keyed rows, whose
murmur2 hash is computed one key at a time), and appended to their partition's open
batch, which closes at `batch.size` bytes. Closed batches are encoded at once by
`records.columnar_encode.encode_batches` (many per call) and handed to the producer's
accumulator (`Producer.send_encoded`), so the producer's sender sends them while the task
goes on reading rows: the same requests per leader, in-flight cap, retries, delivery
timeout, producer id, sequence numbers and epoch bump (KIP-360) as every record sent by
`Producer.send`. When buffer.memory bytes of encoded batches wait for acknowledgement,
`send` waits (up to max.block.ms).

Owned by one task: one event loop, one Producer; every call is made on that loop. The
sink runs the loop in a thread of its own, so requests go out and answers come in while
the task waits for its next rows.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logbus.client.errors import KafkaError
from logbus.client.partitioner import StickyPartitioner, partition_for_key
from logbus.client.producer.accumulator import RECORD_OVERHEAD, EncodedBatch, ProducerBatch
from logbus.client.producer.config import compression_of
from logbus.client.producer.producer import Producer
from logbus.client.types import TopicPartition
from logbus.records.batch import HEADER_SIZE
from logbus.records.builder import now_ms
from logbus.records.columnar_encode import encode_batches, lengths_of, record_sizes
from logbus.spark.options import LogbusSparkError

Rows = npt.NDArray[np.int64]
Lengths = npt.NDArray[np.int64]
# Records per `encode_batches` call, about: enough to share a call's fixed cost among many
# small batches, few enough for the arrays of one call to stay in the CPU's caches.
_ENCODE_RECORDS = 8192


class _Piece(NamedTuple):
    """Consecutive rows of one partition: keys, values, and their lengths as
    `lengths_of` gives them."""

    keys: pa.Array
    values: pa.Array
    key_lengths: Lengths
    value_lengths: Lengths


@dataclass
class _Batch:
    """Rows of one partition, at most batch.size bytes of records, until encoded."""

    pieces: list[_Piece] = field(default_factory=list)
    records: int = 0
    size: int = 0  # bytes of its records, at most


@dataclass
class _Partition:
    """One partition's rows: the open batch being filled, and the closed ones, oldest
    first, waiting to be encoded."""

    open: _Batch = field(default_factory=_Batch)
    closed: list[_Batch] = field(default_factory=list)


def _by_partition(
    chosen: npt.NDArray[np.int64], rows: Rows, count: int
) -> list[tuple[int, Rows]]:
    """`rows` by the partition `chosen` for each, in order: as runs of rows when the
    partitions come in at most `count` runs (rows stick to a partition), else grouped."""
    cuts = np.flatnonzero(chosen[1:] != chosen[:-1]) + 1
    if len(cuts) < count:
        bounds = [0, *cuts.tolist(), len(chosen)]
        return [(int(chosen[a]), rows[a:b]) for a, b in itertools.pairwise(bounds)]
    order = np.argsort(chosen, kind="stable")
    cuts = np.flatnonzero(np.diff(chosen[order])) + 1
    return [(int(chosen[group[0]]), rows[group]) for group in np.split(order, cuts)]


class ArrowProducer:
    """Partitions, encodes and hands Arrow rows to a `Producer`: `send` queues rows
    (waiting while buffer.memory is full), `flush` returns once every row given so far is
    acknowledged (with acks=0: written to the socket); `close` closes the producer."""

    def __init__(self, producer_config: Mapping[str, str]) -> None:
        self.producer = Producer(producer_config)
        self.config = self.producer.config
        c = self.config
        self.codec, self.level = compression_of(c)
        self.batch_size = max(1, min(c["batch.size"], c["max.request.size"]) - HEADER_SIZE)
        self.sticky: dict[str, StickyPartitioner] = {}
        self.partitions: dict[TopicPartition, _Partition] = {}
        # Batches handed to the producer and not yet seen settled, oldest first.
        self.handed: collections.deque[ProducerBatch] = collections.deque()
        self.started = False

    async def close(self) -> None:
        """Close the producer at once (what it has not sent is abandoned: a task that
        failed is retried by Spark)."""
        await self.producer.close(timeout=0)

    async def _start(self) -> None:
        if not self.started:
            try:
                await self.producer.start()
            except KafkaError as exc:
                raise LogbusSparkError(f"cannot connect to logbus: {exc}") from None
            self.started = True

    async def partition_count(self, topic: str) -> int:
        """The topic's partitions, once every one has a leader (creating the topic when
        the broker auto-creates topics), waiting up to max.block.ms as `Producer` does."""
        count = self.producer.router.count(topic)
        if count is not None:
            return count
        await self._start()
        try:
            return await self.producer.partition_count(topic)
        except KafkaError as exc:
            raise LogbusSparkError(f"cannot write to topic {topic!r}: {exc}") from None

    async def send(
        self,
        keys: pa.Array,
        values: pa.Array,
        topics: list[tuple[str, Rows]],
        partitions: pa.Array | None,
    ) -> None:
        """Queue rows (`keys` and `values` binary arrays; for each topic the rows going
        to it, in order, without repeats; the `partition` column if any) and hand the
        batches they fill to the producer, waiting while buffer.memory is full. `flush`
        sends the rest."""
        self._check_handed()
        key_lengths, value_lengths = lengths_of(keys), lengths_of(values)
        for topic, rows in topics:
            if not len(rows):
                continue
            count = await self.partition_count(topic)
            chosen = self._partitions(
                topic, count, rows, keys, key_lengths, value_lengths, partitions
            )
            for partition, chosen_rows in _by_partition(chosen, rows, count):
                first, n = int(chosen_rows[0]), len(chosen_rows)
                tp = TopicPartition(topic, partition)
                if int(chosen_rows[-1]) - first == n - 1:
                    # A run of consecutive rows (keyless rows stick to a partition).
                    self._queue(tp, keys.slice(first, n), values.slice(first, n),
                                key_lengths[first:first + n], value_lengths[first:first + n])
                else:
                    taken = pa.array(chosen_rows)
                    self._queue(tp, keys.take(taken), values.take(taken),
                                key_lengths[chosen_rows], value_lengths[chosen_rows])
        await self._hand_over(self._encode_closed())

    def _partitions(
        self,
        topic: str,
        count: int,
        rows: Rows,
        keys: pa.Array,
        all_key_lengths: Lengths,
        all_value_lengths: Lengths,
        partitions: pa.Array | None,
    ) -> npt.NDArray[np.int64]:
        """The partition of each of `rows`, as Kafka's default partitioner picks it."""
        # `rows` are in order, without repeats: all the rows when as many.
        every_row = len(rows) == len(all_key_lengths)
        key_lengths = all_key_lengths if every_row else all_key_lengths[rows]
        value_lengths = all_value_lengths if every_row else all_value_lengths[rows]
        keyless = keys.null_count == len(keys)
        sticky_key_lengths = None if keyless else key_lengths
        by_key = not self.config["partitioner.ignore.keys"] and not keyless
        if partitions is None and not by_key:
            return self._sticky(topic, count, sticky_key_lengths, value_lengths)
        chosen = np.full(len(rows), -1, np.int64)
        if partitions is not None:
            given = partitions.take(pa.array(rows))
            if given.null_count < len(given):
                valid = given.is_valid().to_numpy(zero_copy_only=False)
                numbers = given.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
                bad = valid & ((numbers < 0) | (numbers >= count))
                if bad.any():
                    number = int(numbers[bad][0])
                    raise LogbusSparkError(
                        f"Topic '{topic}' has no partition {number} (it has {count})"
                    )
                chosen[valid] = numbers[valid]
        if by_key:
            keyed = np.flatnonzero((chosen < 0) & (key_lengths >= 0))
            if len(keyed):
                key_list = keys.take(pa.array(rows[keyed])).to_pylist()
                chosen[keyed] = [partition_for_key(k, count) for k in key_list]
        free = np.flatnonzero(chosen < 0)
        if len(free) == len(chosen):
            return self._sticky(topic, count, sticky_key_lengths, value_lengths)
        if len(free):
            chosen[free] = self._sticky(
                topic, count, None if keyless else key_lengths[free], value_lengths[free]
            )
        return chosen

    def _sticky(self, topic: str, count: int, key_lengths: Lengths | None,
                value_lengths: Lengths) -> npt.NDArray[np.int64]:
        """The partitions of rows without one (no partition given, no key or keys
        ignored): `batch.size` bytes (as Kafka's producer counts them) to one partition,
        then as many to the next (KIP-480). `key_lengths` None: all null."""
        sizes = np.maximum(value_lengths, 0)
        sizes += RECORD_OVERHEAD
        if key_lengths is not None:
            sizes += np.maximum(key_lengths, 0)
        sticky = self.sticky.get(topic)
        if sticky is None or sticky.num_partitions != count:
            sticky = self.sticky[topic] = StickyPartitioner(count)
        return sticky.spread(sizes, self.batch_size)

    def _queue(
        self,
        tp: TopicPartition,
        keys: pa.Array,
        values: pa.Array,
        key_lengths: Lengths,
        value_lengths: Lengths,
    ) -> None:
        """Append one partition's rows to its open batch, closing it (and opening the
        next) at batch.size bytes."""
        partition = self.partitions.get(tp)
        if partition is None:
            partition = self.partitions[tp] = _Partition()
        # Sizes as if every row went to the open batch: exact for those that do, more
        # than enough for the rest (a later batch counts its offset deltas from 0).
        sizes = record_sizes(key_lengths, value_lengths, first_delta=partition.open.records)
        largest = int(sizes.max()) + HEADER_SIZE
        if largest > self.config["max.request.size"]:
            raise LogbusSparkError(
                f"The message is {largest} bytes when serialized which is larger than "
                f"max.request.size={self.config['max.request.size']}"
            )
        ends = np.cumsum(sizes)
        start = 0
        while start < len(sizes):
            batch = partition.open
            before = int(ends[start - 1]) if start else 0
            room = before + self.batch_size - batch.size
            end = int(np.searchsorted(ends, room, "right"))
            if end == start and not batch.records:
                end = start + 1  # a record larger than batch.size goes alone
            if end > start:
                n = end - start
                batch.pieces.append(_Piece(keys.slice(start, n), values.slice(start, n),
                                           key_lengths[start:end], value_lengths[start:end]))
                batch.records += n
                batch.size += int(ends[end - 1]) - before
            if end < len(sizes):
                partition.closed.append(batch)
                partition.open = _Batch()
            start = end

    def _encode_closed(self, *, close_open: bool = False) -> list[EncodedBatch]:
        """Encode every closed batch (with `close_open`, close the open batches first),
        in calls of about _ENCODE_RECORDS records; each partition's oldest first. The
        producer stamps each with its producer id and sequence when it sends it."""
        todo: list[tuple[TopicPartition, _Batch]] = []
        for tp, partition in self.partitions.items():
            if close_open and partition.open.records:
                partition.closed.append(partition.open)
                partition.open = _Batch()
            todo.extend((tp, batch) for batch in partition.closed)
            partition.closed = []
        out: list[EncodedBatch] = []
        timestamp = now_ms()
        start = 0
        while start < len(todo):
            end = start
            records = 0
            while end < len(todo) and (end == start or records < _ENCODE_RECORDS):
                records += todo[end][1].records
                end += 1
            pieces = [piece for _, batch in todo[start:end] for piece in batch.pieces]
            encoded = encode_batches(
                pa.chunked_array([piece.keys for piece in pieces], pa.binary()),
                pa.chunked_array([piece.values for piece in pieces], pa.binary()),
                [batch.records for _, batch in todo[start:end]],
                timestamp=timestamp,
                compression=self.codec,
                compression_level=self.level,
                key_lengths=np.concatenate([piece.key_lengths for piece in pieces]),
                value_lengths=np.concatenate([piece.value_lengths for piece in pieces]),
            )
            out.extend(
                EncodedBatch(tp, data, batch.records, batch.size, timestamp)
                for (tp, batch), data in zip(todo[start:end], encoded, strict=True)
            )
            start = end
        return out

    async def _hand_over(self, encoded: list[EncodedBatch]) -> None:
        if not encoded:
            return
        try:
            self.handed.extend(await self.producer.send_encoded(encoded))
        except KafkaError as exc:  # no room in buffer.memory within max.block.ms
            raise LogbusSparkError(f"writing to logbus failed: {exc}") from None
        self._check_handed()

    def _check_handed(self) -> None:
        """Forget the batches acknowledged; LogbusSparkError for one that failed."""
        handed = self.handed
        while handed and handed[0].settled:
            batch = handed.popleft()
            if batch.error is not None:
                raise LogbusSparkError(f"writing to logbus failed: {batch.error}")

    async def flush(self) -> None:
        """Send every batch, open ones too, and return once all are acknowledged."""
        await self._start()
        await self._hand_over(self._encode_closed(close_open=True))
        await self.producer.flush()
        for batch in self.handed:
            if batch.error is not None:
                raise LogbusSparkError(f"writing to logbus failed: {batch.error}")
        self.handed.clear()
