"""Committed offsets and group administration: OffsetCommit, OffsetFetch, OffsetDelete,
DeleteGroups, DescribeGroups, ListGroups, and offsets expiration (KIP-211: since Kafka
2.1 a consumer group's offsets expire only once the group is Empty, or for topics the
group no longer subscribes to)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from logbus.coordinator.group import consumer_heartbeat, migration, records
from logbus.coordinator.group import events as ev
from logbus.coordinator.group.rebalance import schedule_session
from logbus.coordinator.group.state import (
    COMMIT_ERROR,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    GroupConfig,
    GroupsState,
    Result,
)
from logbus.protocol import ErrorCode
from logbus.protocol.messages.list_groups_response import ListedGroup
from logbus.protocol.messages.offset_commit_response import OffsetCommitResponse
from logbus.protocol.messages.offset_fetch_response import OffsetFetchResponsePartitions
from logbus.types import TopicPartition

E = ErrorCode
GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"

# --- OffsetCommit ----------------------------------------------------------------------


def handle_offset_commit(state: GroupsState, e: ev.OffsetCommit, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    consumer_error = consumer_heartbeat.validate_offset_commit(
        state, e.group_id, e.member_id, e.generation_id
    )
    if consumer_error is not None:  # KIP-848: the member epoch, not a generation
        group = group or Group(e.group_id)
        error = consumer_error
    elif group is None:
        if e.generation_id >= 0:
            # Not a group we know: a commit from a stale generation of a deleted group.
            r.respond(e.token, _commit_response(e, lambda _tp: E.ILLEGAL_GENERATION))
            return r
        # A "simple" consumer (assign(), no group management) only stores offsets.
        group = Group(e.group_id)
        error = _validate_commit(group, e)
    else:
        error = _validate_commit(group, e)
    if error is E.NONE:
        error = COMMIT_ERROR[group.state]
    if error is not E.NONE:
        r.respond(e.token, _commit_response(e, lambda tp: e.partition_errors.get(tp, error)))
        return r
    state.groups.setdefault(e.group_id, group)
    member = group.members.get(e.member_id)
    if member is not None and group.state in (STABLE, PREPARING):
        schedule_session(group, member, e.now_ms, r)
    errors: dict[TopicPartition, ErrorCode] = {}
    for tp, p, metadata in _storable(e, cfg, errors):
        commit = records.OffsetCommit(
            group=e.group_id,
            topic=tp.topic,
            partition=p.partition,
            offset=p.offset,
            leader_epoch=p.leader_epoch,
            metadata=metadata,
            commit_timestamp=p.commit_timestamp if p.commit_timestamp >= 0 else e.now_ms,
            expire_timestamp=_expire_timestamp(e),
        )
        group.offsets[tp] = commit
        r.records.append(records.offset_commit_record(commit))
    r.respond(e.token, _commit_response(e, errors.__getitem__))
    return r


def _storable(
    e: ev.OffsetCommit | ev.TxnOffsetCommit,
    cfg: GroupConfig,
    errors: dict[TopicPartition, ErrorCode],
) -> Iterator[tuple[TopicPartition, ev.PartitionCommit, str]]:
    """The partitions of a commit that may be stored, with their metadata; every partition
    gets its answer in `errors` (NONE for those yielded)."""
    for topic, partitions in e.topics:
        for p in partitions:
            tp = TopicPartition(topic, p.partition)
            metadata = p.metadata or ""
            if tp in e.partition_errors:
                errors[tp] = e.partition_errors[tp]
            elif len(metadata.encode()) > cfg.offset_metadata_max_bytes:
                errors[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                errors[tp] = E.NONE
                yield tp, p, metadata


def _validate_commit(group: Group, e: ev.OffsetCommit) -> ErrorCode:
    if group.is_(DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if e.generation_id >= 0 or e.member_id != "" or e.group_instance_id is not None:
        if group.is_static_member_fenced(e.group_instance_id, e.member_id):
            return E.FENCED_INSTANCE_ID
        if not group.has(e.member_id):
            return E.UNKNOWN_MEMBER_ID
        if e.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        return E.NONE
    # Generation -1 and no member: only an Empty group takes such "simple" commits.
    return E.NONE if group.is_(EMPTY) else E.UNKNOWN_MEMBER_ID


def _commit_response(
    e: ev.OffsetCommit | ev.TxnOffsetCommit, error_for: Callable[[TopicPartition], ErrorCode]
) -> OffsetCommitResponse:
    """OffsetCommit's answer (TxnOffsetCommit's has the same shape): each partition's error."""
    return {
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": error_for(TopicPartition(topic, p.partition)),
                    }
                    for p in partitions
                ],
            }
            for topic, partitions in e.topics
        ]
    }


