"""The asyncio consumer: `logbus.aio.Consumer`."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from logbus.client.cluster import Cluster
from logbus.client.consumer.config import CONSUMER_CONFIG
from logbus.client.consumer.coordinator import ConsumerCoordinator
from logbus.client.consumer.fetcher import Deserializer, Fetcher
from logbus.client.consumer.records import (
    ConsumerRebalanceListener,
    ConsumerRecord,
    IllegalStateError,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    PartitionColumns,
)
from logbus.client.consumer.subscription_state import SubscriptionState, SubscriptionType
from logbus.client.errors import KafkaError
from logbus.client.lifecycle import AsyncService
from logbus.client.metrics import ConsumerMetrics, Metrics
from logbus.client.requests.list_offsets import EARLIEST, LATEST
from logbus.client.types import ConsumerGroupMetadata, TopicPartition
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

_Polled = TypeVar("_Polled", ConsumerRecord, PartitionColumns)


class OffsetAndTimestamp(NamedTuple):
    """What `offsets_for_times()` finds: the first offset at or after the time asked."""

    offset: int
    timestamp: int


CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], Any]


def make_deserializer(spec: Any) -> Deserializer | None:
    """A deserializer for `key.deserializer` / `value.deserializer` (None: bytes as they
    are). None values (tombstones) stay None."""
    if spec == "bytes":
        return None
    if spec == "str":
        return lambda data: None if data is None else data.decode("utf-8")
    if spec == "json":
        return lambda data: None if data is None else json.loads(data)
    function: Callable[[bytes | None], Any] = spec
    return function


def _partitions(args: tuple[Any, ...]) -> list[TopicPartition]:
    """Accept f(tp, tp, ...) and f([tp, tp, ...])."""
    if len(args) == 1 and not isinstance(args[0], tuple):
        args = tuple(args[0])
    return [TopicPartition(*tp) for tp in args]


class Consumer(AsyncService):
    """An asyncio Kafka consumer (Kafka's KafkaConsumer, in asyncio).

        consumer = Consumer({"bootstrap.servers": "host:9092", "group.id": "g"},
                            auto_offset_reset="earliest")
        async with consumer:
            consumer.subscribe(["topic"])
            async for record in consumer:
                ...

    Configuration takes Kafka's consumer config names as a dict and/or keyword arguments
    with underscores; unknown names raise ConfigError. `start()` (or `async with`)
    connects; `close()` commits (with enable.auto.commit), leaves the group and closes
    every connection. Records are fetched in the background, ahead of `poll()`.

    Use from one task at a time on one event loop (not safe to share between threads;
    `logbus.Consumer` is the blocking wrapper for threads).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = CONSUMER_CONFIG.parse(config, **kwargs)
        cfg = self.config
        if cfg["group.instance.id"] is not None and cfg["group.id"] is None:
            raise ConfigError("group.instance.id needs group.id")
        if cfg["heartbeat.interval.ms"] >= cfg["session.timeout.ms"]:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self._key_deserializer = make_deserializer(cfg["key.deserializer"])
        self._value_deserializer = make_deserializer(cfg["value.deserializer"])
        self._subscriptions = SubscriptionState(cfg["auto.offset.reset"])
        self._cluster: Cluster | None = None
        self._fetcher: Fetcher | None = None
        self._coordinator: ConsumerCoordinator | None = None
        self._closed = False
        self._closing = False
        self._iter_buffer: deque[ConsumerRecord] = deque()
        self._last_metadata = 0.0
        self._pattern_checked = 0.0
        subscriptions = self._subscriptions
        self._metrics = ConsumerMetrics(
            Metrics.from_config(cfg), lambda: float(len(subscriptions.assignment))
        )

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (KafkaConnectionError if no bootstrap server answers)."""
        if self._cluster is not None:
            return
        if self._closed:
            raise IllegalStateError("this consumer is closed")
        cfg = self.config
        cluster = await Cluster.from_config(cfg)
        self._cluster = cluster
        self._fetcher = Fetcher(
            cluster,
            self._subscriptions,
            cfg,
            refresh_metadata=self._refresh_metadata,
            key_deserializer=self._key_deserializer,
            value_deserializer=self._value_deserializer,
        )
        self._fetcher.metrics = self._metrics
        if cfg["group.id"] is not None:
            self._coordinator = ConsumerCoordinator(
                cluster, self._subscriptions, self._fetcher, cfg
            )
            self._coordinator.metrics = self._metrics
        self._fetcher.start()

    async def close(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Commit consumed offsets (with enable.auto.commit), revoke (listener), leave
        the group and close every connection. Safe to call twice.

        `timeout` (seconds; None: no limit) bounds the commit, listener and LeaveGroup
        part, as Kafka's `close(Duration)` does: past it the connections are closed
        anyway, uncommitted positions are not committed, and the group notices the
        member is gone when its session times out."""
        if self._closed or self._closing:
            return
        self._closing = True  # the listener may still commit, until on_close() ends
        try:
            if self._coordinator is not None:
                try:
                    await asyncio.wait_for(self._coordinator.on_close(), timeout)
                except TimeoutError:
                    log.warning(
                        "consumer close: commit and LeaveGroup did not finish in %.3g s; "
                        "closing the connections anyway",
                        timeout,
                    )
        finally:
            self._closed = True
            if self._fetcher is not None:
                await self._fetcher.close()
            if self._cluster is not None:
                await self._cluster.close()

    def _started(self) -> tuple[Cluster, Fetcher]:
        if self._closed:
            raise IllegalStateError("this consumer is closed")
        if self._cluster is None or self._fetcher is None:
            raise IllegalStateError("the consumer is not started: await start() first")
        return self._cluster, self._fetcher

    def _group(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise IllegalStateError("this needs a group.id")
        return self._coordinator

    # --- subscribing ------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Subscribe to `topics` (a list) or to every topic matching `pattern` (a regular
        expression, matched whole), replacing any previous subscription. The group
        assigns partitions at the next poll(); `listener` hears of every change."""
        if self.config["group.id"] is None:
            raise IllegalStateError("subscribe() needs a group.id; use assign() without one")
        if isinstance(topics, re.Pattern):
            pattern, topics = topics, None
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern")
        if pattern is not None:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._subscriptions.subscribe_pattern(compiled, listener)
            self._pattern_checked = 0.0
        else:
            names = [topics] if isinstance(topics, str) else list(topics or ())
            bad = [t for t in names if not isinstance(t, str) or not t.strip()]
            if bad:
                raise ValueError(f"invalid topic name {bad[0]!r}")
            if not names:
                self._subscriptions.unsubscribe()
                return
            self._subscriptions.subscribe(names, listener)
        if self._fetcher is not None:
            self._fetcher.request_metadata()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions, without group management (replacing any
        earlier assignment). Positions start at the committed offset (with a group.id)
        or per auto.offset.reset, unless seek() says otherwise."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        self._subscriptions.assign_from_user(wanted)
        if self._fetcher is not None:
            self._fetcher.retain(wanted)
            self._fetcher.request_metadata()

    async def unsubscribe(self) -> None:
        """Drop the subscription or assignment; a group member leaves its group."""
        if self._coordinator is not None and self._subscriptions.auto_assigned:
            await self._coordinator.leave()
        self._subscriptions.unsubscribe()
        if self._fetcher is not None:
            self._fetcher.clear()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer holds now."""
        return set(self._subscriptions.assignment)

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern: those it matched so far)."""
        if self._subscriptions.type is SubscriptionType.USER_ASSIGNED:
            return set()
        return set(self._subscriptions.topics)

    # --- metadata ---------------------------------------------------------------------

    async def _refresh_metadata(self, extra: Iterable[str] = ()) -> None:
        """Metadata of the topics this consumer reads (and `extra` ones)."""
        cluster = self._cluster
        if cluster is None:
            return
        subs = self._subscriptions
        self._last_metadata = time.monotonic()
        if subs.type is SubscriptionType.AUTO_PATTERN:
            md = await cluster.refresh(None)
            assert subs.pattern is not None
            exclude = self.config["exclude.internal.topics"]
            subs.matched_topics(
                [
                    name
                    for name, info in md.topics.items()
                    if subs.pattern.fullmatch(name) and not (exclude and info.is_internal)
                ]
            )
            return
        topics = sorted(set(subs.topics) | {tp.topic for tp in subs.assignment} | set(extra))
        await cluster.refresh(
            topics,
            allow_auto_topic_creation=self.config["allow.auto.create.topics"]
            and subs.auto_assigned,
        )

    async def _metadata_for(self, topics: Iterable[str]) -> None:
        cluster, _ = self._started()
        md = cluster.metadata
        wanted = set(topics)
        if md is None or any(t not in md.topics for t in wanted):
            await self._refresh_metadata(wanted)

    async def topics(self) -> dict[str, set[int]]:
        """Every topic in the cluster (internal ones left out) and its partitions."""
        cluster, _ = self._started()
        md = await cluster.refresh(None)
        await self._refresh_metadata()
        return {
            name: set(info.partitions)
            for name, info in md.topics.items()
            if not info.is_internal and info.error_code == ErrorCode.NONE
        }

    async def partitions_for_topic(self, topic: str) -> set[int]:
        """The partition numbers of `topic` (KafkaError UNKNOWN_TOPIC_OR_PARTITION if it
        does not exist)."""
        cluster, _ = self._started()
        md = cluster.metadata
        if md is None or topic not in md.topics:
            md = await cluster.refresh([topic])
        return set(md.topic(topic).partitions)

    # --- polling ----------------------------------------------------------------------

    async def poll(
        self, timeout_ms: float = 1000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records fetched since the last poll, at most `max_records` (default
        max.poll.records); waits up to `timeout_ms` for the first. Runs the group's
        rebalances (and the listener) and auto-commits as Kafka's consumer does; a
        rebalance may take longer than `timeout_ms`."""
        _, fetcher = self._started()
        return await self._poll(timeout_ms, max_records, fetcher.drain)

    async def poll_columns(
        self, timeout_ms: float = 1000, max_records: int | None = None
    ) -> list[PartitionColumns]:
        """`poll()` for callers that handle records in bulk: the same records, as
        columns (a `PartitionColumns` per batch they come from, in the order `poll()`
        gives them), without a record object per record. Keys and values are bytes:
        IllegalStateError for a consumer with deserializers. `logbus mirror` reads this
        way."""
        _, fetcher = self._started()
        if self._key_deserializer is not None or self._value_deserializer is not None:
            raise IllegalStateError("poll_columns() hands out bytes: unset the deserializers")
        return await self._poll(timeout_ms, max_records, fetcher.drain_columns)

    async def _poll(
        self,
        timeout_ms: float,
        max_records: int | None,
        drain: Callable[[int], list[_Polled]],
    ) -> list[_Polled]:
        _, fetcher = self._started()
        subs = self._subscriptions
        if subs.type is SubscriptionType.NONE:
            raise IllegalStateError("the consumer is not subscribed and has no assignment")
        limit = max_records or self.config["max.poll.records"]
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            await self._maintain_metadata()
            if self._coordinator is not None:
                await self._coordinator.poll()
            await self._update_positions()
            fetcher.data_ready.clear()
            records = drain(limit)
            if records:
                # Yield to the event loop once per poll, as Kafka's consumer does its
                # network work in every poll: the fetches drain() just started go out,
                # and responses already in the sockets are read, before the application
                # gets back to work. Without it an application that always finds records
                # buffered never lets the loop run, and the fetches made ahead of it sit
                # unread in the kernel until the buffer runs dry.
                fetcher.fetches_started = False
                await asyncio.sleep(0)
                return records
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            await self._wait_for_data(fetcher, left)

    async def _wait_for_data(self, fetcher: Fetcher, seconds: float) -> None:
        waiters = [asyncio.ensure_future(fetcher.data_ready.wait())]
        if self._coordinator is not None and self._subscriptions.auto_assigned:
            waiters.append(asyncio.ensure_future(self._coordinator.member.rejoin_needed.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _maintain_metadata(self) -> None:
        subs = self._subscriptions
        now = time.monotonic()
        max_age = self.config["metadata.max.age.ms"] / 1000
        if subs.type is SubscriptionType.AUTO_PATTERN and (
            self._pattern_checked == 0.0 or now - self._last_metadata >= max_age
        ):
            self._pattern_checked = now
            await self._refresh_metadata()
        elif now - self._last_metadata >= max_age:
            await self._refresh_metadata()

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """The next record, polling as needed (for as long as it takes). Offsets are
        committed (auto-commit) only up to records the iteration has already given."""
        while not self._iter_buffer:
            if self._closed:
                raise StopAsyncIteration
            self._iter_buffer.extend(await self.poll(timeout_ms=1000))
        return self._iter_buffer.popleft()

    # --- positions --------------------------------------------------------------------

    async def _update_positions(self, only: Sequence[TopicPartition] | None = None) -> None:
        """Give every held partition without a position one: its committed offset (with
        a group), else auto.offset.reset."""
        subs = self._subscriptions
        missing = [tp for tp in subs.missing_positions() if only is None or tp in only]
        missing = [tp for tp in missing if subs.assignment[tp].error is None]
        if not missing:
            return
        _, fetcher = self._started()
        from_group = [tp for tp in missing if subs.assignment[tp].reset is None]
        if from_group and self._coordinator is not None:
            found = await self._coordinator.committed(from_group)
            for tp, om in found.items():
                if tp in subs.assignment and subs.assignment[tp].position is None:
                    subs.seek(tp, om.offset)
        resets: dict[TopicPartition, int] = {}
        no_policy: list[TopicPartition] = []
        for tp in missing:
            state = subs.assignment.get(tp)
            if state is None or state.position is not None:
                continue
            strategy = state.reset or subs.default_reset
            if strategy == "none":
                no_policy.append(tp)
            else:
                resets[tp] = EARLIEST if strategy == "earliest" else LATEST
        if no_policy:
            raise NoOffsetForPartitionError(no_policy)
        if resets:
            await self._metadata_for({tp.topic for tp in resets})
            epochs = {tp: subs.assignment[tp].epoch for tp in resets}
            found_offsets = await fetcher.list_offsets(resets, self._api_timeout)
            for tp, (offset, _) in found_offsets.items():
                state = subs.assignment.get(tp)
                if state is not None and state.position is None and state.epoch == epochs[tp]:
                    subs.seek(tp, offset)
        fetcher.wake()

    @property
    def _api_timeout(self) -> float:
        return float(self.config["default.api.timeout.ms"]) / 1000

    async def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record poll() returns for a held partition (looked up
        now if not yet known)."""
        tp = TopicPartition(*partition)
        state = self._subscriptions.state(tp)
        if state.position is None:
            await self._update_positions([tp])
        position = self._subscriptions.state(tp).position
        if position is None:
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, f"no position for {tp}")
        return position

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Read a held partition from `offset` on (the next poll() starts there)."""
        tp = TopicPartition(*partition)
        if offset < 0:
            raise ValueError(f"seek offset must not be negative, got {offset}")
        self._subscriptions.seek(tp, offset)
        if self._fetcher is not None:
            self._fetcher.clear([tp])

    def _reset(self, partitions: tuple[Any, ...], strategy: str) -> None:
        chosen = _partitions(partitions) if partitions else list(self._subscriptions.assignment)
        for tp in chosen:
            self._subscriptions.request_reset(tp, strategy)
        if self._fetcher is not None:
            self._fetcher.clear(chosen)

    def seek_to_beginning(self, *partitions: Any) -> None:
        """Read from the earliest offset (of the given partitions, or all held ones);
        looked up at the next poll() or position()."""
        self._reset(partitions, "earliest")

    def seek_to_end(self, *partitions: Any) -> None:
        """Read from the log end (of the given partitions, or all held ones)."""
        self._reset(partitions, "latest")

    def pause(self, *partitions: Any) -> None:
        """Stop returning (and fetching) records of these held partitions."""
        for tp in _partitions(partitions):
            self._subscriptions.state(tp).paused = True
        if self._fetcher is not None:
            self._fetcher.wake()  # buffered data it paused no longer holds fetches back

    def resume(self, *partitions: Any) -> None:
        """Undo pause()."""
        for tp in _partitions(partitions):
            self._subscriptions.state(tp).paused = False
        if self._fetcher is not None:
            self._fetcher.wake()
            self._fetcher.data_ready.set()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subscriptions.assignment.items() if s.paused}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is at least the one
        given (ms since the epoch), or None if no record is that recent."""
        _, fetcher = self._started()
        asked = {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        for tp, ts in asked.items():
            if ts < 0:
                raise ValueError(f"timestamp of {tp} must not be negative, got {ts}")
        await self._metadata_for({tp.topic for tp in asked})
        found = await fetcher.list_offsets(asked, self._api_timeout)
        return {
            tp: OffsetAndTimestamp(offset, timestamp) if offset >= 0 else None
            for tp, (offset, timestamp) in found.items()
        }

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The first offset of each partition."""
        return await self._list_offsets(partitions, EARLIEST)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offset (last stable offset with read_committed) of each partition."""
        return await self._list_offsets(partitions, LATEST)

    async def _list_offsets(
        self, partitions: Iterable[TopicPartition], which: int
    ) -> dict[TopicPartition, int]:
        _, fetcher = self._started()
        asked = {TopicPartition(*tp): which for tp in partitions}
        await self._metadata_for({tp.topic for tp in asked})
        found = await fetcher.list_offsets(asked, self._api_timeout)
        return {tp: offset for tp, (offset, _) in found.items()}

    # --- commits ----------------------------------------------------------------------

    def _offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return {
                tp: OffsetAndMetadata(o) for tp, o in self._subscriptions.consumed().items()
            }
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
            if om.offset < 0:
                raise ValueError(f"cannot commit a negative offset for {tp}: {om.offset}")
            out[TopicPartition(*tp)] = om
        return out

    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit `offsets` (each the next offset to read, or OffsetAndMetadata), or the
        positions of every held partition; waits for the coordinator's answer.
        CommitFailedError if the group rebalanced the partitions away."""
        self._started()
        await self._group().commit(self._offsets(offsets))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> asyncio.Task[None]:
        """Start a commit and return at once; `callback(offsets, error_or_None)` is
        called when it completes (the returned task completes too)."""
        self._started()
        return self._group().commit_in_background(self._offsets(offsets), callback)

    async def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None where there is none)."""
        self._started()
        asked = [TopicPartition(*tp) for tp in partitions]
        found = await self._group().committed(asked)
        return {tp: found.get(tp) for tp in asked}

    # --- metrics-ish ------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics by Kafka's names (`records-lag-max`, `fetch-rate`,
        ...): see docs/client.md. Safe from any thread."""
        return self._metrics.metrics.snapshot()

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The high watermark the last fetch of a held partition saw (None before one)."""
        hw = self._subscriptions.state(TopicPartition(*partition)).high_watermark
        return hw if hw >= 0 else None

    @property
    def member_id(self) -> str | None:
        """This member's id in its group (None when not a member)."""
        if self._coordinator is None or not self._coordinator.member.member_id:
            return None
        return self._coordinator.member.member_id

    @property
    def generation_id(self) -> int:
        """The group generation this member joined (-1 when not a member)."""
        return self._coordinator.member.generation_id if self._coordinator is not None else -1

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Who this consumer is in its group, for `send_offsets_to_transaction` (the group
        coordinator refuses offsets of a member no longer in the generation)."""
        group_id = self.config["group.id"]
        if group_id is None:
            raise IllegalStateError("group_metadata() needs a group.id")
        return ConsumerGroupMetadata(
            group_id, self.generation_id, self.member_id or "", self.config["group.instance.id"]
        )
