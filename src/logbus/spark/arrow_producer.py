"""Sending Arrow columns to logbus as pre-encoded record batches: the sink's fast path.

The entry point is `ArrowProducer`. It does for a Spark task what logbus's `Producer`
does for an application, without a Python object per record (but for keyed rows, whose
murmur2 hash is computed one key at a time): rows are partitioned as Kafka's default
partitioner does (the `partition` column, else murmur2 of the key, else sticky
`batch.size` runs for keyless rows, KIP-480) and appended to their partition's open
batch, which closes at `batch.size` bytes. Closed batches are encoded at once by
`records.columnar_encode.encode_batches` (many per call) and sent while the task goes on
reading rows: each partition has at most one batch in flight, the oldest it has not had
acknowledged, so its batches are written in order; a Produce request carries the
batches of every partition of one leader that are ready (up to max.request.size), and up
to max.in.flight.requests.per.connection requests are in flight per broker. A failed
batch is resent (the same bytes) after a backoff and a metadata refresh, while
`retries` and delivery.timeout.ms allow. With idempotence (on by default, as in Kafka's
producer) every batch carries the producer id and its sequence number, and a resent
batch is never written twice. When more than buffer.memory bytes wait for
acknowledgement, `send` waits.

Owned by one task: one event loop, one Cluster; every call is made on that loop. The
sink runs the loop in a thread of its own, so requests go out and answers come in while
the task waits for its next rows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaError
from logbus.client.partitioner import partition_for_key
from logbus.client.producer.accumulator import RECORD_OVERHEAD
from logbus.client.producer.config import compression_of, parse_producer_config
from logbus.client.requests.produce import produce_many
from logbus.client.requests.producer_id import (
    NO_PRODUCER,
    ProducerIdAndEpoch,
    init_producer_id,
)
from logbus.protocol import ErrorCode
from logbus.records.batch import HEADER_SIZE
from logbus.records.builder import now_ms
from logbus.records.columnar_encode import encode_batches, lengths_of, record_sizes
from logbus.spark.options import LogbusSparkError

TopicPartition = tuple[str, int]
Rows = npt.NDArray[np.int64]
Lengths = npt.NDArray[np.int64]
# Records per `encode_batches` call, about: enough to share a call's fixed cost among many
# small batches, few enough for the arrays of one call to stay in the CPU's caches.
_ENCODE_RECORDS = 8192


@dataclass
class _Batch:
    """Rows of one partition, at most batch.size bytes of records, and their encoded
    bytes once closed and encoded (kept, with their sequence number, until
    acknowledged)."""

    # (keys, values, their lengths as `lengths_of` gives them)
    pieces: list[tuple[pa.Array, pa.Array, Lengths, Lengths]] = field(default_factory=list)
    records: int = 0
    size: int = 0  # bytes of its records, at most
    encoded: memoryview | None = None
    attempts: int = 0  # sends that failed
    created: float = field(default_factory=time.monotonic)  # for delivery.timeout.ms
    retry_at: float = 0.0  # monotonic time before which it is not resent


@dataclass
class _Partition:
    """One partition's batches: the open one being filled, the closed ones oldest first
    (the first may be in flight), and the sequence number of the next batch encoded."""

    open: _Batch = field(default_factory=_Batch)
    closed: collections.deque[_Batch] = field(default_factory=collections.deque)
    sequence: int = 0
    busy: bool = False  # its oldest batch is in a request in flight


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
    """Partitions, encodes and sends Arrow rows: `send` queues rows (sending once
    buffer.memory bytes are queued), `flush` returns once every row given so far is
    acknowledged (with acks=0: written to the socket); `close` closes its connections."""

    def __init__(self, producer_config: Mapping[str, str]) -> None:
        self.config: dict[str, Any] = parse_producer_config(producer_config, {})
        c = self.config
        self.codec, self.level = compression_of(c)
        self.batch_size = max(1, min(c["batch.size"], c["max.request.size"]) - HEADER_SIZE)
        self.cluster: Cluster | None = None
        self.producer = NO_PRODUCER
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes in it)
        self.partitions: dict[TopicPartition, _Partition] = {}
        self.unacknowledged_bytes = 0  # of every batch, open or closed
        self.requests: set[asyncio.Task[None]] = set()
        self.in_flight: collections.Counter[int] = collections.Counter()  # per broker
        self.progress = asyncio.Event()  # set when a request ends
        self.refreshing: asyncio.Task[None] | None = None
        self.error: LogbusSparkError | None = None

    async def close(self) -> None:
        """Stop sending (requests still in flight are abandoned: a task that failed
        is retried by Spark) and close the connections."""
        for request in self.requests:
            request.cancel()
        if self.refreshing is not None:
            self.refreshing.cancel()
        await asyncio.gather(*self.requests, *filter(None, [self.refreshing]),
                             return_exceptions=True)
        if self.cluster is not None:
            await self.cluster.close()
            self.cluster = None

    async def _connect(self) -> Cluster:
        if self.cluster is None:
            self.cluster = await Cluster.from_config(self.config)
            if self.config["enable.idempotence"]:
                self.producer = await self._with_retries(
                    "InitProducerId", lambda: self._init_producer_id()
                )
        return self.cluster

    async def _init_producer_id(self) -> ProducerIdAndEpoch:
        assert self.cluster is not None
        return await init_producer_id(await self.cluster.bootstrap())

    async def _with_retries(self, what: str, call: Any) -> Any:
        deadline = time.monotonic() + self.config["max.block.ms"] / 1000
        attempt = 0
        while True:
            try:
                return await call()
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() >= deadline:
                    raise LogbusSparkError(f"{what} failed: {exc}") from None
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        c = self.config
        base = float(c["retry.backoff.ms"] * 2**attempt)
        return min(base, float(c["retry.backoff.max.ms"])) / 1000 * random.uniform(0.8, 1.2)

    async def partition_count(self, topic: str) -> int:
        """The topic's partitions, once every one has a leader (creating the topic when
        the broker auto-creates topics), waiting up to max.block.ms as `Producer` does."""
        count = self.partition_counts.get(topic)
        if count is not None:
            return count
        cluster = await self._connect()
        deadline = time.monotonic() + self.config["max.block.ms"] / 1000
        attempt = 0
        while True:
            md = await cluster.refresh(
                sorted({topic, *self.partition_counts}), allow_auto_topic_creation=True
            )
            try:
                count = md.ready_partition_count(topic)
            except KafkaError as exc:
                raise LogbusSparkError(f"cannot write to topic {topic!r}: {exc}") from None
            if count is not None:
                self.partition_counts[topic] = count
                return count
            if time.monotonic() >= deadline:
                raise LogbusSparkError(
                    f"topic {topic!r} not present in metadata after "
                    f"{self.config['max.block.ms']} ms"
                )
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1

    async def send(
        self,
        keys: pa.Array,
        values: pa.Array,
        topics: list[tuple[str, Rows]],
        partitions: pa.Array | None,
    ) -> None:
        """Queue rows (`keys` and `values` binary arrays; for each topic the rows going
        to it, in order, without repeats; the `partition` column if any) and send the
        batches they fill, waiting while more than buffer.memory bytes are
        unacknowledged. `flush` sends the rest."""
        self._raise_error()
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
                tp = (topic, partition)
                if int(chosen_rows[-1]) - first == n - 1:
                    # A run of consecutive rows (keyless rows stick to a partition).
                    self._queue(tp, keys.slice(first, n), values.slice(first, n),
                                key_lengths[first:first + n], value_lengths[first:first + n])
                else:
                    taken = pa.array(chosen_rows)
                    self._queue(tp, keys.take(taken), values.take(taken),
                                key_lengths[chosen_rows], value_lengths[chosen_rows])
        self._encode_closed()
        self._dispatch()
        while self.unacknowledged_bytes > self.config["buffer.memory"]:
            if not self.requests and self.refreshing is None:
                # Only open batches hold the bytes (buffer.memory is below a batch per
                # partition): send them as they are.
                self._encode_closed(close_open=True)
                self._dispatch()
            await self._wait_for_progress()
        self._raise_error()

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
        current, filled = self.sticky.get(topic, (random.randrange(count), 0))
        before = np.cumsum(sizes)
        total = filled + int(before[-1])
        before -= sizes
        before += filled
        # Row i goes before_i // batch.size partitions further than `current`.
        moves = int(before[-1]) // self.batch_size
        if moves > len(sizes):  # batches smaller than rows
            chosen: npt.NDArray[np.int64] = (current + before // self.batch_size) % count
        else:
            # The rows from where `before` reaches each multiple of batch.size on go one
            # partition further: a few cuts, not a division per row.
            steps = np.searchsorted(before, np.arange(1, moves + 1) * self.batch_size)
            chosen = np.repeat(
                np.arange(current, current + moves + 1, dtype=np.int64),
                np.diff(steps, prepend=0, append=len(sizes)),
            )
            if current + moves >= count:
                chosen %= count
        self.sticky[topic] = (
            (current + total // self.batch_size) % count, total % self.batch_size
        )
        return chosen

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
        self.unacknowledged_bytes += int(ends[-1])
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
                batch.pieces.append((keys.slice(start, n), values.slice(start, n),
                                     key_lengths[start:end], value_lengths[start:end]))
                batch.records += n
                batch.size += int(ends[end - 1]) - before
            if end < len(sizes):
                partition.closed.append(batch)
                partition.open = _Batch()
            start = end

    def _encode_closed(self, *, close_open: bool = False) -> None:
        """Encode every closed batch not encoded yet (with `close_open`, close the open
        batches first), in calls of about _ENCODE_RECORDS records."""
        todo: list[tuple[_Partition, _Batch]] = []
        for partition in self.partitions.values():
            if close_open and partition.open.records:
                partition.closed.append(partition.open)
                partition.open = _Batch()
            for batch in reversed(partition.closed):
                if batch.encoded is not None:
                    break
                todo.append((partition, batch))
        if not todo:
            return
        todo.reverse()  # each partition's batches oldest first, for their sequences
        idempotent = self.producer.producer_id >= 0
        sequences = []
        for partition, batch in todo:
            sequences.append(partition.sequence)
            partition.sequence = (partition.sequence + batch.records) % (1 << 31)
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
                pa.chunked_array([piece[0] for piece in pieces], pa.binary()),
                pa.chunked_array([piece[1] for piece in pieces], pa.binary()),
                [batch.records for _, batch in todo[start:end]],
                timestamp=timestamp,
                producer_id=self.producer.producer_id,
                producer_epoch=self.producer.epoch,
                base_sequences=sequences[start:end] if idempotent else None,
                compression=self.codec,
                compression_level=self.level,
                key_lengths=np.concatenate([piece[2] for piece in pieces]),
                value_lengths=np.concatenate([piece[3] for piece in pieces]),
            )
            for (_, batch), data in zip(todo[start:end], encoded, strict=True):
                batch.encoded = data
                batch.pieces = []  # the rows are in the bytes now
            start = end

    def _dispatch(self) -> None:
        """Send the oldest batch of every partition that has none in flight, in Produce
        requests of up to max.request.size per leader, while its broker has fewer than
        max.in.flight.requests.per.connection requests in flight."""
        if self.error is not None or self.cluster is None or self.cluster.metadata is None:
            return  # failed, or nothing queued yet
        metadata = self.cluster.metadata
        now = time.monotonic()
        by_leader: dict[int, list[tuple[TopicPartition, _Partition]]] = {}
        for tp, partition in self.partitions.items():
            if partition.busy or not partition.closed:
                continue
            batch = partition.closed[0]
            if batch.encoded is None or batch.retry_at > now:
                continue
            try:
                leader = metadata.leader(*tp)
            except KafkaError as exc:  # no leader now (a broker is failing over)
                if self._give_up(batch, exc):
                    return
                self._refresh_later(batch)
                continue
            by_leader.setdefault(leader, []).append((tp, partition))
        limit = self.config["max.request.size"]
        cap = self.config["max.in.flight.requests.per.connection"]
        for node, ready in by_leader.items():
            group: dict[TopicPartition, _Batch] = {}
            size = 0
            for tp, partition in ready:
                batch = partition.closed[0]
                assert batch.encoded is not None
                if group and size + len(batch.encoded) > limit:
                    if not self._send(node, group, cap):
                        break
                    group, size = {}, 0
                group[tp] = batch
                size += len(batch.encoded)
                partition.busy = True
            else:
                if group:
                    self._send(node, group, cap)
                continue
            # The broker has all the requests it may: give back the batches not sent.
            for tp, _ in ready:
                if tp in group:
                    self.partitions[tp].busy = False

    def _send(self, node: int, group: dict[TopicPartition, _Batch], cap: int) -> bool:
        """Start one Produce request; False (nothing started) when `node` has `cap`."""
        if self.in_flight[node] >= cap:
            return False
        self.in_flight[node] += 1
        request = asyncio.get_running_loop().create_task(self._produce(node, group))
        self.requests.add(request)
        request.add_done_callback(self.requests.discard)
        return True

    def _give_up(self, batch: _Batch, exc: KafkaError) -> bool:
        """Whether `batch` failed for good (a fatal error, or retries or
        delivery.timeout.ms exhausted); if so the producer fails with `exc`."""
        c = self.config
        batch.attempts += 1
        if (
            exc.retriable
            and batch.attempts <= c["retries"]
            and time.monotonic() < batch.created + c["delivery.timeout.ms"] / 1000
        ):
            return False
        if self.error is None:
            self.error = LogbusSparkError(f"writing to logbus failed: {exc}")
        self.progress.set()
        return True

    def _refresh_later(self, batch: _Batch) -> None:
        """Hold `batch` back for a backoff, refreshing metadata meanwhile, then send."""
        delay = self._backoff(batch.attempts - 1)
        batch.retry_at = time.monotonic() + delay
        if self.refreshing is None:
            self.refreshing = asyncio.get_running_loop().create_task(self._refresh(delay))

    async def _refresh(self, delay: float) -> None:
        try:
            await asyncio.sleep(delay)
            assert self.cluster is not None
            with contextlib.suppress(KafkaError):  # the batches' next attempts decide
                await self.cluster.refresh(sorted(self.partition_counts))
        finally:
            self.refreshing = None
        # Every batch held back is due by now (each waits at most its own backoff).
        for partition in self.partitions.values():
            if partition.closed:
                partition.closed[0].retry_at = 0.0
        self._dispatch()
        self.progress.set()

    async def _produce(self, node: int, group: dict[TopicPartition, _Batch]) -> None:
        """One Produce request to `node` carrying `group`; acknowledged batches leave
        their partition, failed ones are resent later or fail the producer."""
        assert self.cluster is not None
        outcome: dict[TopicPartition, Any]
        try:
            conn = await self.cluster.node(node)
            encoded = {tp: batch.encoded for tp, batch in group.items()}
            results = await produce_many(
                conn, encoded,  # type: ignore[arg-type]  # every batch is encoded
                self.config["acks"], timeout_ms=self.config["request.timeout.ms"],
            )
            outcome = dict.fromkeys(group) if results is None else dict(results)
        except KafkaError as exc:
            outcome = dict.fromkeys(group, exc)
        except Exception as exc:  # a bug or the loop closing: fail the task, not hang it
            if self.error is None:
                self.error = LogbusSparkError(f"writing to logbus failed: {exc!r}")
            raise
        finally:
            self.in_flight[node] -= 1
            self.progress.set()
        for tp, result in outcome.items():
            partition = self.partitions[tp]
            partition.busy = False
            failed = isinstance(result, KafkaError) and (
                result.code != ErrorCode.DUPLICATE_SEQUENCE_NUMBER
            )
            if not failed:
                self._acknowledged(tp)
            elif not self._give_up(group[tp], result):
                self._refresh_later(group[tp])
        self._dispatch()

    def _acknowledged(self, tp: TopicPartition) -> None:
        partition = self.partitions[tp]
        batch = partition.closed.popleft()
        self.unacknowledged_bytes -= batch.size

    async def _wait_for_progress(self) -> None:
        """Wait until a request ends (or the producer fails)."""
        self._raise_error()
        if not self.requests and self.refreshing is None:
            raise LogbusSparkError("writing to logbus failed: nothing left in flight")
        self.progress.clear()
        await self.progress.wait()
        self._raise_error()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    async def flush(self) -> None:
        """Send every batch, open ones too, and return once all are acknowledged."""
        await self._connect()
        self._encode_closed(close_open=True)
        self._dispatch()
        while any(partition.closed for partition in self.partitions.values()):
            await self._wait_for_progress()
        self._raise_error()
