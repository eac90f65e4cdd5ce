"""Share-group membership (KIP-932): members heartbeat with their epoch, the coordinator
assigns partitions with the simple assignor. The entry point is `ShareGroup.heartbeat`.

Theory of operation. A member joins with epoch 0 and gets a member id (the one it sent, or a
new one) and the group's epoch; it leaves with epoch -1. Any change of membership or
subscription bumps the group epoch and recomputes the target assignment, which every member
takes at once: share groups need no revocation step, since a partition may be read by any
number of members at the same time. A heartbeat with an epoch the member does not hold is
FENCED_MEMBER_EPOCH (its previous epoch is tolerated: the answer that bumped it may have
been lost); an unknown member id is UNKNOWN_MEMBER_ID. A member whose heartbeats stop for
`session_timeout_ms` is removed.

The simple assignor: with no more members than partitions, each partition goes to one
member, round robin; with more members than partitions, member i reads partition
i mod #partitions, so that every partition is read and every member reads one.

Values in, values out; the caller supplies `now_ms` and the topics' partition counts.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from logbus.protocol import ErrorCode

Assignment = dict[str, tuple[int, ...]]
"""Topic name -> partitions assigned."""


class ShareGroupError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    previous_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    last_heartbeat_ms: int
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    """One share group's members and their assignment. Owned by the share-group
    coordinator of the broker that coordinates the group."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(
        self,
        *,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topics: list[str] | None,
        client_id: str,
        client_host: str,
        now_ms: int,
        max_size: int,
        partitions: Callable[[str], int],
    ) -> ShareMember | None:
        """One ShareGroupHeartbeat; returns the member (None once it left)."""
        if member_epoch == -1:
            self._require(member_id)
            self.remove(member_id, partitions)
            return None
        if member_epoch == 0:
            return self._join(
                member_id, rack_id, subscribed_topics, client_id, client_host, now_ms, max_size,
                partitions,
            )
        member = self._require(member_id)
        if member_epoch not in (member.member_epoch, member.previous_epoch):
            raise ShareGroupError(ErrorCode.FENCED_MEMBER_EPOCH)
        member.last_heartbeat_ms = now_ms
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed_topics is not None and tuple(sorted(subscribed_topics)) != (
            member.subscribed_topics
        ):
            member.subscribed_topics = tuple(sorted(subscribed_topics))
            self._rebalance(partitions)
        return member

    def _require(self, member_id: str) -> ShareMember:
        member = self.members.get(member_id)
        if member is None:
            raise ShareGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _join(
        self,
        member_id: str,
        rack_id: str | None,
        subscribed_topics: list[str] | None,
        client_id: str,
        client_host: str,
        now_ms: int,
        max_size: int,
        partitions: Callable[[str], int],
    ) -> ShareMember:
        if not subscribed_topics:
            raise ShareGroupError(
                ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set when joining"
            )
        existing = self.members.get(member_id) if member_id else None
        if existing is None and len(self.members) >= max_size:
            raise ShareGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = member_id or new_member_id()
        self.members[member_id] = ShareMember(
            member_id, 0, 0, client_id, client_host, rack_id,
            tuple(sorted(subscribed_topics)), now_ms,
        )
        self._rebalance(partitions)
        return self.members[member_id]

    def remove(self, member_id: str, partitions: Callable[[str], int]) -> None:
        if self.members.pop(member_id, None) is not None:
            self._rebalance(partitions)

    def expire(
        self, now_ms: int, session_timeout_ms: int, partitions: Callable[[str], int]
    ) -> list[str]:
        """Remove the members whose session timed out; returns their ids."""
        gone = [
            m.member_id for m in self.members.values()
            if now_ms - m.last_heartbeat_ms > session_timeout_ms
        ]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self._rebalance(partitions)
        return gone

    def refresh(self, partitions: Callable[[str], int]) -> None:
        """Recompute the assignment if a subscribed topic's partition count changed."""
        target = simple_assignment(self.members, partitions)
        if any(m.assignment != target.get(m.member_id, {}) for m in self.members.values()):
            self._rebalance(partitions)

    def _rebalance(self, partitions: Callable[[str], int]) -> None:
        self.group_epoch += 1
        target = simple_assignment(self.members, partitions)
        for member in self.members.values():
            member.assignment = target.get(member.member_id, {})
            if member.member_epoch != self.group_epoch:
                member.previous_epoch = member.member_epoch
                member.member_epoch = self.group_epoch
        self.assignment_epoch = self.group_epoch


def new_member_id() -> str:
    """A member id as Kafka's clients and coordinator make them (a base64 UUID)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def simple_assignment(
    members: Mapping[str, ShareMember], partitions: Callable[[str], int]
) -> dict[str, Assignment]:
    """Kafka's simple share-group assignor, topic by topic over the members subscribed."""
    result: dict[str, Assignment] = {member_id: {} for member_id in members}
    topics = sorted({t for m in members.values() for t in m.subscribed_topics})
    for topic in topics:
        count = partitions(topic)
        subscribers = sorted(m.member_id for m in members.values() if topic in m.subscribed_topics)
        if count <= 0 or not subscribers:
            continue
        owned: dict[str, list[int]] = {member_id: [] for member_id in subscribers}
        if len(subscribers) <= count:
            for partition in range(count):
                owned[subscribers[partition % len(subscribers)]].append(partition)
        else:
            for i, member_id in enumerate(subscribers):
                owned[member_id].append(i % count)
        for member_id, assigned in owned.items():
            result[member_id][topic] = tuple(assigned)
    return result
