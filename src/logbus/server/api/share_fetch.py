"""Share consumption (KIP-932): ShareFetch v0-1 and ShareAcknowledge v0-1 (version 1 adds
MaxRecords, BatchSize and the response's AcquisitionLockTimeoutMs).

Each request belongs to the member's share session with this broker (epoch 0 opens it, -1
is its last request, others must follow on); acknowledgements are applied before any
record is acquired. The partitions' state is the broker's `SharePartitionManager`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from logbus.coordinator.share.share_partition import AcknowledgementBatch
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from logbus.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from logbus.protocol.messages.share_fetch_request import ShareFetchRequest
from logbus.protocol.messages.share_fetch_response import ShareFetchResponse
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.api.share_groups import coordinator_error, share_groups
from logbus.server.api.share_state import ensure_share_state_topic
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.server.share.share_partition_manager import (
    PartitionFetch,
    SessionError,
    SharePartitionManager,
    ShareSession,
)

DEFAULT_MAX_RECORDS = 500  # ShareFetch v0 has no MaxRecords


def manager(ctx: RequestContext) -> SharePartitionManager:
    share = ctx.services.share_partitions
    assert share is not None, "the broker runs a share-partition manager once started"
    return share


class _Partitions:
    """A request's partitions by topic id, their names, and what each answers."""

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self.answers: dict[tuple[UUID, int], Body] = {}
        self.names: dict[UUID, str | None] = {}

    def name(self, topic_id: UUID) -> str | None:
        if topic_id not in self.names:
            self.names[topic_id] = self.ctx.services.metadata_cache.topic_name(topic_id)
        return self.names[topic_id]

    def answer(self, topic_id: UUID, index: int, **fields: object) -> Body:
        # records empty, never null: librdkafka reads a null record set as malformed
        body = self.answers.setdefault(
            (topic_id, index),
            {
                "partition_index": index, "error_code": ErrorCode.NONE, "error_message": None,
                "acknowledge_error_code": ErrorCode.NONE, "acknowledge_error_message": None,
                "current_leader": self.leader(topic_id, index), "records": b"",
                "acquired_records": [],
            },
        )
        body.update(fields)
        return body

    def leader(self, topic_id: UUID, index: int) -> Body:
        name = self.name(topic_id)
        state = self.ctx.services.metadata_cache.partition(name, index) if name else None
        if state is None:
            return {"leader_id": -1, "leader_epoch": -1}
        return {"leader_id": state.leader, "leader_epoch": state.leader_epoch}

    def check(self, topic_id: UUID, index: int) -> str | None:
        """The topic's name, or None once the partition answered an error."""
        name = self.name(topic_id)
        if name is None:
            self.answer(topic_id, index, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        acknowledge_error_code=ErrorCode.UNKNOWN_TOPIC_ID)
            return None
        if not self.ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
            self.answer(topic_id, index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        acknowledge_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            return None
        return name

    def responses(self) -> list[Body]:
        by_topic: dict[UUID, list[Body]] = {}
        for (topic_id, _), body in sorted(self.answers.items(), key=lambda kv: kv[0][1]):
            by_topic.setdefault(topic_id, []).append(body)
        return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


def _batches(raw: Sequence[Body]) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b["first_offset"], b["last_offset"], tuple(b["acknowledge_types"]))
        for b in raw
    ]


def _top_level_error(
    ctx: RequestContext, group_id: str | None, member_id: str | None, epoch: int
) -> ErrorCode:
    if not group_id or not member_id:
        return ErrorCode.INVALID_REQUEST
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if epoch != -1 and coordinator_error(ctx, group_id) == ErrorCode.NONE:
        # (a member that left closes its sessions afterwards, with epoch -1)
        # coordinated here: the member must be one (elsewhere the leader cannot tell)
        group = share_groups(ctx).groups.get(group_id)
        if group is None or member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


async def _acknowledge_all(
    ctx: RequestContext, parts: _Partitions, session: ShareSession, topics: Sequence[Any]
) -> None:
    share = manager(ctx)
    for topic in topics:
        for partition in topic["partitions"]:
            raw = partition["acknowledgement_batches"]
            if not raw:
                continue
            index = partition["partition_index"]
            name = parts.check(topic["topic_id"], index)
            if name is None:
                continue
            error = await share.acknowledge(
                session.group_id, session.member_id, name, index, _batches(raw)
            )
            parts.answer(topic["topic_id"], index, acknowledge_error_code=error)


# --- ShareFetch ---------------------------------------------------------------------------


