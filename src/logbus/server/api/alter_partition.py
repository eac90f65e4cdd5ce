"""AlterPartition v0-3: a partition leader's ISR change, served by the active controller
(Kafka's ZooKeeper mode, 2.7+). The controller validates and writes the change
(`controller.isr_changes.alter_partition`) and answers each partition with its new ISR
and partition epoch, or the reason it was refused. Topics come by name up to v1 and by
id from v2 (UNKNOWN_TOPIC_ID when the id is unknown).
"""

from __future__ import annotations

from logbus.controller.cluster_controller import ControllerMovedError
from logbus.controller.isr_changes import IsrChangeRequest, alter_partition
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.alter_partition_request import AlterPartitionRequest
from logbus.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.topic_admin import on_controller
from logbus.server.security.acl import AclOperation, ResourceType

TOPIC_IDS_FROM = 2
ISR_WITH_EPOCHS_FROM = 3


async def handle_alter_partition(
    ctx: RequestContext, request: AlterPartitionRequest
) -> AlterPartitionResponse:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "topics": [],
        }
    try:
        return await on_controller(ctx, lambda: _alter(ctx.version, ctx, request))
    except ControllerMovedError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}


def _alter(
    version: int, ctx: RequestContext, request: AlterPartitionRequest
) -> AlterPartitionResponse:
    """On the controller's thread (cluster) or the event loop (stand-alone)."""
    controller = ctx.services.controller
    by_id = version >= TOPIC_IDS_FROM
    names = {t.topic_id: name for name, t in controller.topics.items()}
    changes: list[IsrChangeRequest] = []
    for topic in request["topics"]:
        name = names.get(topic["topic_id"]) if by_id else topic["topic_name"]
        for p in topic["partitions"]:
            if version >= ISR_WITH_EPOCHS_FROM:
                isr = tuple(b["broker_id"] for b in p["new_isr_with_epochs"])
            else:
                isr = tuple(p["new_isr"])
            changes.append(
                IsrChangeRequest(
                    name,
                    topic["topic_id"],
                    p["partition_index"],
                    p["leader_epoch"],
                    isr,
                    p["partition_epoch"],
                    p.get("leader_recovery_state", 0),
                )
            )
    error, results = alter_partition(
        controller, request["broker_id"], request["broker_epoch"], changes
    )
    topics: dict[tuple[str | None, object], TopicData] = {}
    for change, result in zip(changes, results, strict=True):
        key = (change.topic, change.topic_id if by_id else None)
        topic_data = topics.setdefault(
            key,
            {"topic_name": change.topic or "", "topic_id": change.topic_id, "partitions": []},
        )
        answer: PartitionData = {
            "partition_index": change.partition,
            "error_code": result.error,
            "leader_id": result.leader,
            "leader_epoch": result.leader_epoch,
            "isr": list(result.isr),
            "leader_recovery_state": 0,
            "partition_epoch": result.partition_epoch,
        }
        if change.topic is None:
            answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
        topic_data["partitions"].append(answer)
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "topics": [] if error != ErrorCode.NONE else list(topics.values()),
    }


HANDLERS = [ApiHandler(ApiKey.ALTER_PARTITION, 0, 3, handle_alter_partition)]
