"""One member of a classic consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, the
"consumer" protocol with Kafka's RangeAssignor), as `logbus consume --group` needs it.

The entry point is `GroupMember`: `join()` returns this member's partitions (the leader
computes everyone's), a background task heartbeats and raises `rejoin_needed` when the
coordinator starts a rebalance, `commit()` commits offsets in the current generation and
`leave()` leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from types import TracebackType

from logbus.client import group_ops
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaConnectionError, KafkaError, check
from logbus.protocol import ApiKey, ErrorCode

PROTOCOL_TYPE = "consumer"
RANGE = "range"
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_REBALANCE_TIMEOUT_MS = 60_000
_JOIN_ATTEMPTS = 20
_RETRY_BACKOFF = 0.1
# Errors after which the member must join again (with a new member id for the last two).
_REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)

Assignment = dict[str, list[int]]

DEFAULT_HEARTBEAT_INTERVAL_MS = 3000


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partition_counts: Mapping[str, int]
) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: for each topic, its subscribers sorted by member id each get a
    contiguous range of partitions, the first `count % subscribers` one more than the rest."""
    assignment: dict[str, Assignment] = {member: {} for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        count = partition_counts.get(topic, 0)
        per_member, extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            if length:
                assignment[member][topic] = list(range(start, start + length))
    return assignment


class GroupMember:
    """A consumer's membership of one group: its member id and generation, a connection
    of its own to the coordinator (a JoinGroup may wait there for a whole rebalance), and
    the heartbeat task it owns while joined.

    Use from one task of one event loop: `join()`, then `commit()` as records are
    consumed, `join()` again whenever `rejoin_needed` is set, and `leave()` (or leaving
    `async with`) at the end, which also stops the heartbeat and closes the connection.
    """

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: Sequence[str],
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS,
        heartbeat_interval_ms: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topics = list(topics)
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = (
            heartbeat_interval_ms
            if heartbeat_interval_ms is not None
            # Kafka's consumer default: 3 s, and never more than a third of the session
            else min(DEFAULT_HEARTBEAT_INTERVAL_MS, session_timeout_ms // 3)
        )
        self.member_id = ""
        self.generation_id = -1
        self.assignment: Assignment = {}
        self.rejoin_needed = asyncio.Event()
        self._conn: Connection | None = None
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

    async def _coordinator(self) -> Connection:
        if self._conn is None or self._conn.closed:
            shared = await group_ops.coordinator(self.cluster, self.group_id)
            # A connection of our own: JoinGroup blocks its connection for a whole rebalance.
            self._conn = await Connection.connect(
                shared.host,
                shared.port,
                client_id=self.cluster.client_id,
                connect_timeout=self.cluster.connect_timeout,
                request_timeout=self.cluster.request_timeout,
            )
        return self._conn

    async def _reset_coordinator(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # --- joining ----------------------------------------------------------------------

    async def join(self) -> Assignment:
        """Join (or rejoin) the group and return the partitions assigned to this member."""
        await self._stop_heartbeat()
        self.rejoin_needed.clear()
        for _ in range(_JOIN_ATTEMPTS):
            try:
                assignment = await self._join_once()
            except KafkaError as exc:
                if exc.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self.member_id, self.generation_id = "", -1
                elif isinstance(exc, KafkaConnectionError) or exc.code in (
                    group_ops.COORDINATOR_ERRORS
                ):
                    await self._reset_coordinator()
                elif exc.code != ErrorCode.REBALANCE_IN_PROGRESS:
                    raise
                await asyncio.sleep(_RETRY_BACKOFF)
                continue
            self.assignment = assignment
            self._heartbeat_error = None
            self._heartbeat = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"logbus-heartbeat-{self.group_id}"
            )
            return assignment
        raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS, f"could not join group '{self.group_id}'")

    async def _join_once(self) -> Assignment:
        conn = await self._coordinator()
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": RANGE, "metadata": group_ops.encode_subscription(self.topics)}],
            "reason": None,
        }
        wait = conn.request_timeout + self.rebalance_timeout_ms / 1000
        joined = await conn.request(ApiKey.JOIN_GROUP, body, response_timeout=wait)
        if joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            # KIP-394: join again with the id the coordinator chose.
            self.member_id = joined["member_id"]
            joined = await conn.request(
                ApiKey.JOIN_GROUP, {**body, "member_id": self.member_id}, response_timeout=wait
            )
        check(joined["error_code"], f"JoinGroup for group '{self.group_id}'")
        self.member_id = joined["member_id"]
        self.generation_id = joined["generation_id"]
        assignments: list[dict[str, object]] = []
        if joined["leader"] == self.member_id:
            assignments = await self._assign(joined["members"])
        synced = await conn.request(
            ApiKey.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": PROTOCOL_TYPE,
                "protocol_name": RANGE,
                "assignments": assignments,
            },
            response_timeout=wait,
        )
        check(synced["error_code"], f"SyncGroup for group '{self.group_id}'")
        return group_ops.decode_assignment(synced["assignment"])

    async def _assign(self, members: list[dict[str, object]]) -> list[dict[str, object]]:
        subscriptions = {
            str(m["member_id"]): group_ops.decode_subscription(m["metadata"])  # type: ignore[arg-type]
            for m in members
        }
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        md = await self.cluster.refresh(topics)
        counts = {
            t: len(md.topics[t].partitions)
            for t in topics
            if t in md.topics and md.topics[t].error_code == ErrorCode.NONE
        }
        plan = range_assign(subscriptions, counts)
        return [
            {"member_id": member, "assignment": group_ops.encode_assignment(assigned)}
            for member, assigned in plan.items()
        ]

    # --- heartbeats -------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            try:
                conn = await self._coordinator()
                response = await conn.request(
                    ApiKey.HEARTBEAT,
                    {
                        "group_id": self.group_id,
                        "generation_id": self.generation_id,
                        "member_id": self.member_id,
                        "group_instance_id": None,
                    },
                )
            except KafkaConnectionError:
                await self._reset_coordinator()
                continue
            code = response["error_code"]
            if code == ErrorCode.NONE:
                continue
            if code in _REJOIN_ERRORS:
                self.rejoin_needed.set()
                return
            if code in group_ops.COORDINATOR_ERRORS:
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

    async def committed(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The group's committed offsets of `partitions` (those that have one)."""
        for _ in range(_JOIN_ATTEMPTS):
            try:
                return await group_ops.fetch_offsets(
                    await self._coordinator(), self.group_id, partitions
                )
            except KafkaError as exc:
                if exc.code not in group_ops.COORDINATOR_ERRORS and not isinstance(
                    exc, KafkaConnectionError
                ):
                    raise
                await self._reset_coordinator()
                await asyncio.sleep(_RETRY_BACKOFF)
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group '{self.group_id}'")

    async def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit offsets as this member of the current generation."""
        if not offsets:
            return
        try:
            await group_ops.commit_offsets(
                await self._coordinator(),
                self.group_id,
                offsets,
                generation_id=self.generation_id,
                member_id=self.member_id,
            )
        except KafkaError as exc:
            if isinstance(exc, KafkaConnectionError) or exc.code in group_ops.COORDINATOR_ERRORS:
                await self._reset_coordinator()  # find it again next time
            raise

    # --- leaving ----------------------------------------------------------------------

    async def leave(self) -> None:
        """Stop heartbeating, leave the group (if joined) and close the connection."""
        await self._stop_heartbeat()
        try:
            if self.member_id and self._conn is not None and not self._conn.closed:
                with contextlib.suppress(KafkaError):
                    await self._conn.request(
                        ApiKey.LEAVE_GROUP,
                        {
                            "group_id": self.group_id,
                            "member_id": self.member_id,
                            "members": [
                                {
                                    "member_id": self.member_id,
                                    "group_instance_id": None,
                                    "reason": "the consumer is closing",
                                }
                            ],
                        },
                    )
        finally:
            self.member_id, self.generation_id = "", -1
            await self._reset_coordinator()
