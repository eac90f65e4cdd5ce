"""Classic group membership requests: JoinGroup (KIP-345 static membership, KIP-394
member id required), SyncGroup, Heartbeat, LeaveGroup (KIP-345 batched leave).

Every handler follows Kafka's GroupCoordinator (3.x) in which checks come first and
which error wins; the states and the legal moves between them are in `state.py`.
"""

from __future__ import annotations

from logbus.coordinator.group import consumer_heartbeat, records
from logbus.coordinator.group import events as ev
from logbus.coordinator.group.rebalance import (
    cancel_session,
    join_response,
    maybe_complete_join,
    maybe_prepare_rebalance,
    prepare_rebalance,
    propagate_assignment,
    remove_member_and_update_group,
    schedule_session,
    sync_response,
)
from logbus.coordinator.group.state import (
    COMPLETING,
    DEAD,
    EMPTY,
    HEARTBEAT_ERROR,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    PREPARING,
    STABLE,
    SYNC_ERROR,
    Group,
    GroupConfig,
    GroupsState,
    Member,
    Result,
    Schedule,
    Token,
    session_timer_key,
)
from logbus.protocol import ErrorCode
from logbus.protocol.messages.leave_group_response import LeaveGroupResponse

E = ErrorCode

# --- JoinGroup -------------------------------------------------------------------------


