"""One member of a KIP-848 consumer group (`group.protocol=consumer`): the coordinator
assigns partitions; the member heartbeats with ConsumerGroupHeartbeat, saying what it owns,
and takes its assignment from the answers.

The entry point is `ConsumerProtocolMember`, a `GroupMember` with the same surface for the
consumer's coordinator: `join(owned)` sends a heartbeat saying what the member owns now (a
first one joins with epoch 0) and returns the partitions the coordinator means it to have;
a background task heartbeats every interval the coordinator gives and raises
`rejoin_needed` when an answer changes the assignment, so the consumer revokes what it
lost (cooperatively) and tells the coordinator with its next `join`. Commits carry the
member epoch (OffsetCommit v9).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from logbus.client.coordinator_lookup import COORDINATOR_ERRORS
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.group_member import Assignment, GroupMember
from logbus.client.requests.consumer_group import (
    HeartbeatAnswer,
    build_consumer_group_heartbeat,
    consumer_group_heartbeat,
)
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

if TYPE_CHECKING:
    from logbus.client.cluster import Cluster

_ATTEMPTS = 50
_RETRY_BACKOFF = 0.1
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerProtocolMember(GroupMember):
    """A consumer's membership of a KIP-848 group. `generation_id` is the member epoch
    (what OffsetCommit carries); the member id is chosen here (KIP-1082) and kept across
    rejoins. Use as a `GroupMember`: from one task of one event loop."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        *,
        rebalance_timeout_ms: int,
        group_instance_id: str | None = None,
        server_assignor: str | None = None,
        rack_id: str | None = None,
    ) -> None:
        super().__init__(
            cluster,
            group_id,
            [],
            assignors=[],
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=5000,
            group_instance_id=group_instance_id,
        )
        self.server_assignor = server_assignor
        self.rack_id = rack_id or None
        self.member_id = _new_member_id()
        self._target: Assignment | None = None
        """The assignment of the last answer that changed it, not taken by `join` yet."""
        self._owned: Assignment = {}

    @property
    def generation_valid(self) -> bool:
        return self.generation_id > 0

    def _reset_generation(self, *, keep_member_id: bool = False) -> None:
        # The member id stays (KIP-1082): a fenced member rejoins with epoch 0.
        self.generation_id = -1

    # --- joining ----------------------------------------------------------------------

    async def join(
        self, owned: Sequence[TopicPartition] = (), topics: Sequence[str] | None = None
    ) -> Assignment:
        """Tell the coordinator what this member owns now (joining with epoch 0 when it has
        no epoch) and return the partitions it is to have."""
        await self._stop_heartbeat()
        changed_topics = topics is not None and sorted(topics) != sorted(self.topics)
        if topics is not None:
            self.topics = list(topics)
        self.rejoin_needed.clear()
        self.poll_timeout_expired = False
        self.polled()
        self._owned = _by_topic(owned)
        for _ in range(_ATTEMPTS):
            try:
                answer = await self._beat(full=changed_topics or self.generation_id <= 0)
            except KafkaError as exc:
                if isinstance(exc, KafkaConnectionError) or exc.code in COORDINATOR_ERRORS:
                    await self._reset_coordinator()
                    await asyncio.sleep(_RETRY_BACKOFF)
                    continue
                raise
            if answer.error_code in _FENCED:
                self._reset_generation()
                self._owned = {}
                continue
            if answer.error_code != ErrorCode.NONE:
                raise KafkaError(answer.error_code, f"ConsumerGroupHeartbeat of '{self.group_id}'")
            break
        else:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group '{self.group_id}'")
        target, self._target = self._target, None
        assignment = target if target is not None else dict(self._owned)
        self.assignment = assignment
        self._owned = dict(assignment)
        self._heartbeat_error = None
        self._heartbeat = asyncio.get_running_loop().create_task(
            self._heartbeat_loop(), name=f"logbus-heartbeat-{self.group_id}"
        )
        return assignment

    async def _beat(self, *, full: bool = False) -> HeartbeatAnswer:
        """One heartbeat saying what the member owns; remembers the epoch and any new
        assignment."""
        joining = self.generation_id <= 0
        owned = await self._ids(self._owned)
        body = build_consumer_group_heartbeat(
            self.group_id,
            self.member_id,
            0 if joining else self.generation_id,
            instance_id=self.group_instance_id,
            rack_id=self.rack_id if full or joining else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full or joining else -1,
            topics=self.topics if full or joining else None,
            server_assignor=self.server_assignor if full or joining else None,
            owned={} if joining else owned,
        )
        answer = await consumer_group_heartbeat(await self._coordinator(), body)
        if answer.error_code == ErrorCode.NONE:
            self.generation_id = answer.member_epoch
            if answer.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = answer.heartbeat_interval_ms
            if answer.assignment is not None:
                named = await self._names(answer.assignment)
                if named != self._owned:
                    self._target = named
        return answer

    async def _ids(self, assignment: Assignment) -> dict[UUID, list[int]]:
        md = self.cluster.metadata
        if md is None or any(t not in md.topics for t in assignment):
            md = await self.cluster.refresh(list(assignment))
        return {md.topics[t].topic_id: ps for t, ps in assignment.items() if t in md.topics}

    async def _names(self, assignment: dict[UUID, list[int]]) -> Assignment:
        md = self.cluster.metadata
        known = {} if md is None else {t.topic_id: name for name, t in md.topics.items()}
        if any(t not in known for t in assignment):
            md = await self.cluster.refresh(self.topics)
            known = {t.topic_id: name for name, t in md.topics.items()}
        return {known[t]: sorted(ps) for t, ps in assignment.items() if t in known and ps}

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if (time.monotonic() - self._last_poll) * 1000 > self.rebalance_timeout_ms:
                self.poll_timeout_expired = True
                await self._send_leave("consumer poll timeout has expired")
                self._reset_generation()
                self.rejoin_needed.set()
                return
            try:
                answer = await self._beat()
            except KafkaError as exc:
                if not (exc.retriable or exc.code in COORDINATOR_ERRORS):
                    self._heartbeat_error = exc
                    self.rejoin_needed.set()
                    return
                await self._reset_coordinator()
                continue
            if answer.error_code in _FENCED:
                self._reset_generation()  # its partitions are lost: rejoin with epoch 0
                self.rejoin_needed.set()
                return
            if answer.error_code in COORDINATOR_ERRORS:
                await self._reset_coordinator()
                continue
            if answer.error_code != ErrorCode.NONE:
                self._heartbeat_error = KafkaError(
                    answer.error_code, f"ConsumerGroupHeartbeat of '{self.group_id}'"
                )
                self.rejoin_needed.set()
                return
            if self._target is not None:
                self.rejoin_needed.set()  # the consumer revokes / adds, then joins

    # --- leaving ----------------------------------------------------------------------

    async def _send_leave(self, reason: str) -> None:
        if self.generation_id <= 0 or self._conn is None or self._conn.closed:
            return
        epoch = LEAVE_EPOCH if self.group_instance_id is None else STATIC_LEAVE_EPOCH
        body = build_consumer_group_heartbeat(
            self.group_id, self.member_id, epoch, instance_id=self.group_instance_id
        )
        with contextlib.suppress(KafkaError):
            await consumer_group_heartbeat(self._conn, body)


def _by_topic(partitions: Sequence[TopicPartition]) -> Assignment:
    out: Assignment = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return {t: sorted(ps) for t, ps in out.items()}


def _new_member_id() -> str:
    return str(uuid.uuid4())
