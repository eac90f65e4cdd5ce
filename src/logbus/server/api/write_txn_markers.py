"""WriteTxnMarkers v0-1: a transaction coordinator ends a transaction in each of its
partitions (sent to every partition leader, this broker included).

For each marker and partition, as Kafka's `handleWriteTxnMarkersRequest`: a COMMIT or ABORT
control batch (the producer's id and epoch, the coordinator epoch in its value) is
appended as leader with the coordinator's origin, then the answer waits as acks=-1 does
until the high watermark passes it, at most request.timeout.ms. Per partition: NONE;
UNKNOWN_TOPIC_OR_PARTITION when this broker holds no replica of it;
NOT_LEADER_OR_FOLLOWER when it is not the leader; TRANSACTION_COORDINATOR_FENCED for a
coordinator epoch below the last one the producer's state saw; INVALID_PRODUCER_EPOCH for
a producer epoch below the producer's; INVALID_RECORD for a negative producer id or
epoch; NOT_ENOUGH_REPLICAS(_AFTER_APPEND) and REQUEST_TIMED_OUT as acks=-1 produce
answers.

Once a marker is in a partition's log, the replica manager's `txn_completion_listeners`
are called with (partition, producer id, committed), on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time

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
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)


def _notify(
    replica_manager: ReplicaManager, partition: TopicPartition, producer_id: int, committed: bool
) -> None:
    for listener in list(replica_manager.txn_completion_listeners):
        try:
            listener(partition, producer_id, committed)
        except Exception:
            logger.exception("transaction completion listener failed for %s", partition)


async def _write_marker(
    ctx: RequestContext, marker: WritableTxnMarker, timeout_ms: int
) -> WritableTxnMarkerResult:
    replica_manager = ctx.services.replica_manager
    producer_id = marker["producer_id"]
    committed = marker["transaction_result"]
    if producer_id < 0 or marker["producer_epoch"] < 0:
        # no producer to end a transaction of: the batch would be invalid (as Kafka's
        # validation of a transactional batch without a producer id)
        return {
            "producer_id": producer_id,
            "topics": [
                {
                    "name": topic["name"],
                    "partitions": [
                        {"partition_index": i, "error_code": ErrorCode.INVALID_RECORD}
                        for i in topic["partition_indexes"]
                    ],
                }
                for topic in marker["topics"]
            ],
        }
    batch = memoryview(
        build_end_txn_batch(
            ControlType.COMMIT if committed else ControlType.ABORT,
            producer_id=producer_id,
            producer_epoch=marker["producer_epoch"],
            coordinator_epoch=marker["coordinator_epoch"],
            timestamp=int(time.time() * 1000),
        )
    )
    entries: list[tuple[str, int, memoryview | None]] = [
        (topic["name"], index, batch)
        for topic in marker["topics"]
        for index in topic["partition_indexes"]
    ]
    results = await replica_manager.append_records(
        -1,
        timeout_ms,
        entries,
        # As Kafka: a partition without a replica here is unknown (its coordinator
        # refreshes its metadata and retries).
        lambda _t, _p: False,
        from_client=False,
        on_appended=lambda tp: _notify(replica_manager, tp, producer_id, committed),
    )
    by_topic: dict[str, WritableTxnMarkerTopicResult] = {}
    for (topic, index, _batch), result in zip(entries, results, strict=True):
        answer = by_topic.setdefault(topic, {"name": topic, "partitions": []})
        answer["partitions"].append({"partition_index": index, "error_code": result.error})
        if result.error != ErrorCode.NONE:
            logger.info(
                "transaction marker for producer %d on %s-%d failed: %s %s",
                producer_id, topic, index, result.error.name, result.message or "",
            )
    return {"producer_id": producer_id, "topics": list(by_topic.values())}


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
    timeout_ms = ctx.broker.config.request_timeout_ms
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {"markers": [_refused(marker) for marker in request["markers"]]}
    # Markers are appended in request order (each task appends before its first await);
    # their replication waits overlap.
    markers = await asyncio.gather(
        *(_write_marker(ctx, marker, timeout_ms) for marker in request["markers"])
    )
    return {"markers": list(markers)}


HANDLERS = [ApiHandler(ApiKey.WRITE_TXN_MARKERS, 0, 1, handle_write_txn_markers)]
