"""Sending Arrow columns to logbus as pre-encoded record batches: the sink's fast path.

The entry point is `ArrowProducer`. It does for a Spark task what logbus's `Producer`
does for an application, without a Python object per record (but for keyed rows, whose
murmur2 hash is computed one key at a time): rows are partitioned as Kafka's default
partitioner does (the `partition` column, else murmur2 of the key, else sticky
`batch.size` runs for keyless rows, KIP-480), each partition's rows are cut into batches
of at most `batch.size` bytes, and once buffer.memory bytes are queued (and at `flush`)
they are encoded by `records.columnar.encode_batches` (many batches per call) and sent
in rounds: each round sends the oldest unacknowledged batch of every partition (one batch
per partition per Produce request, as the Produce API requires; up to
max.in.flight.requests.per.connection requests at once) and waits for the answers. So a
partition's batches are written in order; with idempotence (on by default, as in Kafka's
producer) every batch carries the producer id and its sequence number, and a resent
batch is never written twice.

Owned by one task: one event loop, one Cluster, not shared between threads.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logbus.client import admin_ops
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaError
from logbus.client.partitioner import partition_for_key
from logbus.client.producer.accumulator import RECORD_OVERHEAD
from logbus.client.producer.config import compression_of, parse_producer_config
from logbus.client.producer.idempotence import (
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
class _Pending:
    """Batches of one partition waiting to be sent, oldest first, and the sequence
    number the first of them carries."""

    # (keys, values, their lengths as `lengths_of` gives them)
    chunks: list[tuple[pa.Array, pa.Array, Lengths, Lengths]] = field(default_factory=list)
    sequence: int = 0
    encoded: list[memoryview] = field(default_factory=list)  # the first chunks' batches


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
        self.pending: dict[TopicPartition, _Pending] = {}
        # The next sequence number of each partition with nothing pending.
        self.sequences: dict[TopicPartition, int] = {}
        self.queued_bytes = 0

    async def close(self) -> None:
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
        to it; the `partition` column if any), sending what is queued once it passes
        buffer.memory bytes. `flush` sends the rest."""
        key_lengths, value_lengths = lengths_of(keys), lengths_of(values)
        for topic, rows in topics:
            count = await self.partition_count(topic)
            chosen = self._partitions(
                topic, count, rows, keys, key_lengths, value_lengths, partitions
            )
            order = np.argsort(chosen, kind="stable")
            cuts = np.flatnonzero(np.diff(chosen[order])) + 1
            for group in np.split(order, cuts):
                if not len(group):
                    continue
                chosen_rows = rows[group]
                first = int(chosen_rows[0])
                tp = (topic, int(chosen[group[0]]))
                if int(chosen_rows[-1]) - first == len(chosen_rows) - 1:
                    # A run of consecutive rows (keyless rows stick to a partition).
                    n = len(group)
                    self._queue(tp, keys.slice(first, n), values.slice(first, n),
                                key_lengths[first:first + n], value_lengths[first:first + n])
                else:
                    taken = pa.array(chosen_rows)
                    self._queue(tp, keys.take(taken), values.take(taken),
                                key_lengths[chosen_rows], value_lengths[chosen_rows])
        if self.queued_bytes >= self.config["buffer.memory"]:
            await self.flush()

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
        key_lengths = all_key_lengths[rows]
        if not self.config["partitioner.ignore.keys"]:
            keyed = np.flatnonzero((chosen < 0) & (key_lengths >= 0))
            if len(keyed):
                key_list = keys.take(pa.array(rows[keyed])).to_pylist()
                chosen[keyed] = [partition_for_key(k, count) for k in key_list]
        free = np.flatnonzero(chosen < 0)
        if len(free):
            sizes = (
                np.maximum(key_lengths[free], 0)
                + np.maximum(all_value_lengths[rows[free]], 0)
                + RECORD_OVERHEAD
            )
            current, filled = self.sticky.get(topic, (random.randrange(count), 0))
            before = filled + np.cumsum(sizes) - sizes
            chosen[free] = (current + before // self.batch_size) % count
            total = filled + int(sizes.sum())
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
        """Cut one partition's rows into batches of at most batch.size bytes."""
        sizes = record_sizes(key_lengths, value_lengths)
        largest = int(sizes.max()) + HEADER_SIZE
        if largest > self.config["max.request.size"]:
            raise LogbusSparkError(
                f"The message is {largest} bytes when serialized which is larger than "
                f"max.request.size={self.config['max.request.size']}"
            )
        ends = np.cumsum(sizes)
        self.queued_bytes += int(ends[-1])
        pending = self.pending.get(tp)
        if pending is None:
            pending = self.pending[tp] = _Pending(sequence=self.sequences.get(tp, 0))
        start = 0
        while start < len(sizes):
            before = int(ends[start - 1]) if start else 0
            end = max(start + 1, int(np.searchsorted(ends, before + self.batch_size, "right")))
            n = end - start
            pending.chunks.append((keys.slice(start, n), values.slice(start, n),
                                   key_lengths[start:end], value_lengths[start:end]))
            start = end

    def _encode_pending(self) -> None:
        """Encode every chunk not encoded yet, all in one call; a chunk keeps its bytes
        (and so its sequence number) until acknowledged, for resends."""
        todo = [
            (pending, index)
            for pending in self.pending.values()
            for index in range(len(pending.encoded), len(pending.chunks))
        ]
        if not todo:
            return
        sequences = []
        for pending, index in todo:
            before = sum(len(chunk[0]) for chunk in pending.chunks[:index])
            sequences.append((pending.sequence + before) % (1 << 31))
        idempotent = self.producer.producer_id >= 0
        timestamp = now_ms()
        # Groups of about _ENCODE_RECORDS records: many small batches share the fixed
        # cost of a call, and a group's arrays stay small enough to be cache-friendly.
        start = 0
        while start < len(todo):
            end = start
            records = 0
            while end < len(todo) and (end == start or records < _ENCODE_RECORDS):
                records += len(todo[end][0].chunks[todo[end][1]][0])
                end += 1
            chunks = [pending.chunks[index] for pending, index in todo[start:end]]
            batches = encode_batches(
                pa.concat_arrays([chunk[0] for chunk in chunks]),
                pa.concat_arrays([chunk[1] for chunk in chunks]),
                [len(chunk[0]) for chunk in chunks],
                timestamp=timestamp,
                producer_id=self.producer.producer_id,
                producer_epoch=self.producer.epoch,
                base_sequences=sequences[start:end] if idempotent else None,
                compression=self.codec,
                compression_level=self.level,
                key_lengths=np.concatenate([chunk[2] for chunk in chunks]),
                value_lengths=np.concatenate([chunk[3] for chunk in chunks]),
            )
            for (pending, _), batch in zip(todo[start:end], batches, strict=True):
                pending.encoded.append(batch)
            start = end

    async def flush(self) -> None:
        """Send every pending batch and wait for their acknowledgement: rounds of one
        Produce request per leader carrying the oldest batch of each of its partitions,
        until none is left."""
        cluster = await self._connect()
        deadline = time.monotonic() + self.config["delivery.timeout.ms"] / 1000
        attempt = 0
        self.queued_bytes = 0
        self._encode_pending()
        while self.pending:
            by_leader: dict[int, dict[TopicPartition, memoryview]] = {}
            assert cluster.metadata is not None
            failed: list[KafkaError] = []
            for tp, pending in self.pending.items():
                try:
                    leader = cluster.metadata.leader(*tp)
                except KafkaError as exc:  # no leader now (a broker is failing over)
                    failed.append(exc)
                    continue
                by_leader.setdefault(leader, {})[tp] = pending.encoded[0]
            results = await asyncio.gather(
                *(self._produce(node, batches) for node, batches in by_leader.items())
            )
            for outcome in results:
                for tp, error in outcome.items():
                    if error is None:
                        self._acknowledged(tp)
                    else:
                        failed.append(error)
            if not failed:
                attempt = 0
                continue
            fatal = [e for e in failed if not e.retriable]
            if fatal or time.monotonic() >= deadline or attempt >= self.config["retries"]:
                raise LogbusSparkError(f"writing to logbus failed: {(fatal or failed)[0]}")
            await asyncio.sleep(self._backoff(attempt))
            attempt += 1
            await cluster.refresh(sorted(self.partition_counts))

    def _acknowledged(self, tp: TopicPartition) -> None:
        pending = self.pending[tp]
        keys = pending.chunks.pop(0)[0]
        pending.encoded.pop(0)
        pending.sequence = (pending.sequence + len(keys)) % (1 << 31)
        if not pending.chunks:
            # Keep the sequence for the partition's next batches.
            self.pending.pop(tp)
            self.sequences[tp] = pending.sequence

    async def _produce(
        self, node: int, batches: dict[TopicPartition, memoryview]
    ) -> dict[TopicPartition, KafkaError | None]:
        """One Produce request per max.request.size of batches to one broker; per
        partition, None when written, else the error."""
        assert self.cluster is not None
        out: dict[TopicPartition, KafkaError | None] = {}
        limit = self.config["max.request.size"]
        groups: list[dict[TopicPartition, memoryview]] = [{}]
        size = 0
        for tp, batch in batches.items():
            if groups[-1] and size + len(batch) > limit:
                groups.append({})
                size = 0
            groups[-1][tp] = batch
            size += len(batch)
        # One batch per partition per round: the requests of a round may all be in
        # flight at once (up to max.in.flight.requests.per.connection) without any
        # partition's batches overtaking each other.
        gate = asyncio.Semaphore(self.config["max.in.flight.requests.per.connection"])

        async def send(group: dict[TopicPartition, memoryview]) -> None:
            assert self.cluster is not None
            async with gate:
                try:
                    conn = await self.cluster.node(node)
                    results = await admin_ops.produce_many(
                        conn, group, self.config["acks"],
                        timeout_ms=self.config["request.timeout.ms"],
                    )
                except KafkaError as exc:
                    out.update(dict.fromkeys(group, exc))
                    return
            if results is None:  # acks=0
                out.update(dict.fromkeys(group))
                return
            for tp, result in results.items():
                duplicate = (
                    isinstance(result, KafkaError)
                    and result.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
                )
                out[tp] = result if isinstance(result, KafkaError) and not duplicate else None

        await asyncio.gather(*(send(group) for group in groups))
        return out
