"""KIP-848 consumer groups in the coordinator core: ConsumerGroupHeartbeat, the members'
session and revocation timeouts, and ConsumerGroupDescribe (Kafka's
`GroupMetadataManager.consumerGroupHeartbeat` and friends).

A heartbeat is handled in steps: validate the request; find or create the member (static
members by their instance id); update its subscription, bumping the group epoch when
something the assignment depends on changed; compute a new target assignment when the
group epoch is ahead of it; move the member one step towards its target
(`reconciliation.next_member`); write what changed as ConsumerGroup* records; answer with
the member's epoch and, when it changed or the member asked for it, its assignment.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from logbus.coordinator.group import consumer_records as cr
from logbus.coordinator.group import events as ev
from logbus.coordinator.group.assignors import ASSIGNORS
from logbus.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicsImage,
    member_topics,
    pairs_of,
)
from logbus.coordinator.group.reconciliation import next_member
from logbus.coordinator.group.state import Cancel, GroupConfig, GroupsState, Result, Schedule
from logbus.protocol import ErrorCode
from logbus.protocol.messages.consumer_group_describe_response import (
    DescribedGroup,
    Member,
    TopicPartitions,
)
from logbus.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from logbus.protocol.messages.consumer_group_heartbeat_response import (
    TopicPartitions as AssignedPartitions,
)

E = ErrorCode


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


def session_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("consumer-session", group_id, member_id)


def revocation_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("consumer-revocation", group_id, member_id)


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription's regular expression; raises `re.error` when it is invalid."""
    return re.compile(pattern)


# --- ConsumerGroupHeartbeat --------------------------------------------------------------


def handle_heartbeat(
    state: GroupsState, e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig
) -> Result:
    r = Result()
    try:
        validate(e, cfg)
        if e.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            body = _leave(state, e, cfg, r)
        else:
            body = _heartbeat(state, e, cfg, r)
    except HeartbeatError as exc:
        body = error_response(exc.error, exc.message)
    r.respond(e.token, body)
    return r