def handle_join(state: GroupsState, e: ev.JoinGroup, cfg: GroupConfig) -> Result:
    r = Result()
    if not e.group_id:
        r.respond(e.token, join_response(e.member_id, E.INVALID_GROUP_ID))
        return r
    if not cfg.min_session_timeout_ms <= e.session_timeout_ms <= cfg.max_session_timeout_ms:
        r.respond(e.token, join_response(e.member_id, E.INVALID_SESSION_TIMEOUT))
        return r
    is_unknown_member = e.member_id == ""
    if consumer_heartbeat.is_active_consumer_group(state, e.group_id):
        # A KIP-848 group with members: its members heartbeat, they do not join.
        r.respond(e.token, join_response(e.member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        return r
    consumer_heartbeat.delete_consumer_group(state, e.group_id, r)  # an empty one goes
    group = state.groups.get(e.group_id)
    if group is None:
        if not is_unknown_member:
            r.respond(e.token, join_response(e.member_id, E.UNKNOWN_MEMBER_ID))
            return r
        group = state.groups[e.group_id] = Group(e.group_id)

    if not _accept_joining_member(group, e.member_id, cfg):
        # Also evicts an existing member beyond the limit (e.g. after group.max.size shrank).
        if group.has(e.member_id):
            remove_member_and_update_group(group, group.members[e.member_id], e.now_ms, cfg, r)
        r.respond(e.token, join_response("", E.GROUP_MAX_SIZE_REACHED))
    elif is_unknown_member:
        _new_member_join(group, e, cfg, r)
    else:
        _current_member_join(group, e, cfg, r)
    maybe_complete_join(group, e.now_ms, r)
    return r


def _accept_joining_member(group: Group, member_id: str, cfg: GroupConfig) -> bool:
    if group.state in (EMPTY, DEAD):
        return True
    if group.is_(PREPARING):
        # Count awaiting members: the group may already exceed a lowered max size, and
        # this lets the last members to rejoin be the ones kicked out.
        member = group.members.get(member_id)
        return (member is not None and member.is_awaiting_join) or (
            group.num_awaiting_join() < cfg.max_size
        )
    return group.has(member_id) or len(group.members) < cfg.max_size


def _new_member_join(group: Group, e: ev.JoinGroup, cfg: GroupConfig, r: Result) -> None:
    if group.is_(DEAD):
        r.respond(e.token, join_response("", E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(e.protocol_type, [name for name, _ in e.protocols]):
        r.respond(e.token, join_response("", E.INCONSISTENT_GROUP_PROTOCOL))
        return
    prefix = e.group_instance_id if e.group_instance_id is not None else e.client_id
    new_member_id = f"{prefix}-{e.new_member_uuid}"
    if e.group_instance_id is not None:
        old_member_id = group.static_members.get(e.group_instance_id)
        if old_member_id is not None:
            _replace_static_member(group, old_member_id, new_member_id, e, cfg, r)
        else:
            _add_member_and_rebalance(group, new_member_id, e, cfg, r)
    elif e.api_version >= 4:
        # KIP-394: hand out an id and wait for the member to come back with it.
        deadline = e.now_ms + e.session_timeout_ms
        group.pending_members[new_member_id] = deadline
        r.timers.append(
            Schedule(
                session_timer_key(group.group_id, new_member_id),
                deadline,
                ev.SessionTimeout(group.group_id, new_member_id),
            )
        )
        r.respond(e.token, join_response(new_member_id, E.MEMBER_ID_REQUIRED))
    else:
        _add_member_and_rebalance(group, new_member_id, e, cfg, r)


def _current_member_join(group: Group, e: ev.JoinGroup, cfg: GroupConfig, r: Result) -> None:
    member_id = e.member_id
    if group.is_(DEAD):
        r.respond(e.token, join_response(member_id, E.COORDINATOR_NOT_AVAILABLE))
        return
    if not group.supports_protocols(e.protocol_type, [name for name, _ in e.protocols]):
        r.respond(e.token, join_response(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        return
    if member_id in group.pending_members and e.group_instance_id is None:
        _add_member_and_rebalance(group, member_id, e, cfg, r)
        return
    instance_unknown = (
        e.group_instance_id is not None and e.group_instance_id not in group.static_members
    )
    if group.is_static_member_fenced(e.group_instance_id, member_id):
        r.respond(e.token, join_response(member_id, E.FENCED_INSTANCE_ID))
        return
    member = group.members.get(member_id)
    if member is None or instance_unknown:
        r.respond(e.token, join_response(member_id, E.UNKNOWN_MEMBER_ID))
        return
    unchanged = member.protocols == e.protocols
    if group.is_(PREPARING):
        _update_member_and_rebalance(group, member, e, cfg, r)
    elif group.is_(COMPLETING):
        if unchanged:
            # The member lost the JoinGroup response: resend this generation's.
            members = group.current_member_metadata() if group.is_leader(member_id) else []
            r.respond(e.token, join_response(member_id, E.NONE, group, members))
        else:
            _update_member_and_rebalance(group, member, e, cfg, r)
    elif group.is_(STABLE):
        # A leader's JoinGroup always rebalances: it is how the leader asks for a new
        # assignment after changes the member metadata does not show (topic metadata).
        if group.is_leader(member_id) or not unchanged:
            _update_member_and_rebalance(group, member, e, cfg, r)
        else:
            r.respond(e.token, join_response(member_id, E.NONE, group))
    else:
        r.respond(e.token, join_response(member_id, E.UNKNOWN_MEMBER_ID))


def _add_member_and_rebalance(
    group: Group, member_id: str, e: ev.JoinGroup, cfg: GroupConfig, r: Result
) -> None:
    member = Member(
        member_id=member_id,
        group_instance_id=e.group_instance_id,
        client_id=e.client_id,
        client_host=e.client_host,
        rebalance_timeout_ms=_rebalance_timeout(e),
        session_timeout_ms=e.session_timeout_ms,
        protocol_type=e.protocol_type,
        protocols=e.protocols,
        awaiting_join=e.token,
        is_new=True,
    )
    if group.is_(PREPARING) and group.generation_id == 0:
        group.new_member_added = True  # lets the initial delay extend once more
    group.add(member)
    # A new member cannot heartbeat while its JoinGroup is parked; if it gave up, it will
    # retry with a new id, so parked new members expire after a fixed timeout.
    schedule_session(group, member, e.now_ms, r, NEW_MEMBER_JOIN_TIMEOUT_MS)
    maybe_prepare_rebalance(group, e.now_ms, cfg, r)


def _rebalance_timeout(e: ev.JoinGroup) -> int:
    return e.rebalance_timeout_ms if e.rebalance_timeout_ms >= 0 else e.session_timeout_ms


def _update_member(member: Member, e: ev.JoinGroup, r: Result) -> None:
    member.protocols = e.protocols
    member.rebalance_timeout_ms = _rebalance_timeout(e)
    member.session_timeout_ms = e.session_timeout_ms
    _park_join(member, e.token, r)


def _park_join(member: Member, token: Token, r: Result) -> None:
    if member.awaiting_join is not None and member.awaiting_join is not token:
        # A retried JoinGroup supersedes the parked one; answer the old one so the
        # runtime never holds a request forever.
        r.respond(member.awaiting_join, join_response(member.member_id, E.REBALANCE_IN_PROGRESS))
    member.awaiting_join = token


def _update_member_and_rebalance(
    group: Group, member: Member, e: ev.JoinGroup, cfg: GroupConfig, r: Result
) -> None:
    _update_member(member, e, r)
    maybe_prepare_rebalance(group, e.now_ms, cfg, r)


def _replace_static_member(
    group: Group,
    old_member_id: str,
    new_member_id: str,
    e: ev.JoinGroup,
    cfg: GroupConfig,
    r: Result,
) -> None:
    """KIP-345: a known group.instance.id rejoined without its member id (a restart)."""
    current_leader = group.leader_id
    member = group.members.pop(old_member_id)
    # Fence the old incarnation's parked requests at once.
    if member.awaiting_join is not None:
        r.respond(member.awaiting_join, join_response(old_member_id, E.FENCED_INSTANCE_ID))
    if member.awaiting_sync is not None:
        r.respond(member.awaiting_sync, sync_response(E.FENCED_INSTANCE_ID))
    member.awaiting_join = member.awaiting_sync = None
    cancel_session(group, old_member_id, r)
    member.member_id = new_member_id
    group.members[new_member_id] = member
    if group.leader_id == old_member_id:
        group.leader_id = new_member_id
    assert e.group_instance_id is not None
    group.static_members[e.group_instance_id] = new_member_id
    schedule_session(group, member, e.now_ms, r)
    _update_member(member, e, r)

    if group.is_(STABLE):
        if group.select_protocol() == group.protocol_name:
            # Same protocol next generation: persist the new id, keep the assignment, no
            # rebalance. The old leader id is returned to a pre-v9 leader so that it does
            # not compute an assignment a Stable group would never send out.
            member.awaiting_join = None
            r.records.append(records.group_metadata_record(group.metadata_record()))
            skip = e.api_version >= 9 and group.is_leader(new_member_id)
            r.respond(
                e.token,
                join_response(
                    new_member_id,
                    E.NONE,
                    group,
                    members=group.current_member_metadata() if skip else [],
                    leader=(group.leader_id or "")
                    if e.api_version >= 9
                    else (current_leader or ""),
                    skip_assignment=skip,
                ),
            )
        else:
            maybe_prepare_rebalance(group, e.now_ms, cfg, r)
    elif group.is_(COMPLETING):
        # The leader may already hold the old member id: rebalance so it gets the new one.
        prepare_rebalance(group, e.now_ms, cfg, r)


# --- SyncGroup -------------------------------------------------------------------------


def handle_sync(state: GroupsState, e: ev.SyncGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    error = _check_member(group, e.group_id, e.member_id, e.group_instance_id, e.generation_id)
    if group is not None and error is E.NONE:
        type_differs = e.protocol_type is not None and e.protocol_type != group.protocol_type
        name_differs = e.protocol_name is not None and e.protocol_name != group.protocol_name
        if type_differs or name_differs:
            error = E.INCONSISTENT_GROUP_PROTOCOL
        else:
            error = SYNC_ERROR[group.state]
    if group is None or error is not E.NONE:
        r.respond(e.token, sync_response(error))
        return r
    member = group.members[e.member_id]
    if group.is_(STABLE):
        r.respond(e.token, sync_response(E.NONE, group, member.assignment))
        schedule_session(group, member, e.now_ms, r)
        return r
    if member.awaiting_sync is not None and member.awaiting_sync is not e.token:
        r.respond(member.awaiting_sync, sync_response(E.REBALANCE_IN_PROGRESS))
    member.awaiting_sync = e.token
    if group.is_leader(e.member_id):
        assignment = dict(e.assignments)
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
        group.transition(STABLE, e.now_ms)
        r.records.append(records.group_metadata_record(group.metadata_record()))
        propagate_assignment(group, E.NONE, e.now_ms, r)
    return r


def _check_member(
    group: Group | None, group_id: str, member_id: str, instance_id: str | None, generation: int
) -> ErrorCode:
    """The checks SyncGroup and Heartbeat share, in Kafka's order."""
    if not group_id:
        return E.INVALID_GROUP_ID
    if group is None:
        return E.UNKNOWN_MEMBER_ID
    if group.is_(DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if group.is_static_member_fenced(instance_id, member_id):
        return E.FENCED_INSTANCE_ID
    if not group.has(member_id):
        return E.UNKNOWN_MEMBER_ID
    if generation != group.generation_id:
        return E.ILLEGAL_GENERATION
    return E.NONE


# --- Heartbeat -------------------------------------------------------------------------


def handle_heartbeat(state: GroupsState, e: ev.Heartbeat, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    error = _check_member(group, e.group_id, e.member_id, e.group_instance_id, e.generation_id)
    if group is not None and error is E.NONE:
        error = HEARTBEAT_ERROR[group.state]
        if not group.is_(EMPTY):
            schedule_session(group, group.members[e.member_id], e.now_ms, r)
    r.respond(e.token, {"error_code": error})
    return r


# --- LeaveGroup ------------------------------------------------------------------------


def handle_leave(state: GroupsState, e: ev.LeaveGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    if not e.group_id:
        r.respond(e.token, _leave_response(e, E.INVALID_GROUP_ID, None))
        return r
    if group is None:
        errors = [E.UNKNOWN_MEMBER_ID] * len(e.members)
    elif group.is_(DEAD):
        r.respond(e.token, _leave_response(e, E.COORDINATOR_NOT_AVAILABLE, None))
        return r
    else:
        errors = [_leave_one(group, m, e.now_ms, cfg, r) for m in e.members]
    r.respond(e.token, _leave_response(e, E.NONE, errors))
    return r


def _leave_one(
    group: Group, leaving: ev.LeavingMember, now_ms: int, cfg: GroupConfig, r: Result
) -> ErrorCode:
    member_id = leaving.member_id
    if member_id == "":
        # Administrative removal by group.instance.id (kafka-consumer-groups --delete-members).
        current = group.static_members.get(leaving.group_instance_id or "")
        if leaving.group_instance_id is None or current is None:
            return E.UNKNOWN_MEMBER_ID
        remove_member_and_update_group(group, group.members[current], now_ms, cfg, r)
        return E.NONE
    if member_id in group.pending_members:
        del group.pending_members[member_id]
        cancel_session(group, member_id, r)
        maybe_complete_join(group, now_ms, r)
        return E.NONE
    if group.is_static_member_fenced(leaving.group_instance_id, member_id):
        return E.FENCED_INSTANCE_ID
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    remove_member_and_update_group(group, member, now_ms, cfg, r)
    return E.NONE


def _leave_response(
    e: ev.LeaveGroup, top: ErrorCode, errors: list[ErrorCode] | None
) -> LeaveGroupResponse:
    """`errors`: one per leaving member, or None when a group-level error answers the
    request (as in Kafka, the members list is then empty)."""
    if errors is None:
        return {"error_code": top, "members": []}
    if not e.batched and top is E.NONE:
        top = next((err for err in errors if err is not E.NONE), E.NONE)
    return {
        "error_code": top,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": err}
            for m, err in zip(e.members, errors, strict=True)
        ]
        if e.batched
        else [],
    }
