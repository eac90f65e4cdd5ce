"""Fetch v0-17: reads bounded by the high watermark (or last stable offset), long poll
with `min_bytes`/`max_wait_ms`, `max_bytes` per partition and per response, topic ids
(v13+). Record data goes out as file slices, never decoded, except for the old versions
(v0-3, message formats 0 and 1), whose record batches are down-converted as Kafka does.

A fetch with a replica id (v15+: `ReplicaState`) is a follower's: it reads up to the log
end, its fetch offset moves the high watermark, and a follower whose last fetched epoch
diverged from this leader's log gets `diverging_epoch` instead of records (v12+).

Fetch sessions (KIP-227) are answered as sessionless: the response carries session id 0,
which tells the client to keep sending full fetch requests.
"""

from __future__ import annotations

import logging

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.fetch_request import FetchRequest
from logbus.records.legacy import downconvert_readable
from logbus.server.api import ApiHandler, Body, RequestContext
from logbus.server.replica.replica_manager import FetchRequestPartition, FetchResult
from logbus.server.security.acl import AclOperation, ResourceType

# Fetch v4 is the first that carries record batches (magic 2) as stored.
MAGIC_V2_FROM = 4
TOPIC_IDS_FROM = 13
DIVERGING_EPOCH_FROM = 12
REPLICA_STATE_FROM = 15
READ_COMMITTED = 1

logger = logging.getLogger(__name__)


DOWNCONVERT_FLOOR = 1 << 20


def _records(result: FetchResult, version: int, fetch_offset: int) -> tuple[ErrorCode, object]:
    """The partition's error and records. Down-conversion serves the batches before one
    it cannot read (stored data left corrupt by a disk fault or an older broker); a
    fetch that starts at such a batch gets CORRUPT_MESSAGE."""
    if result.records is None:
        return result.error, b""
    if version < MAGIC_V2_FROM:
        # at most the stored bytes' size (and 1 MiB) of messages: a compressed batch of a
        # million tiny records must not cost a million messages
        limit = max(result.records.size, DOWNCONVERT_FLOOR)
        magic = 0 if version < 2 else 1
        converted, fault = downconvert_readable(
            result.records.read(), magic, limit, fetch_offset
        )
        if fault is not None and not converted:
            logger.warning("Fetch v%d cannot down-convert stored records: %s", version, fault)
            return ErrorCode.CORRUPT_MESSAGE, b""
        return result.error, converted
    return result.error, result.records


def _aborted(result: FetchResult) -> list[Body]:
    return [
        {"producer_id": txn.producer_id, "first_offset": txn.first_offset}
        for txn in result.aborted_transactions or ()
    ]


def _partition_response(
    index: int, result: FetchResult, read_committed: bool, version: int, fetch_offset: int
) -> Body:
    error, records = _records(result, version, fetch_offset)
    body: Body = {
        "partition_index": index,
        "error_code": error,
        "high_watermark": result.high_watermark,
        "last_stable_offset": result.last_stable_offset,
        "log_start_offset": result.log_start_offset,
        "aborted_transactions": _aborted(result) if read_committed else None,
        "preferred_read_replica": -1,
        "records": records,
    }
    if result.diverging_epoch is not None and version >= DIVERGING_EPOCH_FROM:
        epoch, end_offset = result.diverging_epoch
        body["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
    return body


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> Body:
    replica_manager = ctx.services.replica_manager
    cache = ctx.services.metadata_cache
    version = ctx.version
    session_id, session_epoch = request["session_id"], request["session_epoch"]
    if session_id != 0:
        return {
            "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            "session_id": 0,
            "responses": [],
        }
    if session_epoch > 0:
        return {
            "error_code": ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            "session_id": 0,
            "responses": [],
        }
    read_committed = request["isolation_level"] == READ_COMMITTED
    if version >= REPLICA_STATE_FROM:
        state = request.get("replica_state") or {}
        replica_id = state.get("replica_id", -1)
        replica_epoch = state.get("replica_epoch", -1)
    else:
        replica_id, replica_epoch = request["replica_id"], -1
    # Authorization as Kafka's: a follower needs ClusterAction on the cluster (every
    # partition refused without it), a consumer Read on each topic.
    names = [
        cache.topic_name(t["topic_id"]) if version >= TOPIC_IDS_FROM else t["topic"]
        for t in request["topics"]
    ]
    if replica_id >= 0:
        follower_allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        readable = {n for n in names if n is not None} if follower_allowed else set()
    else:
        readable = ctx.authorized(
            AclOperation.READ, ResourceType.TOPIC, (n for n in names if n is not None)
        )
    refused = (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if replica_id >= 0
        else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    wanted: list[FetchRequestPartition] = []
    responses: list[Body] = []
    # Each requested partition in request order: where its answer goes, and the error it
    # gets without reading when this broker does not know it.
    planned: list[tuple[list[Body], int, int, ErrorCode | None]] = []
    for topic in request["topics"]:
        if version >= TOPIC_IDS_FROM:
            name = cache.topic_name(topic["topic_id"])
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name = topic["topic"]
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partitions: list[Body] = []
        responses.append(
            {"topic": topic["topic"], "topic_id": topic["topic_id"], "partitions": partitions}
        )
        for part in topic["partitions"]:
            index = part["partition"]
            if name is not None and name not in readable:
                planned.append((partitions, index, part["fetch_offset"], refused))
                continue
            if name is None or cache.partition(name, index) is None:
                planned.append((partitions, index, part["fetch_offset"], missing))
                continue
            planned.append((partitions, index, part["fetch_offset"], None))
            wanted.append(
                FetchRequestPartition(
                    name,
                    index,
                    part["fetch_offset"],
                    part["partition_max_bytes"],
                    part["current_leader_epoch"],
                    part["last_fetched_epoch"],
                    part["log_start_offset"],
                )
            )
    results = iter(
        await replica_manager.fetch(
            wanted,
            min(request["max_bytes"], ctx.config.fetch_max_bytes),  # as Kafka: fetch.max.bytes
            request["min_bytes"],
            request["max_wait_ms"],
            read_committed,
            replica_id,
            replica_epoch,
        )
    )
    for partitions, index, offset, error in planned:
        result = FetchResult(error) if error is not None else next(results)
        partitions.append(_partition_response(index, result, read_committed, version, offset))
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": 0,
        "responses": responses,
    }


HANDLERS = [ApiHandler(ApiKey.FETCH, 0, 17, handle_fetch)]
