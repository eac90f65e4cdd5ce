"""A share group's offsets (KIP-932), as Kafka 4.1 serves them: DescribeShareGroupOffsets v0,
AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0 (what kafka-share-groups'
`--describe --offsets`, `--reset-offsets` and `--delete-offsets` send).

A share group's offset is each partition's share-partition start offset, which the share
coordinator keeps in `__share_group_state`. The group's coordinator answers: it reads the
start offsets from the share coordinators (ReadShareGroupStateSummary), writes new ones with
a newer state epoch and no records in flight (a partition's leader that still holds the old
state is fenced, and reads the new one when a member next opens a share session), and
deletes them (DeleteShareGroupState); a member that comes back to a partition without state
starts where the group's `share.auto.offset.reset` says.

As in Kafka: describing needs DESCRIBE on the group and on each topic (a partition with no
state, of an unknown topic too, has start offset -1); altering needs READ on the group and
each topic, deleting DELETE on the group and READ on each topic; the group must exist
(GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP). A share group exists while its
coordinator knows it, or, as membership is not kept across coordinator moves, while the
share coordinators keep state for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from logbus.client.requests.share_state import StateSummary
from logbus.coordinator.share.state_coordinator import ShareStateError
from logbus.coordinator.share.state_records import SavedState, ShareStateKey
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
)
from logbus.protocol.messages.alter_share_group_offsets_response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from logbus.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
)
from logbus.protocol.messages.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from logbus.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from logbus.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.share_groups import coordinator_error, share_groups
from logbus.server.api.share_state import ensure_share_state_topic
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.server.share.state_store import CoordinatorStateStore

NO_TOPIC_ID = UUID(int=0)
NO_OFFSET_INFO = "There is no offset information to delete."


def state_store(ctx: RequestContext) -> CoordinatorStateStore:
    store = ctx.services.share_state_store
    assert store is not None, "the broker runs a share-state store once started"
    return store


def topic_id(ctx: RequestContext, topic: str) -> UUID:
    meta = ctx.services.metadata_cache.topics.get(topic)
    return NO_TOPIC_ID if meta is None else meta.topic_id


def _group_error(
    ctx: RequestContext, group_id: str, summaries: Iterable[StateSummary]
) -> ErrorCode:
    """GROUP_ID_NOT_FOUND for a group neither coordinated here nor with any state among
    `summaries`; NON_EMPTY_GROUP while it has members."""
    group = share_groups(ctx).groups.get(group_id)
    if group is None:
        has_state = any(s.error == ErrorCode.NONE and s.start_offset >= 0 for s in summaries)
        return ErrorCode.NONE if has_state else ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE


# --- DescribeShareGroupOffsets ------------------------------------------------------------


def _partition(
    index: int, summary: StateSummary | None = None, error: ErrorCode = ErrorCode.NONE
) -> DescribeShareGroupOffsetsResponsePartition:
    # A share coordinator's error reads as "no offset", as an OffsetFetch without one does.
    found = summary if summary is not None and summary.error == ErrorCode.NONE else None
    return {
        "partition_index": index,
        "start_offset": -1 if found is None else found.start_offset,
        "leader_epoch": -1 if found is None else found.leader_epoch,
        "error_code": error,
        "error_message": None,
    }


async def _describe_all(
    ctx: RequestContext, group_id: str
) -> list[DescribeShareGroupOffsetsResponseTopic]:
    """Every partition the group has state for, of the topics the principal may describe."""
    topics = [
        meta for meta in ctx.services.metadata_cache.topics.values()
        if not meta.is_internal and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                  meta.name)
    ]
    keys = [
        ShareStateKey(group_id, meta.topic_id, p) for meta in topics for p in meta.partitions
    ]
    summaries = await state_store(ctx).summaries(keys)
    found: list[DescribeShareGroupOffsetsResponseTopic] = []
    for meta in sorted(topics, key=lambda m: m.name):
        partitions = [
            _partition(p, s) for p in sorted(meta.partitions)
            if (s := summaries[ShareStateKey(group_id, meta.topic_id, p)]).start_offset >= 0
        ]
        if partitions:
            found.append({"topic_name": meta.name, "topic_id": meta.topic_id,
                          "partitions": partitions})
    return found


async def _describe_topics(
    ctx: RequestContext, group: DescribeShareGroupOffsetsRequestGroup
) -> list[DescribeShareGroupOffsetsResponseTopic]:
    group_id = group["group_id"]
    asked = group["topics"] or []
    cache = ctx.services.metadata_cache.topics
    keys = [
        ShareStateKey(group_id, cache[t["topic_name"]].topic_id, p)
        for t in asked if t["topic_name"] in cache
        and ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t["topic_name"])
        for p in t["partitions"]
    ]
    summaries = await state_store(ctx).summaries(keys)
    found: list[DescribeShareGroupOffsetsResponseTopic] = []
    for topic in asked:
        name = topic["topic_name"]
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            partitions = [
                _partition(p, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic["partitions"]
            ]
            found.append({"topic_name": name, "topic_id": NO_TOPIC_ID, "partitions": partitions})
            continue
        tid = topic_id(ctx, name)
        partitions = [
            _partition(p, summaries.get(ShareStateKey(group_id, tid, p)))
            for p in topic["partitions"]
        ]
        found.append({"topic_name": name, "topic_id": tid, "partitions": partitions})
    return found


async def _describe_group(
    ctx: RequestContext, group: DescribeShareGroupOffsetsRequestGroup
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = group["group_id"]

    def failed(code: ErrorCode) -> DescribeShareGroupOffsetsResponseGroup:
        return {"group_id": group_id, "topics": [], "error_code": code, "error_message": None}

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if (code := coordinator_error(ctx, group_id)) != ErrorCode.NONE:
        return failed(code)
    topics = (
        await _describe_all(ctx, group_id)
        if group["topics"] is None
        else await _describe_topics(ctx, group)
    )
    return {"group_id": group_id, "topics": topics, "error_code": ErrorCode.NONE,
            "error_message": None}


async def handle_describe_share_group_offsets(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    groups = [await _describe_group(ctx, group) for group in request["groups"]]
    return {"throttle_time_ms": 0, "groups": groups}


# --- AlterShareGroupOffsets ---------------------------------------------------------------


def _alter_error(code: ErrorCode) -> AlterShareGroupOffsetsResponse:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}


def _checked_targets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest,
    results: dict[str, AlterShareGroupOffsetsResponseTopic],
) -> dict[ShareStateKey, tuple[str, int]]:
    """The partitions to move (key -> (topic, new start offset)); the others' errors go
    into `results` (topic -> its answer)."""
    targets: dict[ShareStateKey, tuple[str, int]] = {}
    cache = ctx.services.metadata_cache.topics
    for topic in request["topics"]:
        name = topic["topic_name"]
        meta = cache.get(name)
        answer = results.setdefault(
            name, {"topic_name": name, "topic_id": topic_id(ctx, name), "partitions": []}
        )
        for partition in topic["partitions"]:
            index, offset = partition["partition_index"], partition["start_offset"]
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or index not in meta.partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif offset < 0:
                error = ErrorCode.INVALID_REQUEST
            else:
                targets[ShareStateKey(request["group_id"], meta.topic_id, index)] = (name, offset)
                continue
            answer["partitions"].append(
                {"partition_index": index, "error_code": error, "error_message": None}
            )
    return targets


async def _move_start(
    ctx: RequestContext, key: ShareStateKey, topic: str, offset: int, summary: StateSummary
) -> AlterShareGroupOffsetsResponsePartition:
    error = summary.error
    if error == ErrorCode.NONE:
        try:
            await state_store(ctx).write(
                (key.group_id, topic, key.partition),
                SavedState(offset, summary.state_epoch + 1, [], -1),
            )
        except ShareStateError as exc:
            error = exc.error
    return {"partition_index": key.partition, "error_code": error, "error_message": None}


async def handle_alter_share_group_offsets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _alter_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _alter_error(ErrorCode.INVALID_GROUP_ID)
    if (code := coordinator_error(ctx, group_id)) != ErrorCode.NONE:
        return _alter_error(code)
    results: dict[str, AlterShareGroupOffsetsResponseTopic] = {}
    targets = _checked_targets(ctx, request, results)
    summaries = await state_store(ctx).summaries(list(targets))
    if (code := _group_error(ctx, group_id, summaries.values())) != ErrorCode.NONE:
        return _alter_error(code)
    if targets and await ensure_share_state_topic(ctx) != ErrorCode.NONE:
        return _alter_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    for key, (topic, offset) in targets.items():
        results[topic]["partitions"].append(
            await _move_start(ctx, key, topic, offset, summaries[key])
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": list(results.values())}


# --- DeleteShareGroupOffsets --------------------------------------------------------------


def _delete_error(code: ErrorCode) -> DeleteShareGroupOffsetsResponse:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}


def _topic_answer(
    name: str, tid: UUID, code: ErrorCode, message: str | None = None
) -> DeleteShareGroupOffsetsResponseTopic:
    return {"topic_name": name, "topic_id": tid, "error_code": code, "error_message": message}


async def handle_delete_share_group_offsets(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    group_id = request["group_id"]
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
        return _delete_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _delete_error(ErrorCode.INVALID_GROUP_ID)
    if (code := coordinator_error(ctx, group_id)) != ErrorCode.NONE:
        return _delete_error(code)
    answers: dict[str, DeleteShareGroupOffsetsResponseTopic] = {}
    candidates: dict[str, list[ShareStateKey]] = {}
    cache = ctx.services.metadata_cache.topics
    for topic in request["topics"]:
        name = topic["topic_name"]
        meta = cache.get(name)
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
            answers[name] = _topic_answer(name, NO_TOPIC_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif meta is None:
            answers[name] = _topic_answer(name, NO_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            candidates[name] = [ShareStateKey(group_id, meta.topic_id, p) for p in meta.partitions]
    summaries = await state_store(ctx).summaries([k for ks in candidates.values() for k in ks])
    if (code := _group_error(ctx, group_id, summaries.values())) != ErrorCode.NONE:
        return _delete_error(code)
    held = {
        name: [k for k in keys if summaries[k].start_offset >= 0]
        for name, keys in candidates.items()
    }
    deleted = await state_store(ctx).delete([k for keys in held.values() for k in keys])
    for name, keys in held.items():
        tid = cache[name].topic_id if name in cache else NO_TOPIC_ID
        if not keys:
            answers[name] = _topic_answer(
                name, tid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSET_INFO
            )
            continue
        errors = [deleted[k] for k in keys if deleted[k] != ErrorCode.NONE]
        answers[name] = _topic_answer(name, tid, errors[0] if errors else ErrorCode.NONE)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "responses": list(answers.values())}


HANDLERS = [
    ApiHandler(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 0, handle_describe_share_group_offsets),
    ApiHandler(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0, handle_alter_share_group_offsets),
    ApiHandler(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle_delete_share_group_offsets),
]
