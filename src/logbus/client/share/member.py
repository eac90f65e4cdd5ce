"""One member of a share group (KIP-932): ShareGroupHeartbeat to the group's coordinator,
which assigns partitions (a partition may be shared by several members).

The entry point is `ShareGroupMember`: `subscribe()` sets the topics, `start()` starts the
background heartbeat task (the first heartbeat joins with epoch 0), `assignment` is the
partitions the coordinator last gave (`assignment_changed` is set whenever it changes),
`leave()` leaves with epoch -1. The member id is chosen here (KIP-1082) and kept when the
member is fenced and rejoins; the heartbeat interval is the coordinator's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from uuid import UUID

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.coordinator_lookup import COORDINATOR_ERRORS, coordinator
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.requests.share_groups import share_group_heartbeat
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
_RETRY_BACKOFF = 0.1
_FENCED = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})


class ShareGroupMember:
    """A share consumer's membership of its group: member id and epoch, the subscribed
    topics, the assignment, and the heartbeat task it owns while started.

    Use from one event loop. A heartbeat error that joining again cannot cure (an
    authorization failure, a full group, a malformed subscription) stops the task and is
    raised by `check()`, which the consumer calls in every poll.
    """

    def __init__(self, cluster: Cluster, group_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.topics: list[str] = []
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.assignment_changed = asyncio.Event()
        self.heartbeat_interval_ms = DEFAULT_HEARTBEAT_INTERVAL_MS
        self._subscription_changed = True
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: KafkaError | None = None
        self._conn: Connection | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def subscribe(self, topics: Sequence[str]) -> None:
        """Subscribe to `topics`; the next heartbeat (sent at once) tells the coordinator."""
        self.topics = sorted(set(topics))
        self._subscription_changed = True
        self._wake.set()

    def start(self) -> None:
        """Start heartbeating (joining first) unless already started."""
        if self._task is None:
            self._error = None
            self._task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"logbus-share-heartbeat-{self.group_id}"
            )

    def check(self) -> None:
        """Raise the error that stopped the heartbeats, if one did."""
        if self._error is not None:
            raise self._error

    def rejoin(self) -> None:
        """A broker no longer knows this member (UNKNOWN_MEMBER_ID on a share fetch): send
        the next heartbeat now."""
        self._wake.set()

    async def leave(self) -> None:
        """Stop heartbeating and leave the group (epoch -1); the assignment is dropped."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.member_epoch > 0:
            with contextlib.suppress(KafkaError):
                conn = await self._coordinator()
                await share_group_heartbeat(
                    conn, self.group_id, self.member_id, LEAVE_EPOCH, None
                )
        self.member_epoch = 0
        self._subscription_changed = True
        self._set_assignment(frozenset())

    # --- heartbeats -------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                delay = await self._beat()
            except KafkaError as exc:
                if not (isinstance(exc, KafkaConnectionError) or exc.retriable
                        or exc.code in COORDINATOR_ERRORS):
                    self._error = exc
                    self.assignment_changed.set()  # wakes a poll waiting for partitions
                    return
                self._conn = None
                delay = _RETRY_BACKOFF
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _beat(self) -> float:
        """One heartbeat; the seconds until the next one."""
        full = self.member_epoch == 0 or self._subscription_changed
        self._subscription_changed = False
        try:
            answer = await share_group_heartbeat(
                await self._coordinator(), self.group_id, self.member_id, self.member_epoch,
                self.topics if full else None,
            )
        except BaseException:
            self._subscription_changed |= full
            raise
        code = answer["error_code"]
        if code == ErrorCode.NONE:
            await self._joined(answer)
            return self.heartbeat_interval_ms / 1000
        self._subscription_changed |= full
        if code in _FENCED:
            log.info("share group %s: member %s %s; joining again", self.group_id,
                     self.member_id, ErrorCode(code).name)
            self.member_epoch = 0
            self._set_assignment(frozenset())
            return 0.0
        raise KafkaError(code, answer["error_message"] or f"ShareGroupHeartbeat of "
                         f"'{self.group_id}'")

    async def _joined(self, answer: ShareGroupHeartbeatResponse) -> None:
        self.member_epoch = answer["member_epoch"]
        if answer["heartbeat_interval_ms"] > 0:
            self.heartbeat_interval_ms = answer["heartbeat_interval_ms"]
        assignment = answer["assignment"]
        if assignment is not None:
            by_id = {t["topic_id"]: t["partitions"] for t in assignment["topic_partitions"]}
            self._set_assignment(await self._named(by_id))

    async def _named(self, by_id: dict[UUID, list[int]]) -> frozenset[TopicPartition]:
        md = self.cluster.metadata
        names = {} if md is None else {t.topic_id: name for name, t in md.topics.items()}
        if any(topic_id not in names for topic_id in by_id):
            md = await self.cluster.refresh(self.topics)
            names = {t.topic_id: name for name, t in md.topics.items()}
        return frozenset(
            TopicPartition(names[topic_id], p)
            for topic_id, partitions in by_id.items()
            if topic_id in names
            for p in partitions
        )

    def _set_assignment(self, assignment: frozenset[TopicPartition]) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            self.assignment_changed.set()

    async def _coordinator(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = await coordinator(self.cluster, self.group_id)
        return self._conn
