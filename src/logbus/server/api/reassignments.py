"""AlterPartitionReassignments v0 and ListPartitionReassignments v0 (KIP-455), served by
the active controller (Kafka's ZooKeeper mode): the controller's work is in
`controller/reassignment.py`, run where the controller runs (`on_controller`). A broker
that is not the controller answers NOT_CONTROLLER as the request's error, and the admin
client asks the new controller.

AlterPartitionReassignments needs Alter on the cluster, ListPartitionReassignments
Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Sequence

from logbus.controller.cluster_controller import ControllerMovedError
from logbus.controller.controller import Controller
from logbus.controller.isr_changes import is_active
from logbus.controller.reassignment import (
    ReassignmentResult,
    ReplicaAssignment,
    alter_reassignments,
    list_reassignments,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from logbus.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignableTopicResponse,
)
from logbus.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from logbus.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingTopicReassignment,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.topic_admin import on_controller
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.types import TopicPartition


def _alter_response(
    error: ErrorCode,
    message: str | None,
    results: dict[TopicPartition, ReassignmentResult],
) -> AlterPartitionReassignmentsResponse:
    by_topic: dict[str, ReassignableTopicResponse] = {}
    for tp, result in results.items():
        topic = by_topic.setdefault(tp.topic, {"name": tp.topic, "partitions": []})
        topic["partitions"].append(
            {
                "partition_index": tp.partition,
                "error_code": result.error,
                "error_message": result.message,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message,
        "responses": list(by_topic.values()),
    }


async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    wanted: dict[TopicPartition, Sequence[int] | None] = {}
    for topic in request["topics"]:
        for p in topic["partitions"]:
            replicas = p["replicas"]
            wanted[TopicPartition(topic["name"], p["partition_index"])] = (
                None if replicas is None else tuple(replicas)
            )
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return _alter_response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, {})
    controller = ctx.services.controller

    def alter() -> dict[TopicPartition, ReassignmentResult] | None:
        if not is_active(controller):
            return None
        return alter_reassignments(controller, wanted)

    try:
        results = await on_controller(ctx, alter)
    except ControllerMovedError:
        results = None
    if results is None:
        return _alter_response(ErrorCode.NOT_CONTROLLER, "This is not the controller.", {})
    return _alter_response(ErrorCode.NONE, None, results)


def _list(
    controller: Controller, wanted: list[TopicPartition] | None
) -> dict[TopicPartition, ReplicaAssignment] | None:
    if not is_active(controller):
        return None
    return list_reassignments(controller, wanted)


async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    empty: ListPartitionReassignmentsResponse = {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topics": [],
    }
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {**empty, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    topics = request.get("topics")
    wanted = (
        None
        if topics is None
        else [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
    )
    controller = ctx.services.controller
    try:
        found = await on_controller(ctx, lambda: _list(controller, wanted))
    except ControllerMovedError:
        found = None
    if found is None:
        return {
            **empty,
            "error_code": ErrorCode.NOT_CONTROLLER,
            "error_message": "This is not the controller.",
        }
    by_topic: dict[str, OngoingTopicReassignment] = {}
    for tp, a in found.items():
        topic = by_topic.setdefault(tp.topic, {"name": tp.topic, "partitions": []})
        topic["partitions"].append(
            {
                "partition_index": tp.partition,
                "replicas": list(a.replicas),
                "adding_replicas": list(a.adding),
                "removing_replicas": list(a.removing),
            }
        )
    return {**empty, "topics": list(by_topic.values())}


HANDLERS = [
    ApiHandler(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, handle_alter_partition_reassignments
    ),
    ApiHandler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, handle_list_partition_reassignments),
]
