"""The online upgrade of a classic group to a KIP-848 consumer group
(`group.consumer.migration.policy`, Kafka's "consumer group migration").

When the first consumer-protocol member heartbeats into a Stable classic group of the
`consumer` protocol type, the group becomes a consumer group (`upgrade`): each classic
member becomes a member of it at the classic generation, with the subscription and the
partitions its classic assignment gave it, and the classic group's metadata is removed
(its offsets stay). Its classic members go on with JoinGroup / SyncGroup / Heartbeat /
LeaveGroup, answered here from the consumer group: a heartbeat answers
REBALANCE_IN_PROGRESS while the member is behind its target, a JoinGroup moves it to its
target at once (the member revoked what it owned, or says what it kept), and SyncGroup
hands it its partitions. The members then move to the new protocol one by one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from logbus.coordinator.group import consumer_records as cr
from logbus.coordinator.group import events as ev
from logbus.coordinator.group import records
from logbus.coordinator.group.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    TopicsImage,
    as_assignment,
    pairs_of,
)
from logbus.coordinator.group.consumer_heartbeat import (
    HeartbeatError,
    compute_target,
    error_response,
    fence_member,
    group_assignor,
    refresh_subscriptions,
    remove_member,
    schedule_consumer_session,
    validate,
)
from logbus.coordinator.group.consumer_heartbeat import (
    handle_heartbeat as handle_consumer_heartbeat_only,
)
from logbus.coordinator.group.rebalance import join_response, sync_response
from logbus.coordinator.group.reconciliation import compute_next
from logbus.coordinator.group.state import (
    CONSUMER_PROTOCOL_TYPE,
    STABLE,
    Cancel,
    Group,
    GroupConfig,
    GroupsState,
    Result,
    join_timer_key,
    session_timer_key,
)
from logbus.protocol import ErrorCode, schema
from logbus.protocol.errors import ProtocolError
from logbus.protocol.messages.describe_groups_response import DescribedGroup

E = ErrorCode
UPGRADE_POLICIES = ("upgrade", "bidirectional")
_VERSION = struct.Struct(">h")


# --- the classic protocol's payloads -----------------------------------------------------


def _decode(name: str, data: bytes) -> dict[str, Any] | None:
    if len(data) < 2:
        return None
    (version,) = _VERSION.unpack_from(data)
    message = schema.message(name)
    if version < 0:
        return None
    try:
        return message.decode(data[2:], min(version, message.valid_versions[1]))
    except (ProtocolError, ValueError, IndexError, struct.error):
        return None


def subscription_of(metadata: bytes) -> tuple[tuple[str, ...], dict[str, set[int]] | None]:
    """A ConsumerProtocolSubscription's topics and owned partitions (None: not said)."""
    body = _decode("ConsumerProtocolSubscription", metadata)
    if body is None:
        return (), None
    owned_list = body.get("owned_partitions")
    owned = (
        {o["topic"]: set(o["partitions"]) for o in owned_list} if owned_list else None
    )
    return tuple(sorted(body["topics"])), owned


def assignment_of(data: bytes, topics: TopicsImage) -> Assignment:
    body = _decode("ConsumerProtocolAssignment", data)
    if body is None:
        return {}
    return {
        topics[a["topic"]].topic_id: frozenset(a["partitions"])
        for a in body["assigned_partitions"]
        if a["topic"] in topics
    }


def encode_assignment(assignment: Assignment, names: dict[Any, str]) -> bytes:
    body = {
        "assigned_partitions": [
            {"topic": names[t], "partitions": sorted(ps)}
            for t, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], ""))
            if ps and t in names
        ],
        "user_data": None,
    }
    return _VERSION.pack(0) + schema.message("ConsumerProtocolAssignment").encode(body, 0)


# --- upgrade -----------------------------------------------------------------------------


