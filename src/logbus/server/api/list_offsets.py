"""ListOffsets v0-10: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local
(-4, v8+), latest tiered (-5, v9+; no tiered storage here, so none), and the first offset
whose timestamp is at or after a given time, found through the time index. Version 0
answers with Kafka's old list of segment offsets written before a time.

A consumer's answers stop at the high watermark, or at the last stable offset with
isolation_level 1 (read_committed): LATEST is then the LSO, and a timestamp found at or
after it answers none."""

from __future__ import annotations

from collections import Counter

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.list_offsets_request import ListOffsetsRequest
from logbus.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.replica.partition import Partition, PartitionError
from logbus.server.security.acl import AclOperation, ResourceType

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1


def _lookup(
    part: Partition,
    timestamp: int,
    consumer: bool,
    read_committed: bool,
) -> tuple[int, int]:
    """(offset, timestamp) for one request, (-1, -1) when no such offset exists."""
    log = part.log
    if not consumer:
        bound = log.log_end_offset
    elif read_committed:
        bound = log.last_stable_offset
    else:
        bound = part.high_watermark
    if timestamp == LATEST:
        return bound, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    if consumer and found.offset >= bound:
        return -1, -1
    return found.offset, found.timestamp


def _offsets_before(part: Partition, timestamp: int, max_num: int, consumer: bool) -> list[int]:
    """ListOffsets v0: up to `max_num` offsets, newest first, of the segments last written
    before `timestamp` (latest: the log end too; earliest: the log start offset)."""
    log = part.log
    if timestamp == EARLIEST:
        return [log.log_start_offset][:max_num]
    end = part.high_watermark if consumer else log.log_end_offset
    candidates = [(s.base_offset, s.last_modified_ms) for s in log.segments]
    if timestamp == LATEST:
        candidates.append((end, timestamp))
    offsets = sorted(
        {
            max(o, log.log_start_offset)
            for o, mtime in candidates
            if timestamp == LATEST or mtime <= timestamp
        },
        reverse=True,
    )
    return offsets[: max(0, max_num)]


async def handle_list_offsets(
    ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    replica_manager = ctx.services.replica_manager
    consumer = request["replica_id"] == CONSUMER_REPLICA_ID
    read_committed = request["isolation_level"] == READ_COMMITTED
    topics: list[ListOffsetsTopicResponse] = []
    describable = ctx.authorized(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (t["name"] for t in request["topics"])
    )
    for topic in request["topics"]:
        name = topic["name"]
        counts = Counter(p["partition_index"] for p in topic["partitions"])
        duplicates = {index for index, n in counts.items() if n > 1}
        partitions: list[ListOffsetsPartitionResponse] = []
        for req in topic["partitions"]:
            index = req["partition_index"]
            entry: ListOffsetsPartitionResponse = {
                "partition_index": index,
                "error_code": ErrorCode.NONE,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            partitions.append(entry)
            if name not in describable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if index in duplicates:
                entry["error_code"] = ErrorCode.INVALID_REQUEST
                continue
            part = replica_manager.partition(name, index)
            if part is None:
                entry["error_code"] = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if ctx.services.metadata_cache.partition(name, index) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            try:
                part.ensure_leader()
                part.check_leader_epoch(req["current_leader_epoch"])
            except PartitionError as exc:
                entry["error_code"] = exc.error
                continue
            timestamp = req["timestamp"]
            if timestamp == MAX_TIMESTAMP and ctx.version < 7:
                entry["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                continue
            if ctx.version == 0:
                entry["old_style_offsets"] = _offsets_before(
                    part, timestamp, req["max_num_offsets"], consumer
                )
                continue
            offset, found_ts = _lookup(part, timestamp, consumer, read_committed)
            entry.update(
                {
                    "offset": offset,
                    "timestamp": found_ts,
                    "leader_epoch": part.leader_epoch if offset >= 0 else -1,
                }
            )
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS = [ApiHandler(ApiKey.LIST_OFFSETS, 0, 10, handle_list_offsets)]
