"""The mirror loop: consumers in one group read the source cluster's topics that match a
pattern, one producer writes every record to the target cluster, and the source offsets
are committed only once the target has acknowledged everything read before them.

Theory of operation (Kafka's legacy MirrorMaker, `kafka.tools.MirrorMaker`): each of the
`streams` consumers polls, hands what it read to the shared producer and remembers, per
partition, the offset after the last record it handed over. Records travel as columns:
the consumer's `poll_columns()` gives each batch's keys, values and timestamps as lists,
and each partition's run of them goes to the producer's columnar `send_many` (with the
partition and the timestamps), so no Python code runs per record. Handing over never
waits for an acknowledgement (only for the producer's buffer space), so the next poll's
records are read and encoded while the previous ones are in flight to the target. Every commit
interval a stream takes a checkpoint: the offsets handed over so far and the sends still
unacknowledged at that moment; once every one of those sends is acknowledged, it commits
the checkpoint's offsets, while later records keep flowing. Before a rebalance takes
partitions away, and when the mirror stops, it flushes the producer and commits. A record
that fails stops the mirror before anything after it is committed. So a mirror killed at
any point restarts from offsets whose records are all on the target: nothing is lost, and
what was copied after the last commit is copied again (duplicates, as in Kafka). Keys,
values, headers and timestamps are kept; a record keeps its partition when the topic has
as many partitions on both sides, otherwise the target's partitioner picks one from the
key.

Settings the user leaves out are chosen for bulk copying (`BULK_CONSUMER_DEFAULTS`,
`BULK_PRODUCER_DEFAULTS`): large polls and fetches, a larger producer buffer; what the
user sets always wins.

The entry point is `MirrorMaker`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, groupby, repeat
from operator import attrgetter, itemgetter
from typing import Any

from logbus.client.admin import Admin
from logbus.client.admin.config import ADMIN_CONFIG
from logbus.client.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerRebalanceListener,
    PartitionColumns,
)
from logbus.client.consumer.config import CONSUMER_CONFIG
from logbus.client.metrics import Metrics
from logbus.client.producer import Producer, ProducerRecord
from logbus.client.producer.config import parse_producer_config
from logbus.client.types import TopicPartition
from logbus.mirror.topics import TargetTopics

log = logging.getLogger(__name__)

# Serializer settings of a Kafka MirrorMaker config file: the mirror copies bytes, so
# they are dropped (Kafka's MirrorMaker hard-codes its byte-array ones).
_SERDE_SETTINGS = ("key.deserializer", "value.deserializer", "key.serializer", "value.serializer")
_POLL_MS = 200

# Settings chosen for bulk copying when the user's config leaves them out (the user's
# always win). The consumer takes bigger polls, as the Spark source reads whole fetches:
# a poll's fixed cost (group upkeep, positions, one yield) and a send_many's are then
# shared by thousands of records. Fetches keep Kafka's 1 MiB per partition: larger
# responses (8 MiB x 6 partitions) outgrow the connection's reusable frame buffers and
# cost a copy per doubling as they arrive.
BULK_CONSUMER_DEFAULTS: Mapping[str, str] = {
    "max.poll.records": "10000",
}
# The producer keeps 64 MiB of records in flight instead of 32: with acks=all on a
# replicated target, a send's acknowledgement takes a follower's fetch, and the reading
# side must not stall on buffer space meanwhile.
BULK_PRODUCER_DEFAULTS: Mapping[str, str] = {
    "buffer.memory": str(64 * 1024 * 1024),
}
# Sends (one per poll) handed to the producer and not yet acknowledged, at most: more
# wait for the oldest. buffer.memory bounds the bytes in flight; this bounds the count
# when polls are small.
_MAX_UNACKNOWLEDGED = 256

_TOPIC_PARTITION = itemgetter(0, 1)
_VALUES = attrgetter("values")
_KEYS = attrgetter("keys")
_TIMESTAMPS = attrgetter("timestamps")


def _joined(
    run: list[PartitionColumns], column: Callable[[PartitionColumns], list[Any]]
) -> list[Any]:
    """One column of a partition's consecutive pieces, as one list."""
    if len(run) == 1:
        return column(run[0])
    return list(chain.from_iterable(map(column, run)))


class MirrorError(Exception):
    """A mirror that cannot start or go on (same cluster at both ends, a record the
    target refused); the message names the problem."""


