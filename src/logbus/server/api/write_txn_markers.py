"""WriteTxnMarkers v0-1: a transaction coordinator ends a transaction in each of its
partitions (sent to every partition leader but the coordinator's own broker, whose
markers it appends directly).

For each marker, as Kafka's `handleWriteTxnMarkersRequest`: `server/txn_marker_writer.py`
appends the COMMIT or ABORT control batch to each partition as leader with the
coordinator's origin and waits as acks=-1 does (at most request.timeout.ms); the answer
is each partition's error code from it. Without CLUSTER_ACTION on the cluster every
partition is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from logbus.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.server.txn_marker_writer import append_markers
from logbus.types import TopicPartition


async def _write_marker(
    ctx: RequestContext, marker: WritableTxnMarker, timeout_ms: int
) -> WritableTxnMarkerResult:
    partitions = [
        TopicPartition(topic["name"], index)
        for topic in marker["topics"]
        for index in topic["partition_indexes"]
    ]
    answers = await append_markers(
        ctx.services.replica_manager,
        producer_id=marker["producer_id"],
        producer_epoch=marker["producer_epoch"],
        coordinator_epoch=marker["coordinator_epoch"],
        committed=marker["transaction_result"],
        partitions=partitions,
        timeout_ms=timeout_ms,
    )
    by_topic: dict[str, WritableTxnMarkerTopicResult] = {}
    for tp in partitions:
        answer = by_topic.setdefault(tp.topic, {"name": tp.topic, "partitions": []})
        answer["partitions"].append({"partition_index": tp.partition, "error_code": answers[tp]})
    return {"producer_id": marker["producer_id"], "topics": list(by_topic.values())}


def _refused(marker: WritableTxnMarker) -> WritableTxnMarkerResult:
    return {
        "producer_id": marker["producer_id"],
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": i, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                    for i in topic["partition_indexes"]
                ],
            }
            for topic in marker["topics"]
        ],
    }


async def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    timeout_ms = ctx.config.request_timeout_ms
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {"markers": [_refused(marker) for marker in request["markers"]]}
    # Markers are appended in request order (each task appends before its first await);
    # their replication waits overlap.
    markers = await asyncio.gather(
        *(_write_marker(ctx, marker, timeout_ms) for marker in request["markers"])
    )
    return {"markers": list(markers)}


HANDLERS = [ApiHandler(ApiKey.WRITE_TXN_MARKERS, 0, 1, handle_write_txn_markers)]
