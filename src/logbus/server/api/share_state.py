"""The share coordinator's APIs (KIP-932), sent by share partitions' leaders and by group
coordinators: ReadShareGroupState v0, WriteShareGroupState v0 and InitializeShareGroupState v0
(the leaders'), ReadShareGroupStateSummary v0 and DeleteShareGroupState v0 (what a group
coordinator asks to describe and delete a share group's offsets), answered from
`__share_group_state` by the broker's `ShareCoordinator`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from logbus.controller.controller import NewTopic
from logbus.coordinator.share.share_partition import RecordState, StateBatch
from logbus.coordinator.share.state_coordinator import ShareCoordinator, ShareStateError
from logbus.coordinator.share.state_records import SHARE_STATE_TOPIC, SavedState, ShareStateKey
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.delete_share_group_state_request import (
    DeleteShareGroupStateRequest,
)
from logbus.protocol.messages.delete_share_group_state_response import (
    DeleteShareGroupStateResponse,
)
from logbus.protocol.messages.initialize_share_group_state_request import (
    InitializeShareGroupStateRequest,
)
from logbus.protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
)
from logbus.protocol.messages.read_share_group_state_request import ReadShareGroupStateRequest
from logbus.protocol.messages.read_share_group_state_response import (
    ReadShareGroupStateResponse,
)
from logbus.protocol.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from logbus.protocol.messages.read_share_group_state_summary_response import (
    ReadShareGroupStateSummaryResponse,
)
from logbus.protocol.messages.write_share_group_state_request import (
    WriteShareGroupStateRequest,
)
from logbus.protocol.messages.write_share_group_state_response import (
    WriteShareGroupStateResponse,
)
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.api.topic_admin import create_topic_for_client
from logbus.server.security.acl import AclOperation, ResourceType


async def ensure_share_state_topic(ctx: RequestContext) -> ErrorCode:
    """Create `__share_group_state` on first use (share.coordinator.state.topic.*), as
    `__consumer_offsets` is; COORDINATOR_NOT_AVAILABLE while it cannot be."""
    if SHARE_STATE_TOPIC in ctx.services.metadata_cache.topics:
        return ErrorCode.NONE
    cfg = ctx.config
    result = await create_topic_for_client(
        ctx,
        NewTopic(
            SHARE_STATE_TOPIC,
            cast(int, cfg.get("share.coordinator.state.topic.num.partitions")),
            cast(int, cfg.get("share.coordinator.state.topic.replication.factor")),
            {},
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "min.insync.replicas": str(cfg.get("share.coordinator.state.topic.min.isr")),
                "segment.bytes": str(cfg.get("share.coordinator.state.topic.segment.bytes")),
                "unclean.leader.election.enable": "false",
            },
        ),
    )
    if result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        return ErrorCode.NONE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def coordinator(ctx: RequestContext) -> ShareCoordinator:
    share = ctx.services.share_state
    assert share is not None, "the broker runs a share coordinator once started"
    return share


def _allowed(ctx: RequestContext) -> bool:
    return ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)


async def _each_partition(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    defaults: Body,
    answer: Callable[[ShareStateKey, Any], Awaitable[Body]],
) -> list[Body]:
    """Each partition of a share-state request through the share coordinator: `answer`
    (the partition's key and request entry) gives what its result adds to `defaults`; a
    refused or failed partition keeps `defaults` with its error code."""
    results: list[Body] = []
    for topic in topics:
        partitions: list[Body] = []
        for partition in topic["partitions"]:
            key = ShareStateKey(group_id, topic["topic_id"], partition["partition"])
            body: Body = {"partition": key.partition, "error_code": ErrorCode.NONE,
                          "error_message": None, **defaults}
            try:
                if not _allowed(ctx):
                    raise ShareStateError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                body.update(await answer(key, partition))
            except ShareStateError as exc:
                body["error_code"] = exc.error
            partitions.append(body)
        results.append({"topic_id": topic["topic_id"], "partitions": partitions})
    return results


async def handle_read_share_group_state(
    ctx: RequestContext, request: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    share = coordinator(ctx)

    async def answer(key: ShareStateKey, _partition: Any) -> Body:
        state = share.read(key)
        if state is None:
            return {}
        return {
            "state_epoch": state.state_epoch,
            "start_offset": state.start_offset,
            "state_batches": [
                {"first_offset": b.first_offset, "last_offset": b.last_offset,
                 "delivery_state": int(b.state), "delivery_count": b.delivery_count}
                for b in state.batches
            ],
        }

    defaults: Body = {"state_epoch": 0, "start_offset": -1, "state_batches": []}
    results = await _each_partition(ctx, request["group_id"], request["topics"], defaults, answer)
    return {"results": results}  # type: ignore[typeddict-item]


async def _write_each(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    state_of: Callable[[Any], SavedState],
) -> list[Body]:
    """Write each partition's state (`state_of` its request entry) through the share
    coordinator: an error code per partition (an unknown delivery state is
    INVALID_REQUEST), nothing written where a check fails."""
    share = coordinator(ctx)

    async def answer(key: ShareStateKey, partition: Any) -> Body:
        try:
            state = state_of(partition)
        except ValueError as exc:  # an unknown delivery state
            raise ShareStateError(ErrorCode.INVALID_REQUEST) from exc
        await share.write(key, state)
        return {}

    return await _each_partition(ctx, group_id, topics, {}, answer)


async def handle_write_share_group_state(
    ctx: RequestContext, request: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    def state_of(partition: Any) -> SavedState:
        batches = [
            StateBatch(b["first_offset"], b["last_offset"],
                       RecordState(b["delivery_state"]), b["delivery_count"])
            for b in partition["state_batches"]
        ]
        return SavedState(
            partition["start_offset"], partition["state_epoch"], batches,
            partition["leader_epoch"],
        )

    results = await _write_each(ctx, request["group_id"], request["topics"], state_of)
    return {"results": results}  # type: ignore[typeddict-item]


async def handle_initialize_share_group_state(
    ctx: RequestContext, request: InitializeShareGroupStateRequest
) -> InitializeShareGroupStateResponse:
    def state_of(partition: Any) -> SavedState:
        return SavedState(partition["start_offset"], partition["state_epoch"], [], -1)

    results = await _write_each(ctx, request["group_id"], request["topics"], state_of)
    return {"results": results}  # type: ignore[typeddict-item]


async def handle_read_share_group_state_summary(
    ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    """Each partition's state epoch, leader epoch and start offset, without its in-flight
    records (-1 for a partition with no state)."""
    share = coordinator(ctx)

    async def answer(key: ShareStateKey, _partition: Any) -> Body:
        state = share.read(key)
        if state is None:
            return {}
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset}

    defaults: Body = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}
    results = await _each_partition(ctx, request["group_id"], request["topics"], defaults, answer)
    return {"results": results}  # type: ignore[typeddict-item]


async def handle_delete_share_group_state(
    ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    share = coordinator(ctx)

    async def answer(key: ShareStateKey, _partition: Any) -> Body:
        await share.delete(key)
        return {}

    results = await _each_partition(ctx, request["group_id"], request["topics"], {}, answer)
    return {"results": results}  # type: ignore[typeddict-item]


HANDLERS = [
    ApiHandler(ApiKey.READ_SHARE_GROUP_STATE, 0, 0, handle_read_share_group_state),
    ApiHandler(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 0, handle_write_share_group_state),
    ApiHandler(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0, handle_initialize_share_group_state),
    ApiHandler(
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 0, handle_read_share_group_state_summary
    ),
    ApiHandler(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0, handle_delete_share_group_state),
]