# --- TxnOffsetCommit (KIP-98, KIP-447) ----------------------------------------------------


def handle_txn_offset_commit(
    state: GroupsState, e: ev.TxnOffsetCommit, cfg: GroupConfig
) -> Result:
    """Offsets committed inside a transaction: written now (a transactional batch of the
    producer), visible to OffsetFetch only once the transaction commits."""
    r = Result(producer_id=e.producer_id, producer_epoch=e.producer_epoch)
    group = state.groups.get(e.group_id) or Group(e.group_id)
    error = _validate_txn_commit(group, e)
    if error is not E.NONE:
        r.respond(e.token, _commit_response(e, lambda tp: e.partition_errors.get(tp, error)))
        return r
    state.groups.setdefault(e.group_id, group)
    errors: dict[TopicPartition, ErrorCode] = {}
    for tp, p, metadata in _storable(e, cfg, errors):
        commit = records.OffsetCommit(
            group=e.group_id,
            topic=tp.topic,
            partition=p.partition,
            offset=p.offset,
            leader_epoch=p.leader_epoch,
            metadata=metadata,
            commit_timestamp=e.now_ms,
            expire_timestamp=-1,
        )
        group.pending_txn_offsets.setdefault(e.producer_id, {})[tp] = commit
        r.records.append(records.offset_commit_record(commit))
    r.respond(e.token, _commit_response(e, errors.__getitem__))
    return r


def _validate_txn_commit(group: Group, e: ev.TxnOffsetCommit) -> ErrorCode:
    """Kafka's checks of a TxnOffsetCommit: a producer-only commit (generation -1) needs
    an Empty group; a member's needs its generation (v3+, KIP-447)."""
    if group.is_(DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if e.generation_id < 0 and group.is_(EMPTY):
        return E.NONE
    if e.member_id != "" and not group.has(e.member_id):
        return E.UNKNOWN_MEMBER_ID
    if group.is_static_member_fenced(e.group_instance_id, e.member_id):
        return E.FENCED_INSTANCE_ID
    if e.generation_id >= 0 and e.generation_id != group.generation_id:
        return E.ILLEGAL_GENERATION
    return E.NONE


def complete_transaction(state: GroupsState, producer_id: int, committed: bool) -> None:
    """A marker of `producer_id` in this partition: its pending offsets become the
    groups' committed offsets (COMMIT) or are dropped (ABORT)."""
    for group in state.groups.values():
        pending = group.pending_txn_offsets.pop(producer_id, None)
        if pending and committed and not group.is_(DEAD):
            group.offsets.update(pending)


def handle_txn_completion(state: GroupsState, e: ev.TxnCompletion, cfg: GroupConfig) -> Result:
    complete_transaction(state, e.producer_id, e.committed)
    return Result()


def has_pending_txn_offset(group: Group, tp: tuple[str, int]) -> bool:
    return any(tp in pending for pending in group.pending_txn_offsets.values())


# --- OffsetFetch -----------------------------------------------------------------------


def handle_offset_fetch(state: GroupsState, e: ev.OffsetFetch, cfg: GroupConfig) -> Result:
    r = Result()
    if e.member_id is not None or e.member_epoch >= 0:
        error = consumer_heartbeat.validate_offset_commit(
            state, e.group_id, e.member_id, e.member_epoch
        )
        if error is not None and error is not E.NONE:
            r.respond(e.token, {"group_id": e.group_id, "error_code": error, "topics": []})
            return r
    group = state.groups.get(e.group_id)
    offsets = {} if group is None or group.is_(DEAD) else group.offsets
    if e.topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in sorted(offsets):
            wanted.setdefault(topic, []).append(partition)
        topics = [(t, tuple(ps)) for t, ps in wanted.items()]
    else:
        topics = list(e.topics)
    r.respond(
        e.token,
        {
            "group_id": e.group_id,
            "error_code": E.NONE,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        _unstable(p)
                        if e.require_stable
                        and group is not None
                        and has_pending_txn_offset(group, (topic, p))
                        else _fetched(offsets.get((topic, p)), p)
                        for p in partitions
                    ],
                }
                for topic, partitions in topics
            ],
        },
    )
    return r