def may_upgrade(classic: Group, cfg: GroupConfig) -> bool:
    return (
        cfg.consumer_migration_policy in UPGRADE_POLICIES
        and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
        and classic.is_(STABLE)
        and classic.protocol_name is not None
        and len(classic.members) <= cfg.consumer_max_size
    )


def upgrade(
    state: GroupsState, classic: Group, topics: TopicsImage, now_ms: int, cfg: GroupConfig,
    r: Result,
) -> ConsumerGroup:
    """Turn a Stable classic group into a consumer group of the same members, each at the
    classic generation with its classic assignment; the classic metadata is removed."""
    assert classic.protocol_name is not None
    group = ConsumerGroup(
        classic.group_id,
        group_epoch=classic.generation_id,
        assignment_epoch=classic.generation_id,
    )
    for m in classic.members.values():
        subscribed, _owned = subscription_of(m.metadata_for(classic.protocol_name))
        assigned = assignment_of(m.assignment, topics)
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=subscribed,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            assigned=assigned,
            uses_classic_protocol=True,
            classic_session_timeout_ms=m.session_timeout_ms,
            classic_protocols=m.protocols,
        )
        group.add(member)
        group.target[m.member_id] = assigned
        r.timers.append(Cancel(session_timer_key(classic.group_id, m.member_id)))
        schedule_consumer_session(group.group_id, m.member_id, now_ms, cfg, r,
                                  m.session_timeout_ms)
    r.timers.append(Cancel(join_timer_key(classic.group_id)))
    r.records.append(records.group_tombstone(classic.group_id))
    state.groups[classic.group_id] = Group(classic.group_id, offsets=classic.offsets)
    refresh_subscriptions(group, topics)
    r.records.append(cr.group_epoch_record(group))
    for member in group.members.values():
        r.records.append(cr.member_metadata_record(group.group_id, member))
        r.records.append(cr.target_member_record(group.group_id, member.member_id,
                                                 member.assigned))
        r.records.append(cr.current_member_record(group.group_id, member))
    r.records.append(cr.target_epoch_record(group))
    state.consumer_groups[group.group_id] = group
    return group


def handle_consumer_heartbeat(
    state: GroupsState, e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig
) -> Result:
    """ConsumerGroupHeartbeat, upgrading the classic group of its id first when the
    first consumer-protocol member joins it and the policy allows."""
    classic = state.groups.get(e.group_id)
    if (
        e.member_epoch == 0
        and e.group_id not in state.consumer_groups
        and classic is not None
        and classic.members
        and may_upgrade(classic, cfg)
    ):
        r = Result()
        try:
            validate(e, cfg)
        except HeartbeatError as exc:
            r.respond(e.token, error_response(exc.error, exc.message))
            return r
        upgrade(state, classic, e.topics, e.now_ms, cfg, r)
        r.extend(handle_consumer_heartbeat_only(state, e, cfg))
        return r
    return handle_consumer_heartbeat_only(state, e, cfg)


# --- classic members of a consumer group --------------------------------------------------


def handles(state: GroupsState, event: object, cfg: GroupConfig) -> bool:
    """Whether a classic membership request goes to a consumer group (else the classic
    coordinator answers it). A classic member may join a consumer group only while the
    migration policy allows upgrades (else the classic coordinator refuses it with
    INCONSISTENT_GROUP_PROTOCOL)."""
    if not isinstance(event, ev.JoinGroup | ev.SyncGroup | ev.Heartbeat | ev.LeaveGroup):
        return False
    group = state.consumer_groups.get(event.group_id)
    if group is None or not group.members:
        return False
    return not isinstance(event, ev.JoinGroup) or (
        cfg.consumer_migration_policy in UPGRADE_POLICIES
    )


