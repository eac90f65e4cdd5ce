"""The rebalance itself: start it (PreparingRebalance, KIP-134 initial delay), end the
join phase (KIP-62 rebalance timeout: drop members that did not rejoin, pick the protocol,
answer every parked JoinGroup), hand out assignments, and the timers that drive it.

Shared by `membership.py` (requests) and `shard.py` (loading); follows Kafka's
GroupCoordinator (3.x).
"""

from __future__ import annotations

import struct

from logbus.coordinator.group import events as ev
from logbus.coordinator.group import records
from logbus.coordinator.group.state import (
    CAN_REBALANCE,
    COMPLETING,
    CONSUMER_PROTOCOL_TYPE,
    EMPTY,
    PREPARING,
    STABLE,
    Cancel,
    Group,
    GroupConfig,
    GroupsState,
    Member,
    Result,
    Schedule,
    join_timer_key,
    session_timer_key,
)
from logbus.protocol import ErrorCode, schema
from logbus.protocol.errors import ProtocolError
from logbus.protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from logbus.protocol.messages.sync_group_response import SyncGroupResponse

E = ErrorCode

# --- responses -------------------------------------------------------------------------


def join_response(
    member_id: str,
    error: ErrorCode,
    group: Group | None = None,
    members: list[JoinGroupResponseMember] | None = None,
    leader: str | None = None,
    skip_assignment: bool = False,
) -> JoinGroupResponse:
    """A JoinGroup response body; without `group`, an error answer (generation -1)."""
    return {
        "error_code": error,
        "generation_id": -1 if group is None else group.generation_id,
        "protocol_type": None if group is None else group.protocol_type,
        "protocol_name": None if group is None else group.protocol_name,
        "leader": (leader if leader is not None else (group.leader_id or "")) if group else "",
        "skip_assignment": skip_assignment,
        "member_id": member_id,
        "members": members or [],
    }


def sync_response(
    error: ErrorCode, group: Group | None = None, assignment: bytes = b""
) -> SyncGroupResponse:
    return {
        "error_code": error,
        "protocol_type": None if group is None else group.protocol_type,
        "protocol_name": None if group is None else group.protocol_name,
        "assignment": assignment,
    }


# --- timers ----------------------------------------------------------------------------


def schedule_session(
    group: Group, member: Member, now_ms: int, r: Result, timeout_ms: int | None = None
) -> None:
    """(Re)start a member's session: it must heartbeat, join or sync before the deadline."""
    member.session_deadline_ms = now_ms + (
        member.session_timeout_ms if timeout_ms is None else timeout_ms
    )
    r.timers.append(
        Schedule(
            session_timer_key(group.group_id, member.member_id),
            member.session_deadline_ms,
            ev.SessionTimeout(group.group_id, member.member_id),
        )
    )


def cancel_session(group: Group, member_id: str, r: Result) -> None:
    r.timers.append(Cancel(session_timer_key(group.group_id, member_id)))


# --- rebalance -------------------------------------------------------------------------


def maybe_prepare_rebalance(group: Group, now_ms: int, cfg: GroupConfig, r: Result) -> None:
    if group.state in CAN_REBALANCE:
        prepare_rebalance(group, now_ms, cfg, r)


def prepare_rebalance(group: Group, now_ms: int, cfg: GroupConfig, r: Result) -> None:
    if group.is_(COMPLETING):
        reset_andpropagate_assignment_error(group, E.REBALANCE_IN_PROGRESS, now_ms, r)
    from_empty = group.is_(EMPTY)
    group.transition(PREPARING, now_ms)
    if from_empty and cfg.initial_rebalance_delay_ms > 0:
        delay = cfg.initial_rebalance_delay_ms
        group.in_initial_delay = True
        group.new_member_added = False
        group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        group.join_deadline_ms = now_ms + delay
        event: ev.TimerEvent = ev.InitialRebalanceDelayExpired(group.group_id)
    else:
        group.in_initial_delay = False
        group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
        event = ev.RebalanceTimeout(group.group_id)
    r.timers.append(Schedule(join_timer_key(group.group_id), group.join_deadline_ms, event))
    # Kafka's tryCompleteElseWatch: with nobody left to wait for, the join ends at once.
    maybe_complete_join(group, now_ms, r)


def reset_andpropagate_assignment_error(
    group: Group, error: ErrorCode, now_ms: int, r: Result
) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(group, error, now_ms, r)


def propagate_assignment(group: Group, error: ErrorCode, now_ms: int, r: Result) -> None:
    for member in group.members.values():
        if member.awaiting_sync is not None:
            r.respond(member.awaiting_sync, sync_response(error, group, member.assignment))
            member.awaiting_sync = None
            # Its session was not checked while it waited; start a fresh one.
            schedule_session(group, member, now_ms, r)