def error_response(error: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return {
        "error_code": error,
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def validate(e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig) -> None:
    """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`."""
    if not e.group_id:
        raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if e.instance_id == "":
        raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if e.rack_id == "":
        raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
    if e.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise HeartbeatError(E.INVALID_REQUEST, f"MemberEpoch {e.member_epoch} is invalid.")
    if (e.member_epoch != 0 or e.api_version >= 1) and not e.member_id:
        raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if e.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and e.instance_id is None:
        raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be null for a static leave.")
    if e.member_epoch == 0:
        if e.rebalance_timeout_ms == -1:
            raise HeartbeatError(
                E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            )
        if e.owned is not None and pairs_of(e.owned):
            raise HeartbeatError(
                E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
            )
        if e.subscribed_topic_names is None and e.subscribed_topic_regex is None:
            raise HeartbeatError(
                E.INVALID_REQUEST,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    if e.subscribed_topic_regex:
        try:
            compile_regex(e.subscribed_topic_regex)
        except re.error as exc:
            raise HeartbeatError(
                E.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{e.subscribed_topic_regex}` is not a valid regular "
                f"expression: {exc}.",
            ) from exc
    if e.server_assignor is not None and e.server_assignor not in cfg.consumer_assignors:
        raise HeartbeatError(
            E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {e.server_assignor} is not supported."
        )


def _heartbeat(
    state: GroupsState, e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig, r: Result
) -> ConsumerGroupHeartbeatResponse:
    group = _group_for(state, e)
    member, is_new = _member_for(group, e, cfg, r)
    before = _snapshot_member(member)
    _update_member(member, e)
    metadata_changed = is_new or _metadata_of(member) != _metadata_of(before)
    if metadata_changed:
        r.records.append(cr.member_metadata_record(group.group_id, member))
    if is_new:
        group.add(member)
    bump = (
        is_new
        or _subscription_of(member) != _subscription_of(before)
        or member.describable_regex_topics != before.describable_regex_topics
    )
    if refresh_subscriptions(group, e.topics) or bump:
        group.group_epoch += 1
        r.records.append(cr.group_epoch_record(group))
    if group.group_epoch > group.assignment_epoch:
        compute_target(group, e.topics, cfg, r)
    owners = group.owners()
    updated = next_member(
        member,
        group.assignment_epoch,
        group.target.get(member.member_id, {}),
        lambda tp: owners.get(tp, member.member_id) != member.member_id,
        e.owned,
    )
    updated.client_id, updated.client_host = member.client_id, member.client_host
    group.members[member.member_id] = updated
    changed = _current_of(updated) != _current_of(before) or is_new
    if changed:
        r.records.append(cr.current_member_record(group.group_id, updated))
    _schedule_timers(group, updated, before, e.now_ms, cfg, r)
    full = e.subscribed_topic_names is not None and e.owned is not None
    send_assignment = (
        e.member_epoch == 0 or full or updated.assigned != before.assigned or is_new
    )
    return {
        "error_code": E.NONE,
        "error_message": None,
        "member_id": updated.member_id,
        "member_epoch": updated.member_epoch,
        "heartbeat_interval_ms": cfg.consumer_heartbeat_interval_ms,
        "assignment": (
            {"topic_partitions": _wire_partitions(updated.assigned)} if send_assignment else None
        ),
    }


def _group_for(state: GroupsState, e: ev.ConsumerGroupHeartbeat) -> ConsumerGroup:
    group = state.consumer_groups.get(e.group_id)
    if group is not None:
        return group
    classic = state.groups.get(e.group_id)
    if classic is not None and classic.members:
        raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {e.group_id} is not a consumer group.")
    if e.member_epoch != 0:
        raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Consumer group {e.group_id} not found.")
    group = state.consumer_groups[e.group_id] = ConsumerGroup(e.group_id)
    return group


def _member_for(
    group: ConsumerGroup, e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig, r: Result
) -> tuple[ConsumerMember, bool]:
    """The member the heartbeat is from, and whether it is new to the group."""
    if e.member_epoch != 0:
        member = group.members.get(e.member_id)
        if member is None:
            raise HeartbeatError(
                E.UNKNOWN_MEMBER_ID, f"Member {e.member_id} is not a member of the group."
            )
        if e.instance_id is not None and group.static_members.get(e.instance_id) != e.member_id:
            raise HeartbeatError(E.FENCED_INSTANCE_ID)
        _check_epoch(member, e)
        return member, False
    member_id = e.member_id or e.new_member_uuid
    if e.instance_id is not None:
        previous_id = group.static_members.get(e.instance_id)
        if previous_id is not None:
            return _replace_static(group, previous_id, member_id, e, r), True
    if member_id in group.members:
        # Rejoining with epoch 0 under its own id: it has let its partitions go.
        remove_member(group, member_id, r)
    if len(group.members) >= cfg.consumer_max_size:
        raise HeartbeatError(
            E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity "
            f"of {cfg.consumer_max_size} members."
        )
    return ConsumerMember(member_id, rebalance_timeout_ms=e.rebalance_timeout_ms), True


def _check_epoch(member: ConsumerMember, e: ev.ConsumerGroupHeartbeat) -> None:
    """Kafka's `throwIfMemberEpochIsInvalid`: an epoch ahead of the member's is fenced; one
    behind only when it is the previous epoch and the member owns nothing it lost since
    (the response that told it about the new epoch was lost)."""
    if e.member_epoch > member.member_epoch:
        raise HeartbeatError(
            E.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({e.member_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}).",
        )
    if e.member_epoch < member.member_epoch:
        owned_ok = e.owned is not None and pairs_of(e.owned) <= pairs_of(member.assigned)
        if e.member_epoch != member.previous_member_epoch or not owned_ok:
            raise HeartbeatError(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({e.member_epoch}) than "
                f"the one known by the group coordinator ({member.member_epoch}).",
            )


def _replace_static(
    group: ConsumerGroup, previous_id: str, member_id: str, e: ev.ConsumerGroupHeartbeat,
    r: Result,
) -> ConsumerMember:
    """A static member rejoining under a new member id takes over the assignment of its
    previous incarnation, if that one left with epoch -2; else the instance is in use."""
    previous = group.members[previous_id]
    if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise HeartbeatError(
            E.UNRELEASED_INSTANCE_ID,
            f"Static member {previous_id} with instance id {e.instance_id} is not released.",
        )
    target = group.target.get(previous_id)
    remove_member(group, previous_id, r)
    r.timers.append(Cancel(session_key(group.group_id, previous_id)))
    member = ConsumerMember(
        member_id,
        instance_id=e.instance_id,
        member_epoch=previous.previous_member_epoch,
        previous_member_epoch=previous.previous_member_epoch,
        state=previous.state,
        assigned=previous.assigned,
        pending_revocation=previous.pending_revocation,
        subscribed_topic_names=previous.subscribed_topic_names,
        subscribed_topic_regex=previous.subscribed_topic_regex,
        server_assignor=previous.server_assignor,
    )
    if target is not None:
        group.target[member_id] = target
        r.records.append(cr.target_member_record(group.group_id, member_id, target))
    return member


def _update_member(member: ConsumerMember, e: ev.ConsumerGroupHeartbeat) -> None:
    if e.instance_id is not None:
        member.instance_id = e.instance_id
    if e.rack_id is not None:
        member.rack_id = e.rack_id
    if e.rebalance_timeout_ms != -1:
        member.rebalance_timeout_ms = e.rebalance_timeout_ms
    # A member subscribes by names or by a regular expression; an empty one is none.
    if e.subscribed_topic_names is not None:
        member.subscribed_topic_names = tuple(sorted(e.subscribed_topic_names))
    if e.subscribed_topic_regex is not None:
        member.subscribed_topic_regex = e.subscribed_topic_regex or None
    if e.server_assignor is not None:
        member.server_assignor = e.server_assignor
    member.client_id = e.client_id
    member.client_host = e.client_host
    member.describable_regex_topics = _describable_matches(member, e)
    if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        member.member_epoch = member.previous_member_epoch


def _describable_matches(
    member: ConsumerMember, e: ev.ConsumerGroupHeartbeat
) -> frozenset[str] | None:
    """The topics the member's regular expression matches among those its principal may
    describe now (KIP-848 resolves a regex for the member's principal): a topic it may not
    describe is never assigned to it, and one whose ACL is added is picked up at its next
    heartbeat."""
    if e.may_describe is None or member.subscribed_topic_regex is None:
        return None
    pattern = compile_regex(member.subscribed_topic_regex)
    return frozenset(t for t in e.topics if pattern.fullmatch(t) and e.may_describe(t))


def _snapshot_member(member: ConsumerMember) -> ConsumerMember:
    return ConsumerMember(**{f: getattr(member, f) for f in ConsumerMember.__slots__})


def _metadata_of(m: ConsumerMember) -> tuple[object, ...]:
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            *_subscription_of(m))


def _subscription_of(m: ConsumerMember) -> tuple[object, ...]:
    return (m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor)


def _current_of(m: ConsumerMember) -> tuple[object, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)


def refresh_subscriptions(group: ConsumerGroup, topics: TopicsImage) -> bool:
    """Resolve the members' regular expressions and compare the subscribed topics'
    partition counts with those of the last group epoch: True when they changed."""
    patterns = {m.subscribed_topic_regex for m in group.members.values()}
    group.resolved_regex = {
        p: tuple(sorted(t for t in topics if compile_regex(p).fullmatch(t)))
        for p in patterns
        if p is not None
    }
    subscribed = group.subscribed_topics(topics)
    group.topic_names.update((topics[t].topic_id, t) for t in subscribed)
    image = tuple(sorted((t, topics[t].partitions) for t in subscribed))
    if image == group.subscription_image:
        return False
    group.subscription_image = image
    return True


def compute_target(
    group: ConsumerGroup, topics: TopicsImage, cfg: GroupConfig, r: Result
) -> None:
    assignor = ASSIGNORS[group_assignor(group, cfg)]
    subscriptions = {
        m.member_id: member_topics(m, group.resolved_regex, topics)
        for m in group.members.values()
    }
    target = assignor(subscriptions, topics, group.target)
    for member_id, assignment in target.items():
        if group.target.get(member_id) != assignment:
            r.records.append(cr.target_member_record(group.group_id, member_id, assignment))
    group.target = target
    group.assignment_epoch = group.group_epoch
    r.records.append(cr.target_epoch_record(group))


def group_assignor(group: ConsumerGroup, cfg: GroupConfig) -> str:
    """The assignor most members ask for, else the first of group.consumer.assignors."""
    votes = Counter(
        m.server_assignor for m in group.members.values() if m.server_assignor is not None
    )
    if votes:
        return max(sorted(votes), key=lambda name: votes[name])
    return cfg.consumer_assignors[0]


def _schedule_timers(
    group: ConsumerGroup,
    member: ConsumerMember,
    before: ConsumerMember,
    now_ms: int,
    cfg: GroupConfig,
    r: Result,
) -> None:
    schedule_consumer_session(group.group_id, member.member_id, now_ms, cfg, r)
    key = revocation_key(group.group_id, member.member_id)
    revoking = member.state is MemberState.UNREVOKED_PARTITIONS
    if revoking and before.state is not MemberState.UNREVOKED_PARTITIONS:
        r.timers.append(
            Schedule(
                key,
                now_ms + max(member.rebalance_timeout_ms, 0),
                ev.ConsumerRevocationTimeout(group.group_id, member.member_id,
                                             member.member_epoch),
            )
        )
    elif not revoking and before.state is MemberState.UNREVOKED_PARTITIONS:
        r.timers.append(Cancel(key))


def schedule_consumer_session(
    group_id: str, member_id: str, now_ms: int, cfg: GroupConfig, r: Result,
    timeout_ms: int | None = None,
) -> None:
    """(Re)start a member's session: group.consumer.session.timeout.ms, or a classic
    member's own session timeout."""
    r.timers.append(
        Schedule(
            session_key(group_id, member_id),
            now_ms + (cfg.consumer_session_timeout_ms if timeout_ms is None else timeout_ms),
            ev.ConsumerSessionTimeout(group_id, member_id),
        )
    )


def _wire_partitions(assignment: Assignment) -> list[AssignedPartitions]:
    return [
        {"topic_id": topic_id, "partitions": sorted(parts)}
        for topic_id, parts in sorted(assignment.items())
        if parts
    ]


# --- leaving ----------------------------------------------------------------------------


def _leave(
    state: GroupsState, e: ev.ConsumerGroupHeartbeat, cfg: GroupConfig, r: Result
) -> ConsumerGroupHeartbeatResponse:
    group = state.consumer_groups.get(e.group_id)
    member = group.members.get(e.member_id) if group is not None else None
    if group is None or member is None:
        raise HeartbeatError(
            E.UNKNOWN_MEMBER_ID, f"Member {e.member_id} is not a member of the group."
        )
    if e.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # A static member leaving for a while: it keeps its assignment until its session
        # ends or its instance rejoins.
        if member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member.previous_member_epoch = member.member_epoch
        member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
        r.records.append(cr.current_member_record(group.group_id, member))
    else:
        fence_member(group, member.member_id, r)
    return {
        "error_code": E.NONE,
        "error_message": None,
        "member_id": e.member_id,
        "member_epoch": e.member_epoch,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def remove_member(group: ConsumerGroup, member_id: str, r: Result) -> None:
    group.remove(member_id)
    r.records.extend(cr.member_tombstones(group.group_id, member_id))


def fence_member(group: ConsumerGroup, member_id: str, r: Result) -> None:
    """Remove a member (it left, timed out or was fenced) and bump the group epoch; the
    next heartbeat computes the new target assignment."""
    remove_member(group, member_id, r)
    r.timers.append(Cancel(session_key(group.group_id, member_id)))
    r.timers.append(Cancel(revocation_key(group.group_id, member_id)))
    group.group_epoch += 1
    r.records.append(cr.group_epoch_record(group))


# --- timers -----------------------------------------------------------------------------


def handle_session_timeout(
    state: GroupsState, e: ev.ConsumerSessionTimeout, cfg: GroupConfig
) -> Result:
    r = Result()
    group = state.consumer_groups.get(e.group_id)
    if group is not None and e.member_id in group.members:
        fence_member(group, e.member_id, r)
    return r


def handle_revocation_timeout(
    state: GroupsState, e: ev.ConsumerRevocationTimeout, cfg: GroupConfig
) -> Result:
    r = Result()
    group = state.consumer_groups.get(e.group_id)
    member = group.members.get(e.member_id) if group is not None else None
    if (
        group is not None
        and member is not None
        and member.state is MemberState.UNREVOKED_PARTITIONS
        and member.member_epoch == e.member_epoch
    ):
        fence_member(group, e.member_id, r)
    return r


# --- ConsumerGroupDescribe ---------------------------------------------------------------


def handle_describe(state: GroupsState, e: ev.ConsumerGroupDescribe, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.consumer_groups.get(e.group_id)
    if group is None:
        error = E.GROUP_ID_NOT_FOUND
        message = (
            f"Group {e.group_id} is not a consumer group."
            if e.group_id in state.groups and state.groups[e.group_id].members
            else f"Group {e.group_id} not found."
        )
        r.respond(e.token, {"error_code": error, "error_message": message,
                            "group_id": e.group_id, "group_state": "Dead", "group_epoch": -1,
                            "assignment_epoch": -1, "assignor_name": "", "members": []})
        return r

    def named(assignment: Assignment) -> list[TopicPartitions]:
        return [
            {"topic_id": t, "topic_name": e.topic_names.get(t, ""), "partitions": sorted(ps)}
            for t, ps in sorted(assignment.items(), key=lambda kv: e.topic_names.get(kv[0], ""))
            if ps
        ]

    members: list[Member] = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": {"topic_partitions": named(m.assigned)},
            "target_assignment": {"topic_partitions": named(group.target.get(m.member_id, {}))},
        }
        for m in group.members.values()
    ]
    body: DescribedGroup = {
        "error_code": E.NONE,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state().value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group_assignor(group, cfg),
        "members": members,
    }
    r.respond(e.token, body)
    return r


# --- what the classic APIs ask of consumer groups ----------------------------------------


def validate_offset_commit(
    state: GroupsState, group_id: str, member_id: str | None, member_epoch: int
) -> ErrorCode | None:
    """OffsetCommit (or OffsetFetch v9) to a consumer group, checked against the member's
    epoch (Kafka's `ConsumerGroup.validateOffsetCommit`); None when `group_id` is not a
    consumer group (the classic rules apply). An epoch of -1 without a member id commits
    as an admin or a simple consumer would, which only an empty group allows."""
    group = state.consumer_groups.get(group_id)
    if group is None:
        return None
    if member_epoch < 0 and not member_id:
        return E.NONE if not group.members else E.UNKNOWN_MEMBER_ID
    member = group.members.get(member_id or "")
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return E.STALE_MEMBER_EPOCH
    return E.NONE


def is_active_consumer_group(state: GroupsState, group_id: str) -> bool:
    group = state.consumer_groups.get(group_id)
    return group is not None and bool(group.members)


def delete_consumer_group(state: GroupsState, group_id: str, r: Result) -> ErrorCode | None:
    """DeleteGroups on a consumer group: NON_EMPTY_GROUP while it has members, else its
    records are removed (its offsets by the caller). None when it is not one."""
    group = state.consumer_groups.get(group_id)
    if group is None:
        return None
    if group.members:
        return E.NON_EMPTY_GROUP
    del state.consumer_groups[group_id]
    r.records.extend(cr.group_tombstones(group_id))
    return E.NONE


def listed_consumer_groups(state: GroupsState, states: set[str]) -> list[tuple[str, str]]:
    """(group id, state) of the consumer groups whose state is in `states` (all if empty)."""
    listed = []
    for group in state.consumer_groups.values():
        group_state = group.state().value
        if not states or group_state.lower() in states:
            listed.append((group.group_id, group_state))
    return listed