def handle_join(state: GroupsState, e: ev.JoinGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.consumer_groups[e.group_id]
    error = _join_error(group, e, cfg)
    if error is not E.NONE or e.topics is None:
        r.respond(e.token, join_response(e.member_id, error or E.COORDINATOR_NOT_AVAILABLE))
        return r
    member_id = e.member_id or f"{e.group_instance_id or e.client_id}-{e.new_member_uuid}"
    member = group.members.get(member_id)
    is_new = member is None
    if member is None:
        if e.group_instance_id is not None and e.group_instance_id in group.static_members:
            fence_member(group, group.static_members[e.group_instance_id], r)
        member = ConsumerMember(member_id, instance_id=e.group_instance_id,
                                uses_classic_protocol=True)
    name, metadata = e.protocols[0]
    subscribed, owned = subscription_of(metadata)
    before = (member.subscribed_topic_names, member.classic_protocols)
    member.subscribed_topic_names = subscribed
    member.classic_protocols = e.protocols
    member.classic_session_timeout_ms = e.session_timeout_ms
    member.rebalance_timeout_ms = max(e.rebalance_timeout_ms, e.session_timeout_ms)
    member.client_id, member.client_host = e.client_id, e.client_host
    if is_new:
        group.add(member)
    if is_new or before != (member.subscribed_topic_names, member.classic_protocols):
        r.records.append(cr.member_metadata_record(group.group_id, member))
    bump = is_new or before[0] != subscribed
    if refresh_subscriptions(group, e.topics) or bump:
        group.group_epoch += 1
        r.records.append(cr.group_epoch_record(group))
    if group.group_epoch > group.assignment_epoch:
        compute_target(group, e.topics, cfg, r)
    updated = _reconcile_on_join(group, member, owned, e.topics)
    group.members[member_id] = updated
    r.records.append(cr.current_member_record(group.group_id, updated))
    schedule_consumer_session(group.group_id, member_id, e.now_ms, cfg, r,
                              e.session_timeout_ms)
    r.respond(e.token, {
        "error_code": E.NONE,
        "generation_id": updated.member_epoch,
        "protocol_type": CONSUMER_PROTOCOL_TYPE,
        "protocol_name": name,
        "leader": "",  # nobody: the coordinator assigns, every member syncs as a follower
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    })
    return r


def _join_error(group: ConsumerGroup, e: ev.JoinGroup, cfg: GroupConfig) -> ErrorCode:
    if e.protocol_type != CONSUMER_PROTOCOL_TYPE or not e.protocols:
        return E.INCONSISTENT_GROUP_PROTOCOL
    if e.member_id and e.member_id not in group.members:
        return E.UNKNOWN_MEMBER_ID
    if not e.member_id and len(group.members) >= cfg.consumer_max_size:
        return E.GROUP_MAX_SIZE_REACHED
    return E.NONE


def _reconcile_on_join(
    group: ConsumerGroup,
    member: ConsumerMember,
    owned: dict[str, set[int]] | None,
    topics: TopicsImage,
) -> ConsumerMember:
    """A classic member rejoining has given up what it does not say it owns (an eager
    member owns nothing then); it keeps the rest of its target and takes what is free."""
    still = {
        (topics[t].topic_id, p) for t, ps in (owned or {}).items() if t in topics for p in ps
    }
    target = group.target.get(member.member_id, {})
    member.assigned = as_assignment(pairs_of(member.assigned) & still & pairs_of(target))
    member.pending_revocation = {}
    member.state = MemberState.STABLE
    owners = group.owners()
    return compute_next(
        member, group.assignment_epoch, target,
        lambda tp: owners.get(tp, member.member_id) != member.member_id,
    )


def _classic_member(
    group: ConsumerGroup, member_id: str, generation_id: int
) -> tuple[ConsumerMember | None, ErrorCode]:
    member = group.members.get(member_id)
    if member is None or not member.uses_classic_protocol:
        return None, E.UNKNOWN_MEMBER_ID
    if generation_id != member.member_epoch:
        return None, E.ILLEGAL_GENERATION
    return member, E.NONE


def _behind(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """A classic member that must rejoin to move on: the group moved past its epoch or
    it still waits for partitions."""
    return (
        member.member_epoch != group.group_epoch
        or member.state is not MemberState.STABLE
        or member.assigned != group.target.get(member.member_id, {})
    )


def handle_sync(state: GroupsState, e: ev.SyncGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.consumer_groups[e.group_id]
    member, error = _classic_member(group, e.member_id, e.generation_id)
    if member is None:
        r.respond(e.token, sync_response(error))
        return r
    schedule_consumer_session(group.group_id, member.member_id, e.now_ms, cfg, r,
                              member.classic_session_timeout_ms)
    r.respond(e.token, {
        "error_code": E.NONE,
        "protocol_type": CONSUMER_PROTOCOL_TYPE,
        "protocol_name": e.protocol_name,
        "assignment": encode_assignment(member.assigned, group.topic_names),
    })
    return r


def handle_heartbeat(state: GroupsState, e: ev.Heartbeat, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.consumer_groups[e.group_id]
    member, error = _classic_member(group, e.member_id, e.generation_id)
    if member is not None:
        schedule_consumer_session(group.group_id, member.member_id, e.now_ms, cfg, r,
                                  member.classic_session_timeout_ms)
        error = E.REBALANCE_IN_PROGRESS if _behind(group, member) else E.NONE
    r.respond(e.token, {"error_code": error})
    return r


def handle_leave(state: GroupsState, e: ev.LeaveGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.consumer_groups[e.group_id]
    errors = []
    for leaving in e.members:
        member_id = leaving.member_id or group.static_members.get(
            leaving.group_instance_id or "", ""
        )
        member = group.members.get(member_id)
        if member is None or not member.uses_classic_protocol:
            errors.append(E.UNKNOWN_MEMBER_ID)
            continue
        fence_member(group, member_id, r)
        errors.append(E.NONE)
    top = E.NONE if e.batched else next((x for x in errors if x is not E.NONE), E.NONE)
    r.respond(e.token, {
        "error_code": top,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "error_code": err}
            for m, err in zip(e.members, errors, strict=True)
        ] if e.batched else [],
    })
    return r


HANDLERS: dict[type, Callable[[GroupsState, Any, GroupConfig], Result]] = {
    ev.JoinGroup: handle_join,
    ev.SyncGroup: handle_sync,
    ev.Heartbeat: handle_heartbeat,
    ev.LeaveGroup: handle_leave,
}

__all__ = ["HANDLERS", "handles", "may_upgrade", "remove_member", "upgrade"]


# --- DescribeGroups of a consumer group ---------------------------------------------------

_CLASSIC_STATES = {
    ConsumerGroupState.EMPTY: "Empty",
    ConsumerGroupState.ASSIGNING: "PreparingRebalance",
    ConsumerGroupState.RECONCILING: "PreparingRebalance",
    ConsumerGroupState.STABLE: "Stable",
}


def describe_as_classic(
    state: GroupsState, group_id: str, cfg: GroupConfig
) -> DescribedGroup | None:
    """DescribeGroups of a consumer group, in the classic shape as Kafka answers it: its
    state mapped to a classic one, each member's subscription and current assignment as
    consumer-protocol payloads. None when `group_id` is no consumer group."""
    group = state.consumer_groups.get(group_id)
    if group is None:
        return None
    stable = group.state() is ConsumerGroupState.STABLE
    return {
        "error_code": E.NONE,
        "group_id": group_id,
        "group_state": _CLASSIC_STATES.get(group.state(), "Dead"),
        "protocol_type": CONSUMER_PROTOCOL_TYPE,
        "protocol_data": group_assignor(group, cfg) if stable else "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": _VERSION.pack(0) + schema.message(
                    "ConsumerProtocolSubscription"
                ).encode({"topics": list(m.subscribed_topic_names), "user_data": None}, 0),
                "member_assignment": encode_assignment(m.assigned, group.topic_names),
            }
            for m in group.members.values()
        ],
    }