def _unstable(partition: int) -> OffsetFetchResponsePartitions:
    """KIP-447: a transactional commit for the partition is pending (require_stable)."""
    return {
        "partition_index": partition,
        "committed_offset": -1,
        "committed_leader_epoch": -1,
        "metadata": "",
        "error_code": E.UNSTABLE_OFFSET_COMMIT,
    }


def _fetched(commit: records.OffsetCommit | None, partition: int) -> OffsetFetchResponsePartitions:
    if commit is None:
        return {
            "partition_index": partition,
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": E.NONE,
        }
    return {
        "partition_index": partition,
        "committed_offset": commit.offset,
        "committed_leader_epoch": commit.leader_epoch,
        "metadata": commit.metadata,
        "error_code": E.NONE,
    }


# --- OffsetDelete / DeleteGroups / expiration --------------------------------------------


def handle_offset_delete(state: GroupsState, e: ev.OffsetDelete, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    top = E.NONE
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not e.group_id:
        top = E.INVALID_GROUP_ID
    elif group is None or group.is_(DEAD):
        top = E.GROUP_ID_NOT_FOUND
    elif not group.is_(EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        top = E.NON_EMPTY_GROUP
    else:
        deletable = []
        for topic, partitions in e.topics:
            for partition in partitions:
                if not group.is_(EMPTY) and group.is_subscribed_to(topic):
                    errors[(topic, partition)] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    errors[(topic, partition)] = E.NONE
                    deletable.append((topic, partition))
        _remove_offsets(state, group, deletable, r)
    r.respond(
        e.token,
        {
            "error_code": top,
            "topics": []
            if top is not E.NONE
            else [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "error_code": errors[(topic, p)]} for p in partitions
                    ],
                }
                for topic, partitions in e.topics
            ],
        },
    )
    return r


def _remove_offsets(
    state: GroupsState, group: Group, partitions: list[tuple[str, int]], r: Result
) -> None:
    """Tombstone the offsets, then retire the group if it is Empty and holds none."""
    for tp in partitions:
        if group.offsets.pop(tp, None) is not None:
            r.records.append(records.offset_tombstone(group.group_id, *tp))
    if group.is_(EMPTY) and not group.offsets:
        _retire(state, group, r)


def _retire(state: GroupsState, group: Group, r: Result) -> None:
    group.transition(DEAD, group.current_state_timestamp or 0)
    del state.groups[group.group_id]
    # Generation 0 never wrote group metadata: it only stored offsets.
    if group.generation_id > 0:
        r.records.append(records.group_tombstone(group.group_id))


def handle_delete_group(state: GroupsState, e: ev.DeleteGroup, cfg: GroupConfig) -> Result:
    r = Result()
    group = state.groups.get(e.group_id)
    consumer_error = consumer_heartbeat.delete_consumer_group(state, e.group_id, r)
    if consumer_error is not None and (consumer_error is not E.NONE or group is None):
        error = consumer_error
    elif group is None or group.is_(DEAD):
        error = E.GROUP_ID_NOT_FOUND
    elif not group.is_(EMPTY):
        error = E.NON_EMPTY_GROUP
    else:
        error = E.NONE
        for tp in sorted(group.offsets):
            r.records.append(records.offset_tombstone(group.group_id, *tp))
        group.offsets.clear()
        _retire(state, group, r)
    r.respond(e.token, {"group_id": e.group_id, "error_code": error})
    return r


INT64_MAX = 2**63 - 1


