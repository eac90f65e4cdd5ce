"""Classic consumer-group states, their allowed transitions, and the group model.

Theory of operation
-------------------
A group moves through five states (Kafka's `GroupState`, design.html "consumer groups"):

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join with new metadata, leave, session timeout--> Preparing...
    PreparingRebalance --last member gone--> Empty
    any --DeleteGroups, expired offsets of an empty group--> Dead

`TRANSITIONS` below is the only place that says which moves are legal; `transition()`
refuses any other (a bug here, never a client's fault). The per-state answers to
Heartbeat, SyncGroup and OffsetCommit from members of the current generation are tables
too. The handlers (`membership.py`, `rebalance.py`, `offsets.py`) take an event,
mutate the `Group`s of one `__consumer_offsets` partition in place, and return a
`Result`: records to append to the partition, responses keyed by the request token
the runtime passed in, and timer changes. They never read a clock (every event
carries `now_ms`) and never do I/O, so a test drives them with values only.
`shard.apply` dispatches an event to its handler.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logbus.coordinator.group import records
from logbus.coordinator.group.consumer_group import ConsumerGroup
from logbus.protocol import ErrorCode
from logbus.protocol.messages.consumer_group_describe_response import (
    DescribedGroup as DescribedConsumerGroup,
)
from logbus.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from logbus.protocol.messages.delete_groups_response import DeletableGroupResult
from logbus.protocol.messages.describe_groups_response import DescribedGroup
from logbus.protocol.messages.heartbeat_response import HeartbeatResponse
from logbus.protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from logbus.protocol.messages.leave_group_response import LeaveGroupResponse
from logbus.protocol.messages.list_groups_response import ListGroupsResponse
from logbus.protocol.messages.offset_commit_response import OffsetCommitResponse
from logbus.protocol.messages.offset_delete_response import OffsetDeleteResponse
from logbus.protocol.messages.offset_fetch_response import OffsetFetchResponseGroup
from logbus.protocol.messages.sync_group_response import SyncGroupResponse

if TYPE_CHECKING:
    from logbus.coordinator.group.events import TimerEvent

Token = object
"""Opaque handle of a request awaiting its response (the runtime's choice)."""
ResponseBody = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponseGroup
    | OffsetDeleteResponse
    | DescribedGroup
    | ListGroupsResponse
    | DeletableGroupResult
    | ConsumerGroupHeartbeatResponse
    | DescribedConsumerGroup
)
"""What `apply` answers a request event with: its response (or, for DescribeGroups,
OffsetFetch and DeleteGroups, its group's entry), as the generated message types."""
TimerKey = tuple[str, ...]
Offsets = dict[tuple[str, int], records.OffsetCommit]

CONSUMER_PROTOCOL_TYPE = "consumer"
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
"""How long a new member may wait in a rebalance before it is dropped (Kafka's value)."""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    # target state: the states it may be entered from (Kafka's validPreviousStates)
    EMPTY: frozenset({PREPARING}),
    PREPARING: frozenset({STABLE, COMPLETING, EMPTY}),
    COMPLETING: frozenset({PREPARING}),
    STABLE: frozenset({COMPLETING}),
    DEAD: frozenset({STABLE, PREPARING, COMPLETING, EMPTY, DEAD}),
}

CAN_REBALANCE = frozenset({STABLE, COMPLETING, EMPTY})
"""States in which a membership change starts a rebalance (PreparingRebalance)."""

HEARTBEAT_ERROR: dict[GroupState, ErrorCode] = {
    # A member of the current generation heartbeating in each state.
    EMPTY: ErrorCode.UNKNOWN_MEMBER_ID,
    PREPARING: ErrorCode.REBALANCE_IN_PROGRESS,
    COMPLETING: ErrorCode.NONE,
    STABLE: ErrorCode.NONE,
}

SYNC_ERROR: dict[GroupState, ErrorCode] = {
    # A member of the current generation sending SyncGroup in each state; NONE means
    # "accepted": wait for the leader's assignment (Completing) or answer now (Stable).
    EMPTY: ErrorCode.UNKNOWN_MEMBER_ID,
    PREPARING: ErrorCode.REBALANCE_IN_PROGRESS,
    COMPLETING: ErrorCode.NONE,
    STABLE: ErrorCode.NONE,
}

COMMIT_ERROR: dict[GroupState, ErrorCode] = {
    # A validated offset commit in each state. Commits stay allowed while preparing a
    # rebalance: the heartbeat tells the member about the rebalance.
    EMPTY: ErrorCode.NONE,
    PREPARING: ErrorCode.NONE,
    COMPLETING: ErrorCode.REBALANCE_IN_PROGRESS,
    STABLE: ErrorCode.NONE,
}


