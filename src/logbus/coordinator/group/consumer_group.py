"""KIP-848 consumer groups: the group and member model the coordinator keeps beside the
classic groups (Kafka's `ConsumerGroup` and `ConsumerGroupMember`).

Theory of operation
-------------------
A consumer group has three epochs. The *group epoch* grows whenever something the
assignment depends on changes (a member joins, leaves or changes its subscription; a
subscribed topic gains partitions). The *assignment epoch* is the group epoch the current
*target assignment* (member id -> partitions, computed by a server-side assignor) was
computed for. Each member has a *member epoch*: the target epoch it has reconciled to.

A member moves to a new target one step at a time (`reconciliation.py`): first it keeps
the partitions it may keep and revokes the others (state UNREVOKED_PARTITIONS, still at its
old epoch); once its heartbeat shows they are gone it takes the new epoch and those of its
new partitions nobody else still owns (UNRELEASED_PARTITIONS while some are still held);
then it is STABLE. So a partition is never owned by two members at once: ownership is the
union of each member's `assigned` and `pending_revocation` partitions.

The group's state as DescribeGroups / ListGroups show it follows from the epochs:
Empty (no member), Assigning (group epoch ahead of the assignment epoch), Reconciling (some
member not STABLE at the assignment epoch), Stable.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

Assignment = dict[UUID, frozenset[int]]
"""Partitions by topic id (what the heartbeat and the records carry)."""

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the coordinator needs to know of a topic: its id and partition count."""

    name: str
    topic_id: UUID
    partitions: int


TopicsImage = Mapping[str, TopicInfo]
"""The cluster's topics by name, as the request found them (non-internal topics only)."""


class MemberState(enum.IntEnum):
    """Kafka's `MemberState`, with its record codes."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ConsumerMember:
    """One member of a consumer group: its subscription and its current assignment.

    `member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH` marks a static member that left
    temporarily: it keeps its assignment until its session expires or its instance rejoins.
    """

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    describable_regex_topics: frozenset[str] | None = None
    """The topics its regular expression matched, among those its principal could DESCRIBE
    at its last heartbeat (None: no authorizer, every match counts). Kept in memory only:
    after a reload the member's next heartbeat sets it again."""
    uses_classic_protocol: bool = False
    """A member of a classic group upgraded to this one, or a classic member joining it
    (JoinGroup / SyncGroup / Heartbeat, `migration.py`)."""
    classic_session_timeout_ms: int = 0
    classic_protocols: tuple[tuple[str, bytes], ...] = ()

    def owned(self) -> Iterable[tuple[UUID, int]]:
        for source in (self.assigned, self.pending_revocation):
            for topic_id, partitions in source.items():
                for p in partitions:
                    yield topic_id, p


@dataclass(slots=True)
class ConsumerGroup:
    """A KIP-848 consumer group. Owned by the `GroupsState` of its `__consumer_offsets`
    partition; its committed offsets stay in the classic `Group` of the same id."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """instance id -> member id."""
    subscription_image: tuple[tuple[str, int], ...] = ()
    """(topic, partitions) of the subscribed topics when the group epoch was last bumped:
    a change (new partitions, a topic created or deleted) bumps it again."""
    resolved_regex: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each subscribed regular expression -> the topics it matched at the last bump."""
    topic_names: dict[UUID, str] = field(default_factory=dict)
    """Names of the topic ids the group was assigned, for classic members' assignments."""

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        iid = member.instance_id if member is not None else None
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        return member

    def owners(self) -> dict[tuple[UUID, int], str]:
        """Which member owns each partition (assigned or still being revoked)."""
        owners: dict[tuple[UUID, int], str] = {}
        for member in self.members.values():
            for tp in member.owned():
                owners[tp] = member.member_id
        return owners

    def subscribed_topics(self, topics: TopicsImage) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(member_topics(member, self.resolved_regex, topics))
        return names


def member_topics(
    member: ConsumerMember, resolved_regex: Mapping[str, tuple[str, ...]], topics: TopicsImage
) -> set[str]:
    """The existing topics a member subscribes to, by name or by its regular expression
    (of these, only those its principal may describe)."""
    names = {t for t in member.subscribed_topic_names if t in topics}
    if member.subscribed_topic_regex is not None:
        matched = resolved_regex.get(member.subscribed_topic_regex, ())
        allowed = member.describable_regex_topics
        names.update(t for t in matched if t in topics and (allowed is None or t in allowed))
    return names


def as_assignment(pairs: Iterable[tuple[UUID, int]]) -> Assignment:
    grouped: dict[UUID, set[int]] = {}
    for topic_id, p in pairs:
        grouped.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in grouped.items()}


def pairs_of(assignment: Assignment) -> set[tuple[UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}
