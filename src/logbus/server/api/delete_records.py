"""DeleteRecords v0-2 (KIP-107): move a partition's log start offset forward.

Per partition, as Kafka's `ReplicaManager.deleteRecords` answers: `offset` -1 means the
high watermark; an offset above the high watermark (or negative) is OFFSET_OUT_OF_RANGE; a
topic whose cleanup.policy lacks "delete" is POLICY_VIOLATION; a partition led elsewhere is
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION. The answer carries the
new low watermark (the log start offset). The new start offset is checkpointed before the
answer, so a crash cannot bring deleted records back; whole segments below it are deleted
by the next retention check.
"""

from __future__ import annotations

import asyncio

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.delete_records_request import DeleteRecordsRequest
from logbus.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.replica.partition import PartitionError
from logbus.server.security.acl import AclOperation, ResourceType


def _delete_one(ctx: RequestContext, topic: str, index: int, offset: int) -> tuple[ErrorCode, int]:
    part = ctx.services.replica_manager.partition(topic, index)
    if part is None:
        known = ctx.services.metadata_cache.partition(topic, index) is not None
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            -1,
        )
    try:
        return ErrorCode.NONE, part.delete_records_on_leader(offset)
    except PartitionError as exc:
        return exc.error, -1


async def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics: list[DeleteRecordsTopicResult] = []
    changed = False
    deletable = ctx.authorized(
        AclOperation.DELETE, ResourceType.TOPIC, (t["name"] for t in request["topics"])
    )
    for topic in request["topics"]:
        partitions: list[DeleteRecordsPartitionResult] = []
        for p in topic["partitions"]:
            if topic["name"] in deletable:
                error, low_watermark = _delete_one(
                    ctx, topic["name"], p["partition_index"], p["offset"]
                )
            else:
                error, low_watermark = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
            changed = changed or error == ErrorCode.NONE
            partitions.append(
                {
                    "partition_index": p["partition_index"],
                    "low_watermark": low_watermark,
                    "error_code": error,
                }
            )
        topics.append({"name": topic["name"], "partitions": partitions})
    if changed:
        await asyncio.to_thread(ctx.services.log_manager.checkpoint_log_start_offsets)
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS = [ApiHandler(ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records)]