def maybe_complete_join(group: Group, now_ms: int, r: Result) -> None:
    if group.is_(PREPARING) and not group.in_initial_delay and group.has_all_members_joined():
        complete_join(group, now_ms, r)


def complete_join(group: Group, now_ms: int, r: Result) -> None:
    """End the join phase: drop members that did not rejoin, start the next generation."""
    for member in [m for m in group.members.values() if not m.is_awaiting_join]:
        group.remove(member.member_id)
        cancel_session(group, member.member_id, r)
    group.in_initial_delay = False
    r.timers.append(Cancel(join_timer_key(group.group_id)))
    group.generation_id += 1
    if group.members:
        leader = group.leader_id
        if leader is None or leader not in group.members:
            group.leader_id = next(iter(group.members))
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = compute_subscribed_topics(group)
        group.transition(COMPLETING, now_ms)
        for member in group.members.values():
            members = group.current_member_metadata() if group.is_leader(member.member_id) else []
            assert member.awaiting_join is not None
            r.respond(member.awaiting_join, join_response(member.member_id, E.NONE, group, members))
            member.awaiting_join = None
            member.is_new = False
            schedule_session(group, member, now_ms, r)
    else:
        group.protocol_name = None
        group.leader_id = None
        group.subscribed_topics = None
        group.transition(EMPTY, now_ms)
        r.records.append(records.group_metadata_record(group.metadata_record()))


def compute_subscribed_topics(group: Group) -> frozenset[str] | None:
    """Topics of the consumer protocol subscriptions; None if not known for every member."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or not group.members:
        return None
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    subscription = schema.message("ConsumerProtocolSubscription")
    for member in group.members.values():
        data = member.metadata_for(group.protocol_name)
        if len(data) < 2:
            return None
        (version,) = struct.unpack_from(">h", data)
        if version < 0:
            return None
        try:
            # Newer subscription versions only add fields: read them as the newest we know.
            body = subscription.decode(data[2:], min(version, subscription.valid_versions[1]))
        except (ProtocolError, ValueError, IndexError, struct.error):
            return None
        topics.update(body["topics"])
    return frozenset(topics)


def remove_member_and_update_group(
    group: Group, member: Member, now_ms: int, cfg: GroupConfig, r: Result
) -> None:
    # A parked new member may time out mid-rebalance: answer it so the client rejoins.
    if member.awaiting_join is not None:
        r.respond(member.awaiting_join, join_response("", E.UNKNOWN_MEMBER_ID))
    if member.awaiting_sync is not None:
        r.respond(member.awaiting_sync, sync_response(E.UNKNOWN_MEMBER_ID))
    member.awaiting_join = member.awaiting_sync = None
    group.remove(member.member_id)
    cancel_session(group, member.member_id, r)
    if group.state in (STABLE, COMPLETING):
        maybe_prepare_rebalance(group, now_ms, cfg, r)
    elif group.is_(PREPARING):
        maybe_complete_join(group, now_ms, r)


# --- timers ----------------------------------------------------------------------------


def handle_session_timeout(state: GroupsState, e: ev.SessionTimeout, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    if group is None:
        return r
    pending_deadline = group.pending_members.get(e.member_id)
    if pending_deadline is not None:
        if e.now_ms >= pending_deadline:
            del group.pending_members[e.member_id]
            maybe_complete_join(group, e.now_ms, r)
        return r
    member = group.members.get(e.member_id)
    if member is None or e.now_ms < member.session_deadline_ms:
        return r  # a timer that was re-armed or cancelled after it fired
    if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
        return r  # waiting on the group, not on the member: a new session starts later
    remove_member_and_update_group(group, member, e.now_ms, cfg, r)
    return r


def handle_rebalance_timeout(
    state: GroupsState, e: ev.RebalanceTimeout, cfg: GroupConfig
) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    if (
        group is not None
        and group.is_(PREPARING)
        and not group.in_initial_delay
        and e.now_ms >= group.join_deadline_ms
    ):
        complete_join(group, e.now_ms, r)
    return r


def handle_initial_delay_expired(
    state: GroupsState, e: ev.InitialRebalanceDelayExpired, cfg: GroupConfig
) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    if group is None or not group.is_(PREPARING) or not group.in_initial_delay:
        return r
    if e.now_ms < group.join_deadline_ms:
        return r
    if group.new_member_added and group.initial_delay_remaining_ms > 0:
        # New members keep arriving: wait one more delay, within the rebalance timeout.
        delay = min(cfg.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
        group.initial_delay_remaining_ms = max(
            group.initial_delay_remaining_ms - cfg.initial_rebalance_delay_ms, 0
        )
        group.new_member_added = False
        group.join_deadline_ms = e.now_ms + delay
        r.timers.append(
            Schedule(
                join_timer_key(group.group_id),
                group.join_deadline_ms,
                ev.InitialRebalanceDelayExpired(group.group_id),
            )
        )
        return r
    complete_join(group, e.now_ms, r)
    return r
