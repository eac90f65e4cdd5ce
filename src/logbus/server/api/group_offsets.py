"""Consumer-group offsets: OffsetCommit v2-9 (Kafka 4.0's baseline), OffsetFetch v1-9
(several groups per request from v8, KIP-709; `require_stable` from v7, KIP-447:
UNSTABLE_OFFSET_COMMIT for a partition with a transactional commit pending), OffsetDelete
v0 (KIP-496), TxnOffsetCommit v0-4 (KIP-98; the member's generation from v3, KIP-447).

Requests become events of `logbus.coordinator.group.events` for the broker's
`GroupCoordinatorRuntime`; partitions of unknown topics are rejected here with
UNKNOWN_TOPIC_OR_PARTITION (the core's `partition_errors` hook).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from logbus.coordinator.group import events as ev
from logbus.coordinator.group.runtime import CoordinatorError
from logbus.coordinator.group.state import Token
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.offset_commit_request import OffsetCommitRequest
from logbus.protocol.messages.offset_commit_response import OffsetCommitResponse
from logbus.protocol.messages.offset_delete_request import OffsetDeleteRequest
from logbus.protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponseTopic,
)
from logbus.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from logbus.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from logbus.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from logbus.protocol.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.group_membership import runtime
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.types import TopicPartition

# --- OffsetCommit ------------------------------------------------------------------------


def _known_partition(ctx: RequestContext, topic: str, partition: int) -> bool:
    meta = ctx.services.metadata_cache.topics.get(topic)
    return meta is not None and 0 <= partition < len(meta.partitions)


R = TypeVar("R")
CommitTopics = tuple[tuple[str, tuple[ev.PartitionCommit, ...]], ...]


def _commits(topics: Any, with_leader_epoch: bool) -> CommitTopics:
    """The request's offsets as events' (topic, partition commits), for OffsetCommit and
    TxnOffsetCommit alike (the leader epoch only in the versions that carry it)."""
    return tuple(
        (
            t["name"],
            tuple(
                ev.PartitionCommit(
                    partition=p["partition_index"],
                    offset=p["committed_offset"],
                    leader_epoch=p.get("committed_leader_epoch", -1) if with_leader_epoch else -1,
                    metadata=p["committed_metadata"],
                )
                for p in t["partitions"]
            ),
        )
        for t in topics
    )


def _partition_errors(ctx: RequestContext, topics: CommitTopics) -> dict[TopicPartition, ErrorCode]:
    """The partitions refused before the coordinator sees them: a topic the principal may
    not read (TOPIC_AUTHORIZATION_FAILED), an unknown partition."""
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (n for n, _ in topics))
    errors: dict[TopicPartition, ErrorCode] = {}
    for name, partitions in topics:
        for p in partitions:
            if name not in readable:
                errors[TopicPartition(name, p.partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known_partition(ctx, name, p.partition):
                errors[TopicPartition(name, p.partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return errors


def _require_group(ctx: RequestContext, operation: AclOperation, group_id: str) -> None:
    if not ctx.authorize(operation, ResourceType.GROUP, group_id):
        raise CoordinatorError(ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _every_partition(
    topics: CommitTopics, error: int, errors: dict[TopicPartition, ErrorCode] | None = None
) -> list[Any]:
    """The response's topics with `error` for each partition (or its own from `errors`)."""
    return [
        {
            "name": name,
            "partitions": [
                {
                    "partition_index": p.partition,
                    "error_code": (errors or {}).get(TopicPartition(name, p.partition), error),
                }
                for p in partitions
            ],
        }
        for name, partitions in topics
    ]


async def _submit_commit(
    ctx: RequestContext,
    group_id: str,
    topics: CommitTopics,
    errors: dict[TopicPartition, ErrorCode],
    event: Callable[..., ev.Answered[R]],
) -> R:
    """OffsetCommit's and TxnOffsetCommit's event handed to the group, once the principal
    may read the group: `event` has the API's own fields bound and gets those both share.
    Raises `CoordinatorError`."""
    _require_group(ctx, AclOperation.READ, group_id)

    def make(token: Token, now_ms: int) -> ev.Answered[R]:
        return event(
            token=token, now_ms=now_ms, group_id=group_id, topics=topics, partition_errors=errors
        )

    return await runtime(ctx).submit(group_id, make)


async def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    version = ctx.version
    group_id = request["group_id"]
    topics = _commits(request["topics"], version >= 6)
    errors = _partition_errors(ctx, topics)
    event = partial(
        ev.OffsetCommit,
        generation_id=request["generation_id_or_member_epoch"],
        member_id=request["member_id"],
        group_instance_id=request.get("group_instance_id") if version >= 7 else None,
        retention_time_ms=request.get("retention_time_ms", -1) if version <= 4 else -1,
    )
    try:
        body = await _submit_commit(ctx, group_id, topics, errors, event)
    except CoordinatorError as exc:
        body = {"topics": _every_partition(topics, exc.error)}
    return {"throttle_time_ms": 0, **body}


# --- TxnOffsetCommit ---------------------------------------------------------------------


