"""Records waiting to be sent, gathered per partition into batches (Kafka's
RecordAccumulator and ProducerBatch).

Each record is encoded once, on `append`, straight into its batch's buffer; the batch's
header is written (and its records compressed) once, when the sender drains it. Batches
encoded elsewhere (the Spark sink's columnar encoder) join their partition's queue whole,
through `append_encoded`, and take the same path to the broker.

The accumulator's `lock` guards its queues: the blocking producer appends from its
callers' threads while the sender drains on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from logbus.client.producer.records import RecordMetadata, metadata_from_tuple
from logbus.client.types import TopicPartition
from logbus.records.batch import HEADER_SIZE, NO_SEQUENCE
from logbus.records.builder import new_batch_buffer, restamp_batch, seal_batch
from logbus.records.compression import CompressionType
from logbus.records.record import (
    HeaderInput,
    plain_record_parts,
    write_plain_record,
    write_record,
)

# Bytes a record costs beyond its key, value and headers, counted against
# buffer.memory and batch.size (its varints and attributes at their largest).
RECORD_OVERHEAD = 21

RecordFuture = asyncio.Future[RecordMetadata]

log = logging.getLogger(__name__)

# Notified whenever a batch settles: what threads waiting for a record's metadata wait on
# (one condition for every batch, so that a batch costs no lock of its own).
BATCH_SETTLED = threading.Condition()

_EMPTY_HEADER = bytes(HEADER_SIZE)
TIMESTAMP_LIMIT = 1 << 63


class EncodedBatch(NamedTuple):
    """A record batch encoded outside the producer (the Spark sink's columnar encoder),
    without producer id or sequence: its partition, bytes, records, their accounted
    size (counted against buffer.memory) and the timestamp it was encoded with."""

    tp: TopicPartition
    data: memoryview
    records: int
    size: int
    timestamp: int


def valid_timestamp(timestamp: int) -> int:
    """A record's timestamp given by its sender, checked as Kafka's ProducerRecord does
    (ValueError unless an int from 0 to 2**63-1)."""
    if not isinstance(timestamp, int) or not 0 <= timestamp < TIMESTAMP_LIMIT:
        raise ValueError(
            f"Invalid timestamp: {timestamp!r}. Timestamp should always be non-negative "
            "milliseconds (an int below 2**63) or None."
        )
    return timestamp


def record_size(
    key: bytes | None, value: bytes | None, headers: HeaderInput | None
) -> int:
    """The size a record is accounted at (buffer.memory, batch.size, max.request.size)."""
    size = RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        for header_key, header_value in headers:
            size += len(header_key) + 10 + (len(header_value) if header_value else 0)
    return size


class ProducerBatch:
    """Records for one partition: open while records are appended, then sealed (header,
    compression, producer id and sequence) and sent, perhaps several times, until it
    completes. Lives on the producer's event loop."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "base_timestamp",
        "buf",
        "count",
        "created",
        "data",
        "done",
        "encoded",
        "error",
        "futures",
        "max_timestamp",
        "reserved",
        "result_offset",
        "retry_at",
        "settled",
        "thunks",
        "timestamps",
        "tp",
    )

    def __init__(self, tp: TopicPartition, base_timestamp: int, now: float) -> None:
        self.tp = tp
        self.buf: bytearray = new_batch_buffer()
        self.count = 0
        self.base_timestamp = base_timestamp
        self.max_timestamp = base_timestamp
        self.created = now
        self.reserved = 0
        self.timestamps: list[int] = []
        self.futures: list[tuple[int, RecordFuture]] = []  # (index, future) of send()s
        self.data: bytearray | memoryview | None = None
        self.encoded = False  # its records came encoded: closed to appends
        # Called once it settles (under BATCH_SETTLED; None when none are registered).
        self.thunks: list[Callable[[], Any]] | None = None
        self.base_sequence = NO_SEQUENCE
        self.attempts = 0
        self.retry_at = 0.0
        self.done: asyncio.Future[None] | None = None
        self.result_offset = -1
        self.settled = False
        self.error: BaseException | None = None

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        timestamp: int,
        future: RecordFuture | None,
        size: int,
    ) -> int:
        """Encode one record into the batch; returns its index. A record that cannot be
        encoded (headers not `(str, bytes | None)` pairs) raises and leaves the batch
        as it was."""
        index = self.count
        mark = len(self.buf)
        try:
            if headers:
                write_record(
                    self.buf, index, timestamp - self.base_timestamp, key, value, headers
                )
            else:
                write_plain_record(self.buf, index, timestamp - self.base_timestamp, key, value)
        except BaseException:
            del self.buf[mark:]  # no half-written record
            raise
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        self.timestamps.append(timestamp)
        if future is not None:
            self.futures.append((index, future))
        self.reserved += size
        self.count = index + 1
        return index

    def append_values(
        self,
        values: Sequence[bytes],
        keys: Sequence[bytes] | None,
        timestamp: int,
        size: int,
        *,
        same_length: bool = False,
        timestamps: Sequence[int] | None = None,
    ) -> int:
        """Encode many header-less records of one timestamp, or each of its own from
        `timestamps` (then `timestamp` is their largest), in one go (`size`: their
        accounted bytes); returns the first one's index. `same_length`: the caller knows
        the values are of one length."""
        first = self.count
        base = self.base_timestamp
        parts = plain_record_parts(
            values,
            keys,
            first_offset_delta=first,
            timestamp_delta=timestamp - base,
            same_length=same_length,
            timestamp_deltas=(
                None if timestamps is None else list(map(operator.sub, timestamps, repeat(base)))
            ),
        )
        if len(self.buf) == HEADER_SIZE:
            parts.insert(0, _EMPTY_HEADER)  # a fresh batch: one copy of the records
            self.buf = bytearray().join(parts)
        else:
            self.buf += b"".join(parts)
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        added = len(values)
        self.timestamps.extend(repeat(timestamp, added) if timestamps is None else timestamps)
        self.reserved += size
        self.count = first + added
        return first

    @classmethod
    def from_encoded(cls, encoded: EncodedBatch) -> ProducerBatch:
        """A batch whose records were encoded elsewhere, closed to appends."""
        batch = cls(encoded.tp, encoded.timestamp, time.monotonic())
        batch.buf = bytearray()
        batch.data = encoded.data
        batch.encoded = True
        batch.count = encoded.records
        batch.reserved = encoded.size
        return batch

    @property
    def size(self) -> int:
        return len(self.buf) if self.data is None else len(self.data)

    def seal(
        self,
        compression: CompressionType,
        level: int | None,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        is_transactional: bool = False,
    ) -> None:
        self.base_sequence = base_sequence
        if self.encoded:
            assert self.data is not None
            if base_sequence != NO_SEQUENCE:
                restamp_batch(
                    self.data,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    base_sequence=base_sequence,
                    is_transactional=is_transactional,
                )
            return
        self.data = seal_batch(
            self.buf,
            count=self.count,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            compression=compression,
            compression_level=level,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
        )

    def waiter(self) -> asyncio.Future[None]:
        """A future done when the batch completes or fails (for flush and send_batch)."""
        if self.done is None:
            self.done = asyncio.get_running_loop().create_future()
            if self.settled:
                self.done.set_result(None)
        return self.done

    def complete(self, base_offset: int, log_append_time: int) -> None:
        topic, partition = self.tp
        timestamps = self.timestamps
        make = metadata_from_tuple
        for index, future in self.futures:
            if not future.done():
                offset = base_offset + index if base_offset >= 0 else -1
                ts = timestamps[index] if log_append_time < 0 else log_append_time
                future.set_result(make((topic, partition, offset, ts)))
        if log_append_time >= 0:
            self.timestamps = [log_append_time] * self.count
        self.data = None  # the bytes are no longer needed; send_batch reads the rest
        self._finish(base_offset, None)

    def fail(self, error: BaseException) -> None:
        for _, future in self.futures:
            if not future.done():
                future.set_exception(error)
        self._finish(-1, error)

    def on_settled(self, thunk: Callable[[], Any]) -> bool:
        """Have `thunk` called (on the thread settling the batch) once the batch settles;
        False, and nothing registered, if it has settled already."""
        with BATCH_SETTLED:
            if self.settled:
                return False
            if self.thunks is None:
                self.thunks = []
            self.thunks.append(thunk)
            return True

    def _finish(self, base_offset: int, error: BaseException | None) -> None:
        self.buf = bytearray()
        self.result_offset = base_offset
        self.error = error
        with BATCH_SETTLED:
            self.settled = True
            thunks, self.thunks = self.thunks, None
            BATCH_SETTLED.notify_all()
        if self.done is not None and not self.done.done():
            self.done.set_result(None)
        for thunk in thunks or ():
            try:
                thunk()
            except Exception:  # a user's callback: it must not stop the others
                log.exception("a delivery callback raised")


