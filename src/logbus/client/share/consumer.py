"""The asyncio share consumer: `logbus.aio.ShareConsumer` (KIP-932; Kafka's
KafkaShareConsumer)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from logbus.client.cluster import Cluster
from logbus.client.consumer.consumer import make_deserializer
from logbus.client.consumer.records import IllegalStateError
from logbus.client.lifecycle import AsyncService
from logbus.client.share.acknowledgements import AcknowledgementTracker
from logbus.client.share.config import EXPLICIT, SHARE_CONSUMER_CONFIG
from logbus.client.share.member import ShareGroupMember
from logbus.client.share.records import AcknowledgeType, ShareConsumerRecord
from logbus.client.share.share_fetcher import AckCallback, AckResults, FetchSettings, ShareFetcher
from logbus.client.types import TopicPartition
from logbus.common.config_def import ConfigError

log = logging.getLogger(__name__)


class ShareConsumer(AsyncService):
    """An asyncio consumer of a share group (KIP-932: a topic read as a queue).

        consumer = ShareConsumer({"bootstrap.servers": "host:9092", "group.id": "jobs"})
        async with consumer:
            consumer.subscribe(["tasks"])
            async for record in consumer:
                ...   # implicit mode: accepted by the next poll

    The members of a share group may read the same partitions: each record is acquired
    by one member at a time, for the broker's `group.share.record.lock.duration.ms`, and
    acknowledged: accepted, released (delivered again, to any member) or rejected. In
    implicit mode (`share.acknowledgement.mode`, the default) every poll, `commit_sync()`,
    `commit_async()` and `close()` accepts the records the previous poll returned; in
    explicit mode the application acknowledges each record with `acknowledge()` before
    the next poll. Acknowledgements ride on the next poll's ShareFetch, or go at once
    with `commit_sync()`/`commit_async()`; their outcome reaches the callback set with
    `set_acknowledgement_commit_callback()`, called within poll and commit calls.

    `start()` (or `async with`) connects; the first poll joins the group; `close()`
    sends the last acknowledgements, closes the share sessions (the broker releases what
    was not acknowledged), leaves the group and closes every connection. Use from one
    task at a time on one event loop (`logbus.ShareConsumer` is the blocking wrapper).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = SHARE_CONSUMER_CONFIG.parse(config, **kwargs)
        if not self.config["group.id"]:
            raise ConfigError("a share consumer needs a group.id")
        self._explicit = self.config["share.acknowledgement.mode"] == EXPLICIT
        self._tracker = AcknowledgementTracker()
        self._cluster: Cluster | None = None
        self._member: ShareGroupMember | None = None
        self._fetcher: ShareFetcher | None = None
        self._callback: AckCallback | None = None
        self._commits: set[asyncio.Task[AckResults]] = set()
        self._iter_buffer: deque[ShareConsumerRecord] = deque()
        self._topics: list[str] = []  # the subscription (kept here until start())
        self._closed = False
        self._closing = False

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (KafkaConnectionError if no bootstrap server answers)."""
        if self._cluster is not None:
            return
        if self._closed:
            raise IllegalStateError("this share consumer is closed")
        cfg = self.config
        cluster = await Cluster.from_config(cfg)
        self._cluster = cluster
        member = self._member = ShareGroupMember(cluster, cfg["group.id"])
        if self._topics:
            member.subscribe(self._topics)
        settings = FetchSettings(
            group_id=cfg["group.id"],
            max_records=cfg["max.poll.records"],
            max_bytes=cfg["fetch.max.bytes"],
            check_crcs=cfg["check.crcs"],
            key_deserializer=make_deserializer(cfg["key.deserializer"]),
            value_deserializer=make_deserializer(cfg["value.deserializer"]),
        )
        self._fetcher = ShareFetcher(cluster, settings, lambda: member.member_id, self._tracker)

    async def close(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Acknowledge (implicit mode: accept the last poll's records), close the share
        sessions, leave the group and close every connection. Safe to call twice.
        `timeout` (seconds; None: no limit) bounds the acknowledging and leaving: past it
        the connections are closed anyway (the broker releases the records when their
        locks expire, and drops the member when its session times out)."""
        if self._closed or self._closing:
            return
        self._closing = True
        try:
            if self._member is not None and self._fetcher is not None:
                if not self._explicit:
                    self._tracker.accept_rest()
                try:
                    await asyncio.wait_for(self._leave(self._member, self._fetcher), timeout)
                except TimeoutError:
                    log.warning("share consumer close: acknowledgements and leaving the "
                                "group did not finish in %.3g s", timeout)
                self._fire_callbacks()
        finally:
            self._closed = True
            for task in self._commits:
                task.cancel()
            if self._cluster is not None:
                await self._cluster.close()

    async def _leave(self, member: ShareGroupMember, fetcher: ShareFetcher) -> None:
        if self._commits:
            await asyncio.wait(self._commits)
        await fetcher.acknowledge(closing=True)
        await member.leave()

    def _started(self) -> tuple[ShareGroupMember, ShareFetcher]:
        if self._closed:
            raise IllegalStateError("this share consumer is closed")
        if self._member is None or self._fetcher is None:
            raise IllegalStateError("the share consumer is not started: await start() first")
        return self._member, self._fetcher

    # --- subscribing ------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Subscribe to `topics` (replacing any previous subscription); the group's
        coordinator hears of it at once (a member that has joined), or at the first
        poll."""
        names = [topics] if isinstance(topics, str) else list(topics)
        bad = [t for t in names if not isinstance(t, str) or not t.strip()]
        if bad:
            raise ValueError(f"invalid topic name {bad[0]!r}")
        if not names:
            raise ValueError("subscribe() needs at least one topic; use unsubscribe()")
        if self._closed:
            raise IllegalStateError("this share consumer is closed")
        self._topics = names
        if self._member is not None:
            self._member.subscribe(names)

    async def unsubscribe(self) -> None:
        """Acknowledge (implicit mode: accept the last poll's records), close the share
        sessions and leave the group; subscribe() again to rejoin."""
        member, fetcher = self._started()
        if not self._explicit:
            self._tracker.accept_rest()
        self._iter_buffer.clear()
        await fetcher.acknowledge(closing=True)
        self._tracker.forget_unacknowledged()
        await member.leave()
        member.topics = self._topics = []
        self._fire_callbacks()

    def subscription(self) -> set[str]:
        """The subscribed topics."""
        return set(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group's coordinator gave this member (perhaps shared)."""
        return set(self._member.assignment) if self._member is not None else set()

    # --- polling ----------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1000) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to `timeout_ms` for the first.
        Implicit mode: first accepts the previous poll's records. Explicit mode:
        IllegalStateError while a record of the previous poll is not acknowledged."""
        member, fetcher = self._started()
        if not member.topics:
            raise IllegalStateError("the share consumer is not subscribed")
        if self._explicit and self._tracker.unacknowledged():
            raise IllegalStateError(
                f"{self._tracker.unacknowledged()} records of the last poll are not "
                "acknowledged: with share.acknowledgement.mode=explicit every record must "
                "be acknowledged before the next poll"
            )
        self._tracker.accept_rest()  # explicit mode: nothing is left
        member.start()
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        try:
            return await self._poll_until(member, fetcher, deadline)
        finally:
            self._fire_callbacks()

    async def _poll_until(
        self, member: ShareGroupMember, fetcher: ShareFetcher, deadline: float
    ) -> list[ShareConsumerRecord]:
        backoff = self.config["retry.backoff.ms"] / 1000
        while True:
            member.check()
            if fetcher.member_unknown:
                fetcher.member_unknown = False
                member.rejoin()
            left = deadline - time.monotonic()
            assignment = member.assignment
            if not assignment and not self._tracker.nodes():
                if left <= 0:
                    return []
                member.assignment_changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(member.assignment_changed.wait(), left)
                continue
            wait_ms = int(min(self.config["fetch.max.wait.ms"], max(left, 0) * 1000))
            records = await fetcher.fetch(assignment, member.topics, wait_ms)
            left = deadline - time.monotonic()
            if records or left <= 0:
                return records
            if fetcher.troubled:
                await asyncio.sleep(min(backoff, left))

    def __aiter__(self) -> AsyncIterator[ShareConsumerRecord]:
        return self

    async def __anext__(self) -> ShareConsumerRecord:
        """The next record, polling as needed (for as long as it takes)."""
        while not self._iter_buffer:
            if self._closed:
                raise StopAsyncIteration
            self._iter_buffer.extend(await self.poll(1000))
        return self._iter_buffer.popleft()

    # --- acknowledging ----------------------------------------------------------------

    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge one record of the last poll (explicit mode only): ACCEPT, RELEASE
        or REJECT. Sent with the next poll or commit. IllegalStateError for a record not
        returned by the last poll, or acknowledged already."""
        if not self._explicit:
            raise IllegalStateError(
                "acknowledge() needs share.acknowledgement.mode=explicit (in implicit mode "
                "each poll accepts the records of the previous one)"
            )
        self._tracker.acknowledge(record, AcknowledgeType(type))

    async def commit_sync(self, timeout_ms: float | None = None) -> AckResults:
        """Send the acknowledgements waiting (implicit mode: accepting the last poll's
        records) and wait for the brokers' answers, at most `timeout_ms` (default
        default.api.timeout.ms): each partition's outcome, None where all were applied
        (else the KafkaError, e.g. INVALID_RECORD_STATE when a lock had expired)."""
        _, fetcher = self._started()
        if not self._explicit:
            self._tracker.accept_rest()
        limit = self.config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        try:
            return await asyncio.wait_for(fetcher.acknowledge(), limit / 1000)
        finally:
            self._fire_callbacks()

    def commit_async(self) -> asyncio.Task[AckResults]:
        """Start sending the acknowledgements waiting and return at once; the outcome
        reaches the acknowledgement commit callback in a later poll or commit (the
        returned task completes with it too)."""
        _, fetcher = self._started()
        if not self._explicit:
            self._tracker.accept_rest()
        task = asyncio.get_running_loop().create_task(fetcher.acknowledge())
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        return task

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """`callback(offsets, error)` hears the outcome of acknowledgements: `offsets`
        maps a partition to the offsets acknowledged, `error` is None or the KafkaError
        the broker answered for them. Called within poll(), commit_sync() and close()."""
        self._callback = callback

    def _fire_callbacks(self) -> None:
        if self._fetcher is None:
            return
        completed, self._fetcher.completed = self._fetcher.completed, []
        if self._callback is None:
            return
        for offsets, error in completed:
            self._callback(offsets, error)

    # --- about this member ------------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        """This member's id in its share group (None before start)."""
        return self._member.member_id if self._member is not None else None

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long the brokers lock a record acquired for this member (from the last
        ShareFetch answer; None before one)."""
        return self._fetcher.acquisition_lock_timeout_ms if self._fetcher is not None else None