@dataclass(frozen=True)
class MirrorSettings:
    """What to copy and how: the source consumer's and the target producer's settings
    (Kafka's names), the topics (a pattern matched against whole names), the number of
    consumers and how often they commit."""

    consumer: Mapping[str, Any]
    producer: Mapping[str, Any]
    include: re.Pattern[str]
    streams: int = 1
    commit_interval_ms: int = 60000


class MirrorMetrics:
    """The mirror's metrics by MirrorMaker 2's names (`record-count`, `record-rate`,
    `byte-rate`, `replication-latency-ms-avg`, ...) plus the consumers' lag and the
    commits made. Recorded once per polled batch; safe to read from any thread."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        s = metrics.sensor
        self.records = s()
        self.bytes = s()
        self.record_age = s()
        self.replication_latency = s()
        self.commits = s()
        self.lag: dict[int, float] = {}
        add = metrics.add
        add("record-count", lambda: self.records.cumulative)
        add("record-rate", self.records.rate)
        add("byte-count", lambda: self.bytes.cumulative)
        add("byte-rate", self.bytes.rate)
        add("record-age-ms-avg", self.record_age.avg)
        add("record-age-ms-max", self.record_age.max)
        add("replication-latency-ms-avg", self.replication_latency.avg)
        add("replication-latency-ms-max", self.replication_latency.max)
        add("offset-commit-count", lambda: self.commits.cumulative)
        add("records-lag", lambda: float(sum(self.lag.values())))


def _copy_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k not in _SERDE_SETTINGS}


def producer_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The target producer's settings: the file's, over `BULK_PRODUCER_DEFAULTS`."""
    return {**BULK_PRODUCER_DEFAULTS, **_copy_settings(settings)}


def consumer_settings(settings: Mapping[str, Any], stream: int) -> dict[str, Any]:
    """A stream's consumer settings: the file's, with auto-commit off (offsets are only
    committed after the target acknowledged), earliest as the default reset (as
    MirrorMaker 2: a new mirror copies what the topics hold), `BULK_CONSUMER_DEFAULTS`
    where the file is silent, and a client id per stream."""
    config = {**BULK_CONSUMER_DEFAULTS, **_copy_settings(settings)}
    if "group.id" not in config:
        raise MirrorError("the consumer config must set group.id (the mirror's consumer group)")
    config["enable.auto.commit"] = "false"
    config.setdefault("auto.offset.reset", "earliest")
    config["client.id"] = f"{config.get('client.id') or config['group.id']}-{stream}"
    return config