def all_settled(batches: Iterable[ProducerBatch]) -> asyncio.Future[None]:
    """A future done once every one of `batches` has settled (on the event loop that
    settles them). The code settling the last one completes it directly, so its awaiter
    wakes ahead of the callbacks chained on the batches' `waiter()`s: a transaction's
    EndTxn leaves before a `send_many`'s list of RecordMetadata is built."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    remaining = 0

    def one_settled() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not done.done():
            done.set_result(None)

    for batch in batches:
        if batch.on_settled(one_settled):
            remaining += 1
    if remaining == 0:
        done.set_result(None)
    return done


class RecordAccumulator:
    """The open and full batches of every partition, oldest first. Shared between the
    producer's event loop and the threads of the blocking producer's callers: every
    method but `append_encoded` and `all_batches` expects its caller to hold `lock`."""

    def __init__(self, batch_size: int, on_ready: Callable[[], Any]) -> None:
        self.batch_size = max(batch_size, 1)
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        # Held by whoever reads or changes the queues (and the open batches in them).
        self.lock = threading.Lock()
        self._on_ready = on_ready

    def append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        timestamp: int,
        future: RecordFuture | None,
        size: int,
    ) -> tuple[ProducerBatch, int]:
        """Add a record to the partition's open batch (a new one when it is full).
        Returns the batch and the record's index in it."""
        queue = self.batches.get(tp)
        if queue is None:
            queue = self.batches[tp] = deque()
        if queue:
            batch = queue[-1]
            if batch.encoded or (batch.count and len(batch.buf) + size > self.batch_size):
                self._on_ready()  # the previous batch is full
                batch = ProducerBatch(tp, timestamp, time.monotonic())
                queue.append(batch)
        else:
            batch = ProducerBatch(tp, timestamp, time.monotonic())
            queue.append(batch)
            self._on_ready()  # a new linger deadline for the sender
        try:
            index = batch.append(key, value, headers, timestamp, future, size)
        except BaseException:
            if not batch.count:
                queue.pop()  # made for this record: no empty batch is sent
            raise
        if len(batch.buf) >= self.batch_size:
            self._on_ready()
        return batch, index

    def append_plain(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        size: int,
        future: RecordFuture | None = None,
    ) -> ProducerBatch:
        """`append` for a record without headers (send's and send_many's path), in one
        call. Returns the batch; the record's index is the batch's count minus one."""
        queue = self.batches.get(tp)
        if queue:
            batch = queue[-1]
            if batch.encoded or (batch.count and len(batch.buf) + size > self.batch_size):
                self._on_ready()
                batch = ProducerBatch(tp, timestamp, time.monotonic())
                queue.append(batch)
        else:
            if queue is None:
                queue = self.batches[tp] = deque()
            batch = ProducerBatch(tp, timestamp, time.monotonic())
            queue.append(batch)
            self._on_ready()
        buf = batch.buf
        index = batch.count
        mark = len(buf)
        try:
            write_plain_record(buf, index, timestamp - batch.base_timestamp, key, value)
        except BaseException:  # a key or value that is not bytes: no half-written record
            del buf[mark:]
            if not index:
                queue.pop()
            raise
        if timestamp > batch.max_timestamp:
            batch.max_timestamp = timestamp
        batch.timestamps.append(timestamp)
        if future is not None:
            batch.futures.append((index, future))
        batch.reserved += size
        batch.count = index + 1
        if len(buf) >= self.batch_size:
            self._on_ready()
        return batch

    def batch_with_room(self, tp: TopicPartition, size: int, timestamp: int) -> ProducerBatch:
        """The partition's open batch if a record of `size` fits in it, else a new one."""
        queue = self.batches.get(tp)
        if queue:
            batch = queue[-1]
            if not batch.encoded and (
                not batch.count or len(batch.buf) + size <= self.batch_size
            ):
                return batch
        elif queue is None:
            queue = self.batches[tp] = deque()
        batch = ProducerBatch(tp, timestamp, time.monotonic())
        queue.append(batch)
        self._on_ready()  # the previous batch is full, or a new linger deadline
        return batch

    def is_full_for(self, tp: TopicPartition, size: int) -> bool:
        """Whether a record of `size` would start a new batch for the partition."""
        queue = self.batches.get(tp)
        if not queue:
            return False
        tail = queue[-1]
        return tail.encoded or (tail.count > 0 and len(tail.buf) + size > self.batch_size)

    def append_encoded(self, batches: Sequence[ProducerBatch]) -> None:
        """Queue batches encoded elsewhere (`ProducerBatch.from_encoded`), each after its
        partition's batches already queued; they are ready to send at once."""
        with self.lock:
            for batch in batches:
                queue = self.batches.get(batch.tp)
                if queue is None:
                    queue = self.batches[batch.tp] = deque()
                queue.append(batch)
        self._on_ready()

    def all_batches(self) -> list[ProducerBatch]:
        with self.lock:
            return [batch for queue in self.batches.values() for batch in queue]

    def has_unsent(self) -> bool:
        return any(self.batches.values())