class IllegalTransition(RuntimeError):
    """The coordinator tried a state change `TRANSITIONS` forbids (a logbus bug)."""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker settings the group coordinator reads (Kafka's names, in the defaults)."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    # KIP-848 consumer groups
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy


@dataclass(slots=True)
class Member:
    """One member of a classic group, owned by its `Group`.

    `awaiting_join` / `awaiting_sync` hold the token of a JoinGroup / SyncGroup request
    parked until the rebalance reaches the next step (None: not waiting).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: Token | None = None
    awaiting_sync: Token | None = None
    is_new: bool = False
    session_deadline_ms: int = 0

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


@dataclass(slots=True)
class Group:
    """A classic group: its members, rebalance bookkeeping and committed offsets.

    Owned by the `GroupsState` of one `__consumer_offsets` partition; not thread-safe.
    `members` keeps join order (leader re-election picks the oldest member).
    """

    group_id: str
    state: GroupState = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)
    """KIP-394: member ids handed out with MEMBER_ID_REQUIRED -> expiry deadline (ms)."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    subscribed_topics: frozenset[str] | None = None
    """Topics the members subscribe to; None when unknown (not the consumer protocol)."""
    join_deadline_ms: int = 0
    in_initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False
    offsets: Offsets = field(default_factory=dict)
    pending_txn_offsets: dict[int, Offsets] = field(default_factory=dict)
    """TxnOffsetCommits written but not ended yet, per producer id: materialised into
    `offsets` by the transaction's COMMIT marker, dropped by its ABORT (KIP-98)."""

    # --- state -------------------------------------------------------------------------

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in TRANSITIONS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.current_state_timestamp = now_ms

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    # --- membership ----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        if self.is_(EMPTY):
            return protocol_type != "" and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        candidates = self.candidate_protocols()
        return any(p in candidates for p in protocols)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-choice votes.

        Each member votes for its most preferred candidate; ties go to the candidate the
        leader (or the oldest member) prefers, so the choice is deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol common to all members")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        preference = {name: i for i, name in enumerate(first.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -preference.get(name, len(preference))))

    def current_member_metadata(self) -> list[JoinGroupResponseMember]:
        """The JoinGroup response's member list, sent to the leader."""
        assert self.protocol_name is not None
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(self.protocol_name),
            }
            for m in self.members.values()
        ]

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # --- records ---------------------------------------------------------------------------

    def metadata_record(self) -> records.GroupMetadata:
        protocol = self.protocol_name
        return records.GroupMetadata(
            group=self.group_id,
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=(
                -1 if self.current_state_timestamp is None else self.current_state_timestamp
            ),
            members=tuple(
                records.MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol is not None else b"",
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )


@dataclass(slots=True)
class GroupsState:
    """Every group whose coordinator is one `__consumer_offsets` partition."""

    groups: dict[str, Group] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    """KIP-848 groups; their committed offsets stay in `groups` (an offsets-only Group)."""


@dataclass(frozen=True, slots=True)
class Schedule:
    """Arm (or re-arm, replacing any timer with the same key) a timer that feeds `event`
    back to `apply` at `deadline_ms` (with the event's `now_ms` set to the firing time)."""

    key: TimerKey
    deadline_ms: int
    event: TimerEvent


@dataclass(frozen=True, slots=True)
class Cancel:
    key: TimerKey


TimerChange = Schedule | Cancel


@dataclass(slots=True)
class Result:
    """What one event produced. The runtime appends `records` to the group's
    `__consumer_offsets` partition and, once they are committed, sends `responses`;
    it applies `timers` right away."""

    records: list[records.KeyValue] = field(default_factory=list)
    responses: list[tuple[Token, ResponseBody]] = field(default_factory=list)
    timers: list[TimerChange] = field(default_factory=list)
    producer_id: int = -1
    """A TxnOffsetCommit's producer: its records are written as one transactional batch
    of this producer id and `producer_epoch`."""
    producer_epoch: int = -1

    def respond(self, token: Token, response: ResponseBody) -> None:
        self.responses.append((token, response))

    def extend(self, other: Result) -> None:
        self.records.extend(other.records)
        self.responses.extend(other.responses)
        self.timers.extend(other.timers)


def session_timer_key(group_id: str, member_id: str) -> TimerKey:
    return ("session", group_id, member_id)


def join_timer_key(group_id: str) -> TimerKey:
    return ("join", group_id)