def _expire_timestamp(e: ev.OffsetCommit) -> int | None:
    """When an offset committed with an explicit retention (v2-v4) expires; a retention
    reaching past the largest int64 timestamp never expires (it is stored as that)."""
    if e.retention_time_ms < 0:
        return None
    return min(e.now_ms + e.retention_time_ms, INT64_MAX)


def handle_expire_offsets(state: GroupsState, e: ev.ExpireOffsets, cfg: GroupConfig) -> Result:
    r = Result()
    for group in list(state.groups.values()):
        if consumer_heartbeat.is_active_consumer_group(state, group.group_id):
            continue  # its members commit: offsets of a live group do not expire
        _remove_offsets(state, group, expired_offsets(group, e.now_ms, cfg.offsets_retention_ms), r)
    return r


def expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
    """Kafka's GroupMetadata.removeExpiredOffsets rules (KIP-211)."""

    def expired(commit: records.OffsetCommit, base_ms: int) -> bool:
        if commit.expire_timestamp is not None:  # explicit retention (OffsetCommit v2-v4)
            return now_ms >= commit.expire_timestamp
        return now_ms - base_ms >= retention_ms

    if group.protocol_type is None:
        # Offsets-only group: each offset expires a retention period after its commit.
        return sorted(tp for tp, c in group.offsets.items() if expired(c, c.commit_timestamp))
    if group.is_(EMPTY):
        # Counted from when the group became Empty (if that is known).
        return sorted(
            tp
            for tp, c in group.offsets.items()
            if expired(
                c,
                c.commit_timestamp
                if group.current_state_timestamp is None
                else group.current_state_timestamp,
            )
        )
    subscribed = group.subscribed_topics
    if (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.is_(STABLE)
        and subscribed is not None
    ):
        return sorted(
            tp
            for tp, c in group.offsets.items()
            if tp[0] not in subscribed and expired(c, c.commit_timestamp)
        )
    return []


# --- DescribeGroups / ListGroups -------------------------------------------------------


def handle_describe_group(state: GroupsState, e: ev.DescribeGroup, cfg: GroupConfig) -> Result:
    r = Result()
    consumer_group = migration.describe_as_classic(state, e.group_id, cfg)
    if consumer_group is not None:  # KIP-848: described in the classic shape
        r.respond(e.token, consumer_group)
        return r
    group = state.groups.get(e.group_id)
    if group is None or group.is_(DEAD):
        r.respond(
            e.token,
            {
                "error_code": E.NONE,
                "group_id": e.group_id,
                "group_state": DEAD.value,
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            },
        )
        return r
    stable = group.is_(STABLE) and group.protocol_name is not None
    r.respond(
        e.token,
        {
            "error_code": E.NONE,
            "group_id": group.group_id,
            "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    # Metadata and assignment are only meaningful once the group is Stable.
                    "member_metadata": (
                        m.metadata_for(group.protocol_name)
                        if stable and group.protocol_name is not None
                        else b""
                    ),
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in group.members.values()
            ],
        },
    )
    return r


def handle_list_groups(state: GroupsState, e: ev.ListGroups, cfg: GroupConfig) -> Result:
    r = Result()
    states = {s.lower() for s in e.states_filter}
    types = {t.lower() for t in e.types_filter}
    listed: list[ListedGroup] = []
    if not types or GROUP_TYPE_CLASSIC in types:
        for group in state.groups.values():
            if group.is_(DEAD) or (states and group.state.value.lower() not in states):
                continue
            if group.group_id in state.consumer_groups:
                continue  # the offsets of a consumer group, listed below
            listed.append(
                {
                    "group_id": group.group_id,
                    "protocol_type": group.protocol_type or "",
                    "group_state": group.state.value,
                    "group_type": GROUP_TYPE_CLASSIC,
                }
            )
    if not types or GROUP_TYPE_CONSUMER in types:
        listed.extend(
            {
                "group_id": group_id,
                "protocol_type": CONSUMER_PROTOCOL_TYPE,
                "group_state": group_state,
                "group_type": GROUP_TYPE_CONSUMER,
            }
            for group_id, group_state in consumer_heartbeat.listed_consumer_groups(state, states)
        )
    r.respond(e.token, {"error_code": E.NONE, "groups": listed})
    return r