def admin_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The connection and security settings of a consumer or producer config."""
    return {k: v for k, v in settings.items() if k in ADMIN_CONFIG.settings}


class MirrorMaker:
    """Owns the target producer, the two admin clients and the streams' consumers, from
    `start()` to `close()`; `run(stop)` copies until `stop` is set or a stream fails.
    Use from one event loop; `metrics()` and `progress()` may be read from any thread."""

    def __init__(self, settings: MirrorSettings) -> None:
        if settings.streams < 1:
            raise MirrorError(f"--num.streams must be at least 1, got {settings.streams}")
        self.settings = settings
        self.consumer_configs = [
            consumer_settings(settings.consumer, i) for i in range(settings.streams)
        ]
        self._producer_config = producer_settings(settings.producer)
        # Bad settings are reported before anything connects (ConfigError).
        CONSUMER_CONFIG.parse(self.consumer_configs[0])
        parse_producer_config(self._producer_config, {})
        self._source = Admin(admin_settings(settings.consumer), client_id="logbus-mirror")
        self._target = Admin(admin_settings(self._producer_config), client_id="logbus-mirror")
        self._producer: Producer | None = None
        self.topics = TargetTopics(self._source, self._target)
        self.stats = MirrorMetrics(Metrics())
        self.failure: BaseException | None = None
        self.source_cluster: str | None = None
        self.target_cluster: str | None = None

    async def start(self) -> None:
        """Connect to both clusters; MirrorError when they are one cluster."""
        await self._source.start()
        await self._target.start()
        self.source_cluster = (await self._source.describe_cluster()).cluster_id
        self.target_cluster = (await self._target.describe_cluster()).cluster_id
        if self.source_cluster is not None and self.source_cluster == self.target_cluster:
            raise MirrorError(
                f"the source and the target are the same cluster (cluster id "
                f"{self.source_cluster}): mirroring it onto itself would copy every record "
                "forever"
            )
        self._producer = Producer(self._producer_config)
        await self._producer.start()

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.close()
        await self._source.close()
        await self._target.close()

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            raise RuntimeError("the mirror is not started")
        return self._producer

    def metrics(self) -> dict[str, float]:
        return self.stats.metrics.snapshot()

    async def run(self, stop: asyncio.Event) -> None:
        """Copy until `stop` is set (then flush and commit what was copied) or a stream
        fails (MirrorError, or the client's error)."""
        current = asyncio.current_task()
        cancelling = 0 if current is None else current.cancelling()
        try:
            async with asyncio.TaskGroup() as group:
                for i, config in enumerate(self.consumer_configs):
                    group.create_task(_Stream(self, i, config).run(stop))
        except BaseExceptionGroup as failed:
            # Python 3.11's TaskGroup cancels this task when a stream fails while it
            # waits for them to end, and may leave that request counted (it checks for
            # it before the wait): take it back, or every await of the caller's clean-up
            # (closing the clients) would be cancelled too.
            while current is not None and current.cancelling() > cancelling:
                current.uncancel()
            # One stream's failure is the mirror's: report it, not the group around it.
            first: BaseException = failed
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            raise first from None

    def delivered(self, oldest_timestamp: int) -> Any:
        """The callback of one handed-over batch's acknowledgement future."""

        def done(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            error = future.exception()
            if error is not None:
                if self.failure is None:
                    self.failure = error
                return
            self.stats.replication_latency.record(max(0, time.time() * 1000 - oldest_timestamp))

        return done

    async def flush(self) -> None:
        """Wait until everything handed to the producer is acknowledged; MirrorError if a
        record failed (its offsets must never be committed)."""
        await self.producer.flush()
        if self.failure is not None:
            raise MirrorError(
                f"a record could not be written to the target: {self.failure}; the offsets "
                "after the last commit were not committed"
            ) from self.failure


@dataclass
class _Checkpoint:
    """Offsets handed over by a commit interval's end, and the sends that must be
    acknowledged before they may be committed."""

    offsets: dict[TopicPartition, int]
    sends: list[asyncio.Future[Any]] = field(default_factory=list)

    def acknowledged(self) -> bool:
        """Every send answered (acknowledged, or failed: the caller checks which)."""
        return all(send.done() for send in self.sends)


class _Stream(ConsumerRebalanceListener):
    """One consumer of the mirror's group, the offsets it has handed over since its last
    commit, the sends not yet seen acknowledged, and the checkpoint waiting for them."""

    def __init__(self, mirror: MirrorMaker, index: int, config: dict[str, Any]) -> None:
        self.mirror = mirror
        self.index = index
        self.consumer = Consumer(config)
        self.pending: dict[TopicPartition, int] = {}
        self.positions: dict[TopicPartition, int] = {}
        self.unacknowledged: deque[asyncio.Future[Any]] = deque()
        self.checkpoint: _Checkpoint | None = None

    async def run(self, stop: asyncio.Event) -> None:
        mirror = self.mirror
        interval = mirror.settings.commit_interval_ms / 1000
        async with self.consumer:
            self.consumer.subscribe(pattern=mirror.settings.include, listener=self)
            next_commit = time.monotonic() + interval
            try:
                while not stop.is_set():
                    polled = await self.consumer.poll_columns(_POLL_MS)
                    if polled:
                        await self.copy(polled)
                    self.update_lag()
                    if mirror.failure is not None:
                        await mirror.flush()  # raises: the failure ends the mirror
                    if time.monotonic() >= next_commit and self.checkpoint is None:
                        self.take_checkpoint()
                        next_commit = time.monotonic() + interval
                    await self.commit_checkpoint()
                await self.commit(list(self.pending))
            finally:
                mirror.stats.lag.pop(self.index, None)

    async def copy(self, polled: Sequence[PartitionColumns]) -> None:
        """Hand one poll's records to the producer: each partition's run of records in
        one columnar `send_many` (values, keys, timestamps, and the partition when the
        topic's counts match), straight from the consumer's columns; a run with headers
        goes as records. No Python code runs per record."""
        topics = self.mirror.topics
        producer = self.mirror.producer
        oldest = min(min(piece.timestamps) for piece in polled)
        count = size = 0
        for (topic, partition), pieces in groupby(polled, _TOPIC_PARTITION):
            run = list(pieces)
            values = _joined(run, _VALUES)
            keys = _joined(run, _KEYS)
            timestamps = _joined(run, _TIMESTAMPS)
            count += len(values)
            size += sum(map(len, filter(None, values))) + sum(map(len, filter(None, keys)))
            pair = topics.known(topic, partition) or await topics.pair(topic, partition)
            target = partition if pair.same_partitions else None
            if any(piece.headers is not None for piece in run):
                headers = chain.from_iterable(
                    repeat((), len(piece.offsets)) if piece.headers is None else piece.headers
                    for piece in run
                )
                out = list(
                    map(
                        ProducerRecord,
                        repeat(topic),
                        values,
                        keys,
                        repeat(target),
                        timestamps,
                        headers,
                    )
                )
                future = await producer.send_many(out, metadata=False)
            else:
                future = await producer.send_many(
                    topic=topic,
                    values=values,
                    keys=keys,
                    partition=target,
                    timestamps=timestamps,
                    metadata=False,
                )
            future.add_done_callback(self.mirror.delivered(oldest))
            await self.track(future)
            tp = TopicPartition(topic, partition)
            self.pending[tp] = self.positions[tp] = run[-1].offsets[-1] + 1
        stats = self.mirror.stats
        stats.records.record(count)
        stats.bytes.record(size)
        stats.record_age.record(max(0.0, time.time() * 1000 - oldest))

    async def track(self, send: asyncio.Future[Any]) -> None:
        """Remember an unacknowledged send, forgetting those answered (a failure is
        noted as it is forgotten, so no later checkpoint misses it); with too many in
        flight, wait for the oldest."""
        unacknowledged = self.unacknowledged
        unacknowledged.append(send)
        while unacknowledged and unacknowledged[0].done():
            self.note_failure(unacknowledged.popleft())
        if len(unacknowledged) > _MAX_UNACKNOWLEDGED:
            await asyncio.wait([unacknowledged[0]])

    def take_checkpoint(self) -> None:
        """Note the offsets handed over so far and the sends they wait for."""
        if not self.pending:
            return
        self.checkpoint = _Checkpoint(dict(self.pending), list(self.unacknowledged))

    async def commit_checkpoint(self) -> None:
        """Commit the checkpoint's offsets once its sends are all acknowledged."""
        checkpoint = self.checkpoint
        if checkpoint is None or not checkpoint.acknowledged():
            return
        self.checkpoint = None
        await self.check_sends(checkpoint.sends)
        owned = set(self.consumer.assignment())
        offsets = {tp: o for tp, o in checkpoint.offsets.items() if tp in owned}
        if offsets:
            await self.commit_offsets(offsets)
        for tp, offset in offsets.items():
            if self.pending.get(tp) == offset:
                del self.pending[tp]

    async def commit(self, partitions: Sequence[TopicPartition]) -> None:
        """Flush the producer, then commit these partitions' handed-over offsets."""
        offsets = {tp: self.pending[tp] for tp in partitions if tp in self.pending}
        if not offsets:
            return
        await self.mirror.flush()
        await self.check_sends(self.unacknowledged)
        await self.commit_offsets(offsets)
        for tp in offsets:
            self.pending.pop(tp, None)

    async def check_sends(self, sends: Sequence[asyncio.Future[Any]] | deque[Any]) -> None:
        """MirrorError if one of these answered sends failed. Checked here, not left to
        their callbacks, which may not have run yet when the producer's flush returns."""
        for send in sends:
            if send.done():
                self.note_failure(send)
        if self.mirror.failure is not None:
            await self.mirror.flush()  # raises: nothing after the failure is committed

    def note_failure(self, send: asyncio.Future[Any]) -> None:
        """Make an answered send's failure the mirror's (the first one stays)."""
        mirror = self.mirror
        if mirror.failure is None:
            if send.cancelled():
                mirror.failure = asyncio.CancelledError("the send was cancelled")
            else:
                mirror.failure = send.exception()

    async def commit_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit offsets whose records the target has acknowledged."""
        try:
            await self.consumer.commit(offsets)
        except CommitFailedError as exc:
            # The group moved them on: their new owner starts at the last commit, so
            # what was copied since is copied again, never lost.
            log.warning("mirror stream %d: commit refused (%s)", self.index, exc)
        else:
            self.mirror.stats.commits.record()

    def update_lag(self) -> None:
        lag = 0
        for tp in self.consumer.assignment():
            hw = self.consumer.highwater(tp)
            position = self.positions.get(tp)
            if hw is not None and position is not None:
                lag += max(0, hw - position)
        self.mirror.stats.lag[self.index] = lag

    # --- the rebalance listener -------------------------------------------------------

    async def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        await self.commit(list(revoked))
        for tp in revoked:
            self.positions.pop(tp, None)

    async def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        # Already someone else's: nothing may be committed for them any more.
        for tp in lost:
            self.pending.pop(tp, None)
            self.positions.pop(tp, None)