async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    share = manager(ctx)
    lock_ms = share.settings().record_lock_duration_ms

    def error(code: ErrorCode) -> ShareFetchResponse:
        return {
            "throttle_time_ms": 0, "error_code": code, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": [],
        }

    group_id, member_id = request["group_id"], request["member_id"]
    epoch = request["share_session_epoch"]
    if (code := _top_level_error(ctx, group_id, member_id, epoch)) != ErrorCode.NONE:
        return error(code)
    assert group_id is not None and member_id is not None
    if (code := await ensure_share_state_topic(ctx)) != ErrorCode.NONE:
        return error(code)
    topics = request["topics"]
    has_acks = any(p["acknowledgement_batches"] for t in topics for p in t["partitions"])
    if epoch == 0 and has_acks:
        return error(ErrorCode.INVALID_REQUEST)
    if epoch == -1 and request["forgotten_topics_data"]:
        return error(ErrorCode.INVALID_REQUEST)
    try:
        session = share.open_session(group_id, member_id, epoch)
    except SessionError as exc:
        return error(exc.error)
    parts = _Partitions(ctx)
    await _acknowledge_all(ctx, parts, session, topics)
    if epoch == -1:
        share.close_session(session)
        return {**error(ErrorCode.NONE), "responses": parts.responses()}  # type: ignore[typeddict-item]
    ids = _update_session(ctx, parts, session, request)
    wanted = sorted(p for p in session.partitions if p[0] in ids)
    if epoch == 0:
        await share.refresh(group_id, wanted)
    max_records = request.get("max_records", DEFAULT_MAX_RECORDS) if ctx.version >= 1 else (
        DEFAULT_MAX_RECORDS
    )
    results = await share.fetch(
        group_id, member_id, wanted, max_records, request["max_bytes"],
        0 if has_acks else request["max_wait_ms"],
    )
    for (name, index), result in results.items():
        _answer_fetch(parts, ids[name], index, result)
    return {**error(ErrorCode.NONE), "responses": parts.responses()}  # type: ignore[typeddict-item]


def _update_session(
    ctx: RequestContext, parts: _Partitions, session: ShareSession, request: ShareFetchRequest
) -> dict[str, UUID]:
    """Add the request's partitions to the session and remove its forgotten ones; the topic
    ids of the session's topics (by name)."""
    forgotten = [
        (name, index)
        for t in request["forgotten_topics_data"]
        if (name := parts.name(t["topic_id"])) is not None
        for index in t["partitions"]
    ]
    manager(ctx).forget(session, forgotten)
    ids: dict[str, UUID] = {}
    for topic in request["topics"]:
        for partition in topic["partitions"]:
            index = partition["partition_index"]
            name = parts.check(topic["topic_id"], index)
            if name is not None and (name, index) not in forgotten:
                session.partitions.add((name, index))
                ids[name] = topic["topic_id"]
    for name, _ in session.partitions:
        if name not in ids:
            meta = ctx.services.metadata_cache.topics.get(name)
            if meta is not None:
                ids[name] = meta.topic_id
    return ids


def _answer_fetch(parts: _Partitions, topic_id: UUID, index: int, result: PartitionFetch) -> None:
    if result.error != ErrorCode.NONE:
        parts.answer(topic_id, index, error_code=result.error)
        return
    if not result.acquired:
        return
    parts.answer(
        topic_id, index,
        records=result.records,
        acquired_records=[
            {"first_offset": r.first_offset, "last_offset": r.last_offset,
             "delivery_count": r.delivery_count}
            for r in result.acquired
        ],
    )


# --- ShareAcknowledge ---------------------------------------------------------------------


async def handle_share_acknowledge(
    ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    share = manager(ctx)

    def error(code: ErrorCode) -> ShareAcknowledgeResponse:
        return {
            "throttle_time_ms": 0, "error_code": code, "error_message": None,
            "responses": [], "node_endpoints": [],
        }

    group_id, member_id = request["group_id"], request["member_id"]
    epoch = request["share_session_epoch"]
    if (code := _top_level_error(ctx, group_id, member_id, epoch)) != ErrorCode.NONE:
        return error(code)
    assert group_id is not None and member_id is not None
    if (code := await ensure_share_state_topic(ctx)) != ErrorCode.NONE:
        return error(code)
    if epoch == 0:
        return error(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    try:
        session = share.open_session(group_id, member_id, epoch)
    except SessionError as exc:
        return error(exc.error)
    parts = _Partitions(ctx)
    await _acknowledge_all(ctx, parts, session, request["topics"])
    if epoch == -1:
        share.close_session(session)
    responses = [
        {
            "topic_id": t["topic_id"],
            "partitions": [
                {
                    "partition_index": p["partition_index"],
                    "error_code": p["acknowledge_error_code"],
                    "error_message": None,
                    "current_leader": p["current_leader"],
                }
                for p in t["partitions"]
            ],
        }
        for t in parts.responses()
    ]
    return {**error(ErrorCode.NONE), "responses": responses}  # type: ignore[typeddict-item]


HANDLERS = [
    ApiHandler(ApiKey.SHARE_FETCH, 0, 1, handle_share_fetch),
    ApiHandler(ApiKey.SHARE_ACKNOWLEDGE, 0, 1, handle_share_acknowledge),
]