async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    version = ctx.version
    group_id = request["group_id"]
    topics = _commits(request["topics"], version >= 2)
    errors = _partition_errors(ctx, topics)
    event = partial(
        ev.TxnOffsetCommit,
        producer_id=request["producer_id"],
        producer_epoch=request["producer_epoch"],
        generation_id=request.get("generation_id", -1) if version >= 3 else -1,
        member_id=request.get("member_id", "") if version >= 3 else "",
        group_instance_id=request.get("group_instance_id") if version >= 3 else None,
    )

    def answer(error: int) -> TxnOffsetCommitResponse:
        if error == ErrorCode.PRODUCER_FENCED and version < 3:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # KIP-588
        return {"throttle_time_ms": 0, "topics": _every_partition(topics, error, errors)}

    if not request["transactional_id"]:
        return answer(ErrorCode.INVALID_REQUEST)
    if not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request["transactional_id"]
    ):
        errors.clear()  # as Kafka: this refusal answers every partition, before the others
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        body = await _submit_commit(ctx, group_id, topics, errors, event)
    except CoordinatorError as exc:
        return answer(exc.error)
    return {"throttle_time_ms": 0, **body}


# --- OffsetFetch -------------------------------------------------------------------------


def _requested_topics(
    topics: list[OffsetFetchRequestTopic] | list[OffsetFetchRequestTopics] | None,
) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if topics is None:
        return None
    return tuple((t["name"], tuple(t["partition_indexes"])) for t in topics)


async def _fetch_group(
    ctx: RequestContext,
    group_id: str,
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None,
    require_stable: bool,
    member: tuple[str | None, int] = (None, -1),
) -> OffsetFetchResponseGroup:
    """One group's answer in the v8 shape (group_id, error_code, topics)."""

    def make(token: Token, now_ms: int) -> ev.OffsetFetch:
        return ev.OffsetFetch(
            token=token,
            now_ms=now_ms,
            group_id=group_id,
            topics=topics,
            require_stable=require_stable,
            member_id=member[0],
            member_epoch=member[1],
        )

    try:
        _require_group(ctx, AclOperation.DESCRIBE, group_id)
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        return {"group_id": group_id, "error_code": exc.error, "topics": []}
    return _describable_only(ctx, body, topics is None)


def _describable_only(
    ctx: RequestContext, body: OffsetFetchResponseGroup, all_topics: bool
) -> OffsetFetchResponseGroup:
    """As Kafka: a topic the principal may not describe is left out of an all-topics
    fetch, and answers TOPIC_AUTHORIZATION_FAILED when named."""
    found = body.get("topics") or []
    describable = ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (t["name"] for t in found)
    )
    if len(describable) == len({t["name"] for t in found}):
        return body
    topics: list[OffsetFetchResponseTopics] = []
    for topic in found:
        if topic["name"] in describable:
            topics.append(topic)
        elif not all_topics:
            refused: list[OffsetFetchResponsePartitions] = [
                {
                    "partition_index": p["partition_index"],
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                }
                for p in topic["partitions"]
            ]
            topics.append({"name": topic["name"], "partitions": refused})
    return {**body, "topics": topics}


async def handle_offset_fetch(
    ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    version = ctx.version
    require_stable = bool(request.get("require_stable")) if version >= 7 else False
    if version >= 8:
        groups = [
            await _fetch_group(
                ctx,
                g["group_id"],
                _requested_topics(g["topics"]),
                require_stable,
                (g.get("member_id"), g.get("member_epoch", -1)) if version >= 9 else (None, -1),
            )
            for g in request["groups"]
        ]
        return {"throttle_time_ms": 0, "groups": groups}
    topics = _requested_topics(request["topics"])
    body = await _fetch_group(ctx, request["group_id"], topics, require_stable)
    error = body["error_code"]
    if version < 2 and error != ErrorCode.NONE:
        # v0-v1 have no top-level error: every requested partition carries it.
        return {
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "metadata": "",
                            "error_code": error,
                        }
                        for p in partitions
                    ],
                }
                for name, partitions in topics or ()
            ]
        }
    return {"throttle_time_ms": 0, "error_code": error, "topics": body["topics"]}


# --- OffsetDelete ------------------------------------------------------------------------


async def handle_offset_delete(
    ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    group_id = request["group_id"]
    topics = tuple(
        (t["name"], tuple(p["partition_index"] for p in t["partitions"])) for t in request["topics"]
    )

    def make(token: Token, now_ms: int) -> ev.OffsetDelete:
        return ev.OffsetDelete(token=token, now_ms=now_ms, group_id=group_id, topics=topics)

    try:
        _require_group(ctx, AclOperation.DELETE, group_id)
    except CoordinatorError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.error, "topics": []}
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (n for n, _ in topics))
    refused: list[OffsetDeleteResponseTopic] = [
        {
            "name": name,
            "partitions": [
                {"partition_index": p, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                for p in partitions
            ],
        }
        for name, partitions in topics
        if name not in readable
    ]
    topics = tuple((name, partitions) for name, partitions in topics if name in readable)
    try:
        body = await runtime(ctx).submit(group_id, make)
    except CoordinatorError as exc:
        body = {"error_code": exc.error, "topics": []}
    if refused and body.get("error_code", ErrorCode.NONE) == ErrorCode.NONE:
        body = {**body, "topics": [*body.get("topics", []), *refused]}
    return {"throttle_time_ms": 0, **body}


HANDLERS = [
    ApiHandler(ApiKey.OFFSET_COMMIT, 2, 9, handle_offset_commit),
    ApiHandler(ApiKey.OFFSET_FETCH, 1, 9, handle_offset_fetch),
    ApiHandler(ApiKey.OFFSET_DELETE, 0, 0, handle_offset_delete),
    ApiHandler(ApiKey.TXN_OFFSET_COMMIT, 0, 4, handle_txn_offset_commit),
]
