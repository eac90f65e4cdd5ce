"""Events fed to the group coordinator's `apply`: decoded requests and fired timers.

Request events carry the request's fields (snake_case names of the JSON message specs),
the `token` under which `apply` returns their response, and `now_ms` from the runtime's
clock. Timer events are created by `apply` itself (in `Schedule`) and handed back by the
runtime when the timer fires, with `now_ms` set to the firing time.

A request event derives from `Answered[R]`, R being the generated type of its response, so
that the runtime's `submit` returns the type its handler builds on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, Self, TypeVar
from uuid import UUID

from logbus.coordinator.group.consumer_group import Assignment, TopicsImage
from logbus.coordinator.group.state import Token
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
from logbus.protocol.messages.join_group_response import JoinGroupResponse
from logbus.protocol.messages.leave_group_response import LeaveGroupResponse
from logbus.protocol.messages.list_groups_response import ListGroupsResponse
from logbus.protocol.messages.offset_commit_response import OffsetCommitResponse
from logbus.protocol.messages.offset_delete_response import OffsetDeleteResponse
from logbus.protocol.messages.offset_fetch_response import OffsetFetchResponseGroup
from logbus.protocol.messages.sync_group_response import SyncGroupResponse
from logbus.protocol.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from logbus.types import TopicPartition

R = TypeVar("R", covariant=True)


class Answered(Generic[R]):
    """A request event answered with an `R` (a type only: no field, no behaviour)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class JoinGroup(Answered[JoinGroupResponse]):
    token: Token
    now_ms: int
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # v0 has none: the session timeout is used
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9
    new_member_uuid: str = ""
    """Random part of a new member id (`<client id or instance id>-<uuid>`), drawn by the
    runtime so that `apply` stays deterministic."""
    reason: str | None = None
    topics: TopicsImage | None = None
    """The cluster's topics, for a classic member joining a consumer group."""


@dataclass(frozen=True, slots=True)
class SyncGroup(Answered[SyncGroupResponse]):
    token: Token
    now_ms: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Heartbeat(Answered[HeartbeatResponse]):
    token: Token
    now_ms: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroup(Answered[LeaveGroupResponse]):
    """LeaveGroup; v0-v2 carry one member (`batched=False`: the error is top level)."""

    token: Token
    now_ms: int
    group_id: str
    members: tuple[LeavingMember, ...]
    batched: bool = True


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # only OffsetCommit v1 sends one


@dataclass(frozen=True, slots=True)
class OffsetCommit(Answered[OffsetCommitResponse]):
    """OffsetCommit. `partition_errors` is the runtime's hook: partitions it rejected
    before `apply` (UNKNOWN_TOPIC_OR_PARTITION, authorization) with their error; they are
    answered with it and not committed."""

    token: Token
    now_ms: int
    group_id: str
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4 only
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit(Answered[TxnOffsetCommitResponse]):
    """TxnOffsetCommit: offsets written in a transaction of `producer_id`, pending until
    the transaction's marker ends it (`TxnCompletion`)."""

    token: Token
    now_ms: int
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TxnCompletion:
    """A COMMIT or ABORT marker of `producer_id` appended to this partition: its pending
    transactional offsets are materialised or dropped."""

    now_ms: int
    producer_id: int
    committed: bool


@dataclass(frozen=True, slots=True)
class OffsetFetch(Answered[OffsetFetchResponseGroup]):
    """OffsetFetch for one group; `topics=None` fetches every committed partition."""

    token: Token
    now_ms: int
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    require_stable: bool = False
    member_id: str | None = None  # v9: a consumer-protocol member's id and epoch
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DescribeGroup(Answered[DescribedGroup]):
    token: Token
    now_ms: int
    group_id: str


@dataclass(frozen=True, slots=True)
class ListGroups(Answered[ListGroupsResponse]):
    """ListGroups over this partition's groups (the runtime merges partitions)."""

    token: Token
    now_ms: int
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroup(Answered[DeletableGroupResult]):
    token: Token
    now_ms: int
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetDelete(Answered[OffsetDeleteResponse]):
    token: Token
    now_ms: int
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ExpireOffsets:
    """Periodic offsets cleanup (every offsets.retention.check.interval.ms)."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class SessionTimeout:
    """A member's (or a KIP-394 pending member's) session deadline passed."""

    group_id: str
    member_id: str
    now_ms: int = 0

    def at(self, now_ms: int) -> Self:
        return replace(self, now_ms=now_ms)


@dataclass(frozen=True, slots=True)
class RebalanceTimeout:
    """The join phase's deadline passed: members that have not rejoined are dropped."""

    group_id: str
    now_ms: int = 0

    def at(self, now_ms: int) -> Self:
        return replace(self, now_ms=now_ms)


@dataclass(frozen=True, slots=True)
class InitialRebalanceDelayExpired:
    """group.initial.rebalance.delay.ms passed for a rebalance that began from Empty."""

    group_id: str
    now_ms: int = 0

    def at(self, now_ms: int) -> Self:
        return replace(self, now_ms=now_ms)


# --- KIP-848 consumer groups -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeat(Answered[ConsumerGroupHeartbeatResponse]):
    """ConsumerGroupHeartbeat v0-1. Null request fields ("unchanged since the last
    heartbeat") are None; `owned` is the member's owned partitions (None: not sent);
    `topics` is the cluster's topics as the request found them; `may_describe` tells
    whether the member's principal may DESCRIBE a topic (None: every one, no authorizer),
    which bounds what its regular expression resolves to (asked only of the topics the
    expression matches)."""

    token: Token
    now_ms: int
    group_id: str
    member_id: str
    member_epoch: int
    topics: TopicsImage
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1
    new_member_uuid: str = ""
    """A member id for a member joining without one (v0), drawn by the runtime."""
    may_describe: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribe(Answered[DescribedConsumerGroup]):
    """ConsumerGroupDescribe for one group; `topic_names` names the topic ids."""

    token: Token
    now_ms: int
    group_id: str
    topic_names: Mapping[UUID, str]


@dataclass(frozen=True, slots=True)
class ConsumerSessionTimeout:
    """A consumer-protocol member sent no heartbeat for group.consumer.session.timeout.ms."""

    group_id: str
    member_id: str
    now_ms: int = 0

    def at(self, now_ms: int) -> Self:
        return replace(self, now_ms=now_ms)


@dataclass(frozen=True, slots=True)
class ConsumerRevocationTimeout:
    """A member asked to revoke partitions at `member_epoch` did not within its rebalance
    timeout: it is fenced, so that the partitions can move on."""

    group_id: str
    member_id: str
    member_epoch: int
    now_ms: int = 0

    def at(self, now_ms: int) -> Self:
        return replace(self, now_ms=now_ms)


TimerEvent = (
    SessionTimeout
    | RebalanceTimeout
    | InitialRebalanceDelayExpired
    | ConsumerSessionTimeout
    | ConsumerRevocationTimeout
)
Event = (
    JoinGroup
    | SyncGroup
    | Heartbeat
    | LeaveGroup
    | OffsetCommit
    | TxnOffsetCommit
    | TxnCompletion
    | OffsetFetch
    | DescribeGroup
    | ListGroups
    | DeleteGroup
    | OffsetDelete
    | ExpireOffsets
    | ConsumerGroupHeartbeat
    | ConsumerGroupDescribe
    | TimerEvent
)
