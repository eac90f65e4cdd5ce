"""One member of a classic consumer group: JoinGroup/SyncGroup/Heartbeat/LeaveGroup with
the "consumer" protocol type, static membership (KIP-345) and the assignors of
`logbus.client.consumer.assignors` (the leader runs the one the group chose).

The entry point is `GroupMember`: `join()` returns this member's partitions (the leader
computes everyone's), a background task heartbeats and raises `rejoin_needed` when the
coordinator starts a rebalance (or the member must leave because it was not polled within
`max.poll.interval.ms`), `commit()` commits offsets in the current generation and
`leave()` leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.coordinator_lookup import COORDINATOR_ERRORS, coordinator
from logbus.client.errors import KafkaConnectionError, KafkaError, check
from logbus.client.requests.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from logbus.client.requests.group_membership import (
    NOT_A_MEMBER,
    JoinedMember,
    JoinGroupRequest,
    MemberIdentity,
    heartbeat,
    join_group,
    leave_group,
    sync_group,
)
from logbus.client.requests.group_offsets import commit_offsets, fetch_offsets_with_metadata
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

if TYPE_CHECKING:
    from logbus.client.consumer.assignors import Assignor

DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 3000
_JOIN_ATTEMPTS = 50
_RETRY_BACKOFF = 0.1
# Errors after which the member must join again.
_REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)

Assignment = dict[str, list[int]]


class GroupMember:
    """A consumer's membership of one group: its member id and generation, a connection
    of its own to the coordinator (a JoinGroup may wait there for a whole rebalance), and
    the heartbeat task it owns while joined.

    Use from one task of one event loop: `join()`, then `commit()` as records are
    consumed, `join()` again whenever `rejoin_needed` is set, and `leave()` (or leaving
    `async with`) at the end, which also stops the heartbeat and closes the connection.
    Call `polled()` whenever the application asks for records: if it does not for
    `rebalance_timeout_ms` (the consumer's max.poll.interval.ms), the member leaves the
    group, as Kafka's consumer does, and `poll_timeout_expired` is set.
    """

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: Sequence[str],
        *,
        assignors: Sequence[Assignor] | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS,
        heartbeat_interval_ms: int | None = None,
        group_instance_id: str | None = None,
    ) -> None:
        if assignors is None:
            # Imported here: the consumer package imports this module.
            from logbus.client.consumer.assignors import RangeAssignor

            assignors = [RangeAssignor()]
        self.cluster = cluster
        self.group_id = group_id
        self.topics = list(topics)
        self.assignors = list(assignors)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = (
            heartbeat_interval_ms
            if heartbeat_interval_ms is not None
            # Kafka's consumer default: 3 s, and never more than a third of the session
            else min(DEFAULT_HEARTBEAT_INTERVAL_MS, session_timeout_ms // 3)
        )
        self.group_instance_id = group_instance_id
        # A read_committed consumer's offset fetches wait for offsets pending in open
        # transactions (KIP-447), for up to `stable_wait` seconds.
        self.require_stable = False
        self.stable_wait = 60.0
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.assignment: Assignment = {}
        self.rejoin_needed = asyncio.Event()
        self.poll_timeout_expired = False
        self._last_poll = time.monotonic()
        self._conn: Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None
        self._heartbeat_error: KafkaError | None = None

    async def __aenter__(self) -> GroupMember:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.leave()

    @property
    def identity(self) -> MemberIdentity:
        """This member as it names itself in SyncGroup, Heartbeat and OffsetCommit."""
        return MemberIdentity(self.member_id, self.generation_id, self.group_instance_id)

    @property
    def generation_valid(self) -> bool:
        """Whether this member still holds a generation (its partitions are its own)."""
        return bool(self.member_id) and self.generation_id >= 0

    def polled(self) -> None:
        """The application asked for records: restart the max.poll.interval.ms clock."""
        self._last_poll = time.monotonic()

    async def _coordinator(self) -> Connection:
        # Heartbeats and commits may both find the connection gone: one reconnects.
        async with self._connect_lock:
            if self._conn is None or self._conn.closed:
                shared = await coordinator(self.cluster, self.group_id)
                # Our own connection: JoinGroup blocks its connection for a whole rebalance.
                self._conn = await Connection.connect(
                    shared.host,
                    shared.port,
                    client_id=self.cluster.client_id,
                    connect_timeout=self.cluster.connect_timeout,
                    request_timeout=self.cluster.request_timeout,
                    security=self.cluster.security,
                )
            return self._conn

    async def _reset_coordinator(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _reset_generation(self, *, keep_member_id: bool = False) -> None:
        if not keep_member_id:
            self.member_id = ""
        self.generation_id = -1

    # --- joining ----------------------------------------------------------------------

    async def join(
        self, owned: Sequence[TopicPartition] = (), topics: Sequence[str] | None = None
    ) -> Assignment:
        """Join (or rejoin) the group subscribed to `topics` (default: as before), telling
        the leader which partitions this member owns now; return its new partitions."""
        await self._stop_heartbeat()
        if topics is not None:
            self.topics = list(topics)
        self.rejoin_needed.clear()
        self.poll_timeout_expired = False
        self.polled()
        for _ in range(_JOIN_ATTEMPTS):
            try:
                assignment = await self._join_once(owned)
            except KafkaError as exc:
                if exc.code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self._reset_generation()
                elif exc.code == ErrorCode.ILLEGAL_GENERATION:
                    self._reset_generation(keep_member_id=True)
                elif isinstance(exc, KafkaConnectionError) or exc.code in (
                    COORDINATOR_ERRORS
                ):
                    await self._reset_coordinator()
                elif exc.code != ErrorCode.REBALANCE_IN_PROGRESS:
                    raise
                await asyncio.sleep(_RETRY_BACKOFF)
                continue
            self.assignment = assignment
            self._heartbeat_error = None
            self.polled()
            self._heartbeat = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"logbus-heartbeat-{self.group_id}"
            )
            return assignment
        raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS, f"could not join group '{self.group_id}'")

    async def _join_once(self, owned: Sequence[TopicPartition]) -> Assignment:
        conn = await self._coordinator()
        protocols = [
            (
                assignor.name,
                encode_subscription(
                    self.topics,
                    user_data=assignor.subscription_user_data(self.topics),
                    owned_partitions=owned,
                    generation_id=self.generation_id,
                ),
            )
            for assignor in self.assignors
        ]

        request = JoinGroupRequest(
            self.group_id,
            self.member_id,
            protocols,
            self.session_timeout_ms,
            self.rebalance_timeout_ms,
            self.group_instance_id,
        )
        joined = await join_group(conn, request)
        if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            # KIP-394: join again with the id the coordinator chose.
            self.member_id = joined.member_id
            joined = await join_group(conn, replace(request, member_id=self.member_id))
        check(joined.error_code, f"JoinGroup for group '{self.group_id}'")
        self.member_id = joined.member_id
        self.generation_id = joined.generation_id
        protocol = joined.protocol_name or self.assignors[0].name
        assignor = self._assignor(protocol)
        self.protocol_name = protocol
        assignments: dict[str, bytes] = {}
        if joined.leader == self.member_id:
            assignments = await self._assign(assignor, joined.members)
        synced = await sync_group(
            conn,
            self.group_id,
            self.identity,
            assignments,
            protocol,
            response_timeout=conn.request_timeout + self.rebalance_timeout_ms / 1000,
        )
        assignment = decode_assignment(synced)
        assignor.on_assignment(
            [TopicPartition(t, p) for t, ps in assignment.items() for p in ps],
            self.generation_id,
        )
        return assignment

    def _assignor(self, name: str) -> Assignor:
        for assignor in self.assignors:
            if assignor.name == name:
                return assignor
        raise KafkaError(
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
            f"group '{self.group_id}' chose assignor {name!r}, which this member lacks",
        )

    async def _assign(
        self, assignor: Assignor, members: list[JoinedMember]
    ) -> dict[str, bytes]:
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        instance_ids = {m.member_id: m.group_instance_id for m in members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        md = await self.cluster.refresh(topics)
        counts = {
            t: len(md.topics[t].partitions)
            for t in topics
            if t in md.topics and md.topics[t].error_code == ErrorCode.NONE
        }
        plan = assignor.assign(counts, subscriptions, instance_ids)
        return {member: encode_assignment(plan.get(member, {})) for member in subscriptions}

    # --- heartbeats -------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if (time.monotonic() - self._last_poll) * 1000 > self.rebalance_timeout_ms:
                # Kafka's consumer leaves when the application stops polling, so the
                # group can hand its partitions to someone who will read them.
                self.poll_timeout_expired = True
                await self._send_leave("consumer poll timeout has expired")
                self._reset_generation(keep_member_id=self.group_instance_id is not None)
                self.rejoin_needed.set()
                return
            try:
                conn = await self._coordinator()
                code = await heartbeat(conn, self.group_id, self.identity)
            except KafkaError as exc:
                if not (exc.retriable or exc.code in COORDINATOR_ERRORS):
                    self._heartbeat_error = exc
                    self.rejoin_needed.set()
                    return
                await self._reset_coordinator()  # find the coordinator again
                continue
            if code == ErrorCode.NONE:
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                # Keep the session alive until the application rejoins.
                self.rejoin_needed.set()
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self._reset_generation()
                self.rejoin_needed.set()
                return
            if code == ErrorCode.ILLEGAL_GENERATION:
                self._reset_generation(keep_member_id=True)
                self.rejoin_needed.set()
                return
            if code in COORDINATOR_ERRORS:
                await self._reset_coordinator()
                continue
            self._heartbeat_error = KafkaError(code, f"Heartbeat for group '{self.group_id}'")
            self.rejoin_needed.set()
            return

    def raise_heartbeat_error(self) -> None:
        """Raise the error that stopped the heartbeat, if one that rejoining cannot mend."""
        if self._heartbeat_error is not None:
            raise self._heartbeat_error

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- offsets ----------------------------------------------------------------------

    async def committed(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """The group's committed offsets of `partitions` (those that have one)."""
        found = await self.committed_with_metadata(partitions)
        return {tp: offset for tp, (offset, _) in found.items()}

    async def committed_with_metadata(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[TopicPartition, tuple[int, str]]:
        """Committed (offset, metadata) of `partitions` (those that have one); with
        `require_stable`, asked again while a transaction holds some pending."""
        deadline = time.monotonic() + self.stable_wait
        attempts = 0
        while attempts < _JOIN_ATTEMPTS:
            try:
                asked = [TopicPartition(*tp) for tp in partitions]
                return await fetch_offsets_with_metadata(
                    await self._coordinator(),
                    self.group_id,
                    asked,
                    require_stable=self.require_stable,
                )
            except KafkaError as exc:
                if exc.code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    if time.monotonic() + _RETRY_BACKOFF > deadline:
                        raise
                    await asyncio.sleep(_RETRY_BACKOFF)
                    continue
                if exc.code not in COORDINATOR_ERRORS and not isinstance(
                    exc, KafkaConnectionError
                ):
                    raise
                attempts += 1
                await self._reset_coordinator()
                await asyncio.sleep(_RETRY_BACKOFF)
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group '{self.group_id}'")

    async def commit(
        self, offsets: Mapping[tuple[str, int], int | tuple[int, str]], *, as_member: bool = True
    ) -> None:
        """Commit offsets (each an offset or (offset, metadata)) as this member of the
        current generation, or, with `as_member=False`, outside any generation (as a
        consumer with assigned partitions does)."""
        if not offsets:
            return
        try:
            await commit_offsets(
                await self._coordinator(),
                self.group_id,
                {TopicPartition(*tp): offset for tp, offset in offsets.items()},
                self.identity if as_member else NOT_A_MEMBER,
            )
        except KafkaError as exc:
            if isinstance(exc, KafkaConnectionError) or exc.code in COORDINATOR_ERRORS:
                await self._reset_coordinator()  # find it again next time
            raise

    # --- leaving ----------------------------------------------------------------------

    async def _send_leave(self, reason: str) -> None:
        # Static members do not leave: their instance id keeps their partitions for the
        # session timeout, across a restart (KIP-345).
        if self.group_instance_id is not None or not self.member_id:
            return
        if self._conn is None or self._conn.closed:
            return
        with contextlib.suppress(KafkaError):
            await leave_group(self._conn, self.group_id, self.member_id, reason)

    async def leave(self) -> None:
        """Stop heartbeating, leave the group (if joined) and close the connection."""
        await self._stop_heartbeat()
        try:
            await self._send_leave("the consumer is closing")
        finally:
            self._reset_generation()
            await self._reset_coordinator()
