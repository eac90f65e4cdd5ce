"""The group coordinator of one `__consumer_offsets` partition as pure functions (the
shape of Kafka's CoordinatorShard): `apply` an event, `replay` a record while loading,
`load_complete` once the partition has been read to its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logbus.coordinator.group import (
    consumer_heartbeat,
    consumer_records,
    membership,
    migration,
    offsets,
    rebalance,
    records,
)
from logbus.coordinator.group import events as ev
from logbus.coordinator.group.rebalance import compute_subscribed_topics, schedule_session
from logbus.coordinator.group.state import (
    EMPTY,
    STABLE,
    Group,
    GroupConfig,
    GroupsState,
    Member,
    Offsets,
    Result,
)

Handler = Callable[[GroupsState, Any, GroupConfig], Result]

HANDLERS: dict[type, Handler] = {
    ev.JoinGroup: membership.handle_join,
    ev.SyncGroup: membership.handle_sync,
    ev.Heartbeat: membership.handle_heartbeat,
    ev.LeaveGroup: membership.handle_leave,
    ev.SessionTimeout: rebalance.handle_session_timeout,
    ev.RebalanceTimeout: rebalance.handle_rebalance_timeout,
    ev.InitialRebalanceDelayExpired: rebalance.handle_initial_delay_expired,
    ev.OffsetCommit: offsets.handle_offset_commit,
    ev.TxnOffsetCommit: offsets.handle_txn_offset_commit,
    ev.TxnCompletion: offsets.handle_txn_completion,
    ev.OffsetFetch: offsets.handle_offset_fetch,
    ev.OffsetDelete: offsets.handle_offset_delete,
    ev.DeleteGroup: offsets.handle_delete_group,
    ev.DescribeGroup: offsets.handle_describe_group,
    ev.ListGroups: offsets.handle_list_groups,
    ev.ExpireOffsets: offsets.handle_expire_offsets,
    ev.ConsumerGroupHeartbeat: migration.handle_consumer_heartbeat,
    ev.ConsumerGroupDescribe: consumer_heartbeat.handle_describe,
    ev.ConsumerSessionTimeout: consumer_heartbeat.handle_session_timeout,
    ev.ConsumerRevocationTimeout: consumer_heartbeat.handle_revocation_timeout,
}


def apply(state: GroupsState, event: ev.Event, config: GroupConfig) -> Result:
    """Apply one event to the groups of one partition, updating `state` in place.

    Deterministic: the same state and event always give the same result. The runtime
    must call it for one partition at a time (no concurrent calls on one state).
    """
    if migration.handles(state, event, config):  # a classic member of a consumer group
        handler: Handler = migration.HANDLERS[type(event)]
        return handler(state, event, config)
    return HANDLERS[type(event)](state, event, config)


def replay(state: GroupsState, key: bytes, value: bytes | None) -> None:
    """Rebuild state from one `__consumer_offsets` record (while loading a partition).

    Raises `records.InvalidRecord` for a record that does not decode.
    """
    if len(key) >= 2 and int.from_bytes(key[:2], "big") in consumer_records.KEY_VERSIONS:
        consumer_records.replay(state.consumer_groups, key, value)
        return
    record = records.decode_record(key, value)
    if isinstance(record, records.OffsetCommit):
        group = state.groups.setdefault(record.group, Group(record.group))
        group.offsets[(record.topic, record.partition)] = record
    elif isinstance(record, records.OffsetDeleted):
        maybe_group = state.groups.get(record.group)
        if maybe_group is not None:
            maybe_group.offsets.pop((record.topic, record.partition), None)
            if not maybe_group.offsets and maybe_group.generation_id == 0:
                del state.groups[record.group]  # an offsets-only group, now gone
    elif isinstance(record, records.GroupMetadata):
        old = state.groups.get(record.group)
        state.groups[record.group] = _loaded_group(record, old.offsets if old else {})
    elif isinstance(record, records.GroupDeleted):
        old = state.groups.pop(record.group, None)
        if old is not None and old.offsets:
            # Offsets without group metadata: an offsets-only group, as Kafka loads it.
            state.groups[record.group] = Group(record.group, offsets=old.offsets)


def replay_transactional(
    state: GroupsState, producer_id: int, key: bytes, value: bytes | None
) -> None:
    """A record of a transactional batch (a TxnOffsetCommit) while loading: pending until
    the producer's marker is read (`offsets.complete_transaction`)."""
    record = records.decode_record(key, value)
    if isinstance(record, records.OffsetCommit):
        group = state.groups.setdefault(record.group, Group(record.group))
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        pending[(record.topic, record.partition)] = record
    else:  # not written by a coordinator; read as if it were not transactional
        replay(state, key, value)


def _loaded_group(record: records.GroupMetadata, offsets_: Offsets) -> Group:
    group = Group(
        group_id=record.group,
        state=STABLE if record.members else EMPTY,
        generation_id=record.generation,
        protocol_type=record.protocol_type or None,
        protocol_name=record.protocol,
        leader_id=record.leader,
        current_state_timestamp=(
            None if record.current_state_timestamp < 0 else record.current_state_timestamp
        ),
        offsets=offsets_,
    )
    for m in record.members:
        group.members[m.member_id] = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.session_timeout_ms,
            protocol_type=record.protocol_type,
            protocols=((record.protocol or "", m.subscription),),
            assignment=m.assignment,
        )
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    return group


def load_complete(state: GroupsState, now_ms: int, config: GroupConfig) -> Result:
    """After replaying the whole partition: start every member's session, and rebalance
    groups larger than group.max.size."""
    r = Result()
    for group in state.groups.values():
        group.subscribed_topics = compute_subscribed_topics(group)
        for member in group.members.values():
            schedule_session(group, member, now_ms, r)
        if group.is_(STABLE) and len(group.members) > config.max_size:
            rebalance.prepare_rebalance(group, now_ms, config, r)
    for consumer_group in state.consumer_groups.values():
        for member_id, consumer_member in consumer_group.members.items():
            classic = consumer_member.uses_classic_protocol
            consumer_heartbeat.schedule_consumer_session(
                consumer_group.group_id, member_id, now_ms, config, r,
                consumer_member.classic_session_timeout_ms if classic else None,
            )
    return r
