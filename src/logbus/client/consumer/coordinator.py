"""A subscribed consumer's side of its group (Kafka's ConsumerCoordinator): rebalances run
inside `poll()` with the rebalance listener around them (eager: everything revoked
first; cooperative, KIP-429: only what moves, then a second join), committed offsets,
and auto-commit.

The entry point is `ConsumerCoordinator`, made by the consumer when `group.id` is set.
Membership itself (JoinGroup, SyncGroup, heartbeats, static membership) is
`logbus.client.group_member.GroupMember`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from logbus.client.cluster import Cluster
from logbus.client.consumer.assignors import (
    RebalanceProtocol,
    make_assignors,
    rebalance_protocol,
)
from logbus.client.consumer.fetcher import Fetcher
from logbus.client.consumer.records import (
    CommitFailedError,
    ConsumerRebalanceListener,
    OffsetAndMetadata,
)
from logbus.client.consumer.subscription_state import SubscriptionState
from logbus.client.consumer_group_member import ConsumerProtocolMember
from logbus.client.coordinator_lookup import COORDINATOR_ERRORS
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.group_member import GroupMember
from logbus.client.metrics import ConsumerMetrics
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

# A commit refused because the group moved on without this member's generation.
STALE_MEMBER_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)


async def call_listener(
    listener: ConsumerRebalanceListener | None,
    hook: str,
    partitions: Sequence[TopicPartition],
) -> BaseException | None:
    """Call one listener hook (awaiting it if it is a coroutine); return what it raised,
    so the rebalance can finish before the error reaches the application."""
    if listener is None:
        return None
    method: Callable[[Sequence[TopicPartition]], Any] = getattr(listener, hook)
    try:
        result = method(sorted(partitions))
        if isinstance(result, Awaitable):
            await result
    except Exception as exc:
        log.error("rebalance listener %s failed: %r", hook, exc)
        return exc
    return None


class ConsumerCoordinator:
    """Group membership, listener calls and commits for one consumer. Used from the
    consumer's event loop; `poll()` is called by every consumer poll."""

    def __init__(
        self,
        cluster: Cluster,
        subscriptions: SubscriptionState,
        fetcher: Fetcher,
        config: Mapping[str, Any],
    ) -> None:
        self.cluster = cluster
        self.subscriptions = subscriptions
        self.fetcher = fetcher
        self.group_id: str = config["group.id"]
        self.member: GroupMember
        if config["group.protocol"] == "consumer":
            # KIP-848: the coordinator assigns, and hands partitions over incrementally.
            self.protocol = RebalanceProtocol.COOPERATIVE
            self.member = ConsumerProtocolMember(
                cluster,
                self.group_id,
                rebalance_timeout_ms=config["max.poll.interval.ms"],
                group_instance_id=config["group.instance.id"],
                server_assignor=config["group.remote.assignor"],
                rack_id=config["client.rack"],
            )
        else:
            assignors = make_assignors(config["partition.assignment.strategy"])
            self.protocol = rebalance_protocol(assignors)
            self.member = GroupMember(
                cluster,
                self.group_id,
                [],
                assignors=assignors,
                session_timeout_ms=config["session.timeout.ms"],
                rebalance_timeout_ms=config["max.poll.interval.ms"],
                heartbeat_interval_ms=config["heartbeat.interval.ms"],
                group_instance_id=config["group.instance.id"],
            )
        # KIP-447: a read_committed consumer starts from committed offsets only once no
        # open transaction holds offsets of its partitions pending.
        self.member.require_stable = config["isolation.level"] == "read_committed"
        self.member.stable_wait = config["default.api.timeout.ms"] / 1000
        self.auto_commit: bool = config["enable.auto.commit"]
        self.auto_commit_interval = config["auto.commit.interval.ms"] / 1000
        self.retry_backoff = config["retry.backoff.ms"] / 1000
        self.api_timeout = config["default.api.timeout.ms"] / 1000
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self._joined_version = -1
        self._commits: set[asyncio.Task[None]] = set()
        self.metrics: ConsumerMetrics | None = None  # commit latency recorded here

    # --- rebalancing ------------------------------------------------------------------

    @property
    def rejoin_needed(self) -> bool:
        subs = self.subscriptions
        return subs.auto_assigned and (
            not self.member.generation_valid
            or self.member.rejoin_needed.is_set()
            or subs.version != self._joined_version
        )

    async def poll(self) -> None:
        """What every consumer poll does first: note the poll, rejoin if the group or
        the subscription needs it, and auto-commit when it is due."""
        self.member.polled()
        if self.subscriptions.auto_assigned:
            self.member.raise_heartbeat_error()
            while self.rejoin_needed:
                await self._rebalance()
        self.maybe_auto_commit()

    async def _rebalance(self) -> None:
        subs = self.subscriptions
        listener = subs.listener
        owned = list(subs.assignment)
        errors: list[BaseException | None] = []
        if owned and not self.member.generation_valid:
            # Dropped from the group: the partitions are already someone else's.
            self._drop(owned)
            errors.append(await call_listener(listener, "on_partitions_lost", owned))
            owned = []
        elif owned and self.protocol is RebalanceProtocol.EAGER:
            if self.auto_commit:
                await self._commit_before_revoke()
            self._drop(owned)
            errors.append(await call_listener(listener, "on_partitions_revoked", owned))
            owned = []
        elif owned:
            gone = [tp for tp in owned if tp.topic not in subs.topics]
            if gone:
                if self.auto_commit:
                    await self._commit_before_revoke()
                self._drop(gone)
                errors.append(await call_listener(listener, "on_partitions_revoked", gone))
                owned = [tp for tp in owned if tp not in gone]
        version = subs.version
        assignment = await self.member.join(owned, topics=subs.topics)
        self._joined_version = version
        new = [TopicPartition(t, p) for t, ps in sorted(assignment.items()) for p in ps]
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = [tp for tp in owned if tp not in new]
            added = [tp for tp in new if tp not in owned]
            if revoked:
                if self.auto_commit:
                    await self._commit_before_revoke(revoked)
                self._drop(revoked)
                errors.append(await call_listener(listener, "on_partitions_revoked", revoked))
                # Give the revoked partitions back, so the next generation can hand them on.
                self.member.rejoin_needed.set()
        else:
            added = new
        subs.assign_from_group(new)
        self.fetcher.wake()
        log.info("group %s generation %d: assigned %s", self.group_id,
                 self.member.generation_id, new)
        errors.append(await call_listener(listener, "on_partitions_assigned", added))
        for error in errors:
            if error is not None:
                raise error

    def _drop(self, partitions: Sequence[TopicPartition]) -> None:
        subs = self.subscriptions
        subs.assign_from_group([tp for tp in subs.assignment if tp not in set(partitions)])
        self.fetcher.clear(partitions)

    async def _commit_before_revoke(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> None:
        consumed = self.subscriptions.consumed()
        if partitions is not None:
            consumed = {tp: o for tp, o in consumed.items() if tp in set(partitions)}
        try:
            await self.commit({tp: OffsetAndMetadata(o) for tp, o in consumed.items()})
        except KafkaError as exc:
            log.warning("auto-commit before the rebalance failed: %s", exc)

    async def on_close(self) -> None:
        """Commit (with auto-commit), tell the listener, leave the group."""
        subs = self.subscriptions
        try:
            in_group = not subs.auto_assigned or self.member.generation_valid
            if self.auto_commit and subs.assignment and in_group:
                await self._commit_before_revoke()
            if subs.auto_assigned and subs.assignment:
                owned = list(subs.assignment)
                hook = (
                    "on_partitions_revoked"
                    if self.member.generation_valid
                    else "on_partitions_lost"
                )
                error = await call_listener(subs.listener, hook, owned)
                if error is not None:
                    log.warning("rebalance listener failed on close: %r", error)
        finally:
            await self.wait_for_commits()
            await self.member.leave()

    async def leave(self) -> None:
        """Leave the group after unsubscribe() (the listener hears of the revocation)."""
        owned = list(self.subscriptions.assignment)
        if owned:
            if self.auto_commit:
                await self._commit_before_revoke()
            self._drop(owned)
        await self.member.leave()
        self._joined_version = -1

    # --- offsets ----------------------------------------------------------------------

    async def committed(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        found = await self.member.committed_with_metadata(partitions)
        return {
            TopicPartition(*tp): OffsetAndMetadata(offset, metadata)
            for tp, (offset, metadata) in found.items()
        }

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit `offsets`, retrying while the coordinator moves or loads; raises
        CommitFailedError when the group has rebalanced the partitions away."""
        if not offsets:
            return
        as_member = self.subscriptions.auto_assigned
        if as_member and not self.member.generation_valid:
            # Kafka's rule: a subscribed member out of the group commits nothing, since
            # its partitions may be someone else's by now.
            raise CommitFailedError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                "commit cannot be completed: this member is not in the group (it left, "
                "or was dropped); poll() again to rejoin",
            )
        payload: dict[tuple[str, int], int | tuple[int, str]] = {
            tp: (om.offset, om.metadata) for tp, om in offsets.items()
        }
        deadline = time.monotonic() + self.api_timeout
        while True:
            try:
                started = time.monotonic()
                await self.member.commit(payload, as_member=as_member)
                if self.metrics is not None:
                    self.metrics.commit_latency.record((time.monotonic() - started) * 1000)
                return
            except KafkaError as exc:
                if exc.code in STALE_MEMBER_ERRORS:
                    if exc.code != ErrorCode.REBALANCE_IN_PROGRESS:
                        self.member.rejoin_needed.set()
                    raise CommitFailedError(
                        exc.code,
                        "commit cannot be completed: the group has rebalanced and the "
                        "partitions may be someone else's; poll() again to rejoin "
                        f"({exc.name})",
                    ) from exc
                retriable = (
                    isinstance(exc, KafkaConnectionError)
                    or exc.code in COORDINATOR_ERRORS
                    or exc.retriable
                )
                if not retriable or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(self.retry_backoff)

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], Any]
        | None = None,
    ) -> asyncio.Task[None]:
        """Start a commit; `callback(offsets, error)` is called when it ends."""

        async def run() -> None:
            error: Exception | None = None
            try:
                await self.commit(offsets)
            except Exception as exc:
                error = exc
                if callback is None:
                    log.warning("offset commit failed: %s", exc)
            if callback is not None:
                result = callback(offsets, error)
                if isinstance(result, Awaitable):
                    await result

        task = asyncio.get_running_loop().create_task(run(), name="logbus-commit")
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        return task

    def maybe_auto_commit(self) -> None:
        if not self.auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        consumed = self.subscriptions.consumed()
        if consumed and (not self.subscriptions.auto_assigned or self.member.generation_valid):
            self.commit_in_background({tp: OffsetAndMetadata(o) for tp, o in consumed.items()})

    async def wait_for_commits(self) -> None:
        if self._commits:
            await asyncio.gather(*list(self._commits), return_exceptions=True)
