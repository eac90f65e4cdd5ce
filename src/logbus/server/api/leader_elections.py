"""ControlledShutdown v0-3 and ElectLeaders v0-2, served by the active controller (Kafka's
ZooKeeper mode): the controller's work is in `controller/leader_elections.py`, run where
the controller runs (`on_controller`). A broker that is not the controller answers
NOT_CONTROLLER (ElectLeaders: per partition, as Kafka's).

ControlledShutdown needs ClusterAction on the cluster, ElectLeaders Alter on the cluster
(CLUSTER_AUTHORIZATION_FAILED, for every partition named). A stand-alone broker answers
ControlledShutdown with no partitions left and changes nothing (its partitions have one
replica each), and ElectLeaders with ELECTION_NOT_NEEDED.
"""

from __future__ import annotations

import asyncio

from logbus.controller.cluster_controller import ControllerMovedError
from logbus.controller.controller import Controller
from logbus.controller.isr_changes import is_active
from logbus.controller.leader_elections import (
    ElectionResult,
    ElectionType,
    controlled_shutdown,
    elect_leaders,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from logbus.protocol.messages.controlled_shutdown_response import ControlledShutdownResponse
from logbus.protocol.messages.elect_leaders_request import ElectLeadersRequest
from logbus.protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.topic_admin import on_controller
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.types import TopicPartition

BROKER_EPOCH_FROM = 2
ELECTION_TYPE_FROM = 1


async def handle_controlled_shutdown(
    ctx: RequestContext, request: ControlledShutdownRequest
) -> ControlledShutdownResponse:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if not ctx.services.in_cluster:
        # A stand-alone broker is its own controller and every partition's only replica:
        # nothing can move, and it never marks itself as shutting down.
        return {"error_code": ErrorCode.NONE, "remaining_partitions": []}
    broker_epoch = request["broker_epoch"] if ctx.version >= BROKER_EPOCH_FROM else -1
    controller = ctx.services.controller
    try:
        error, remaining = await on_controller(
            ctx, lambda: controlled_shutdown(controller, request["broker_id"], broker_epoch)
        )
    except ControllerMovedError:
        error, remaining = ErrorCode.NOT_CONTROLLER, []
    return {
        "error_code": error,
        "remaining_partitions": [
            {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining
        ],
    }


def _named(request: ElectLeadersRequest) -> list[TopicPartition] | None:
    topics = request["topic_partitions"]
    if topics is None:
        return None
    return [TopicPartition(t["topic"], p) for t in topics for p in t["partitions"]]


async def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    named = _named(request)
    if ctx.version >= ELECTION_TYPE_FROM:
        try:
            election_type = ElectionType(request["election_type"])
        except ValueError:
            return _response(
                ErrorCode.INVALID_REQUEST,
                _every(named, ElectionResult(ErrorCode.INVALID_REQUEST, "Unknown election type")),
            )
    else:
        election_type = ElectionType.PREFERRED
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        denied = ElectionResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _every(named, denied))
    controller = ctx.services.controller
    try:
        results = await on_controller(ctx, lambda: _elect(controller, election_type, named))
    except ControllerMovedError:
        results = None
    if results is None:
        results = _every(named, ElectionResult(ErrorCode.NOT_CONTROLLER))
    elif ctx.services.in_cluster:
        results = await _propagated(ctx, results, request["timeout_ms"])
    return _response(ErrorCode.NONE, results)


async def _propagated(
    ctx: RequestContext, results: dict[TopicPartition, ElectionResult], timeout_ms: int
) -> dict[TopicPartition, ElectionResult]:
    """Wait (at most `timeout_ms`) until this broker's metadata names each elected
    leader, as Kafka's broker waits for the election in its purgatory; a partition whose
    new leader is not seen by then answers REQUEST_TIMED_OUT (the election stands)."""
    cache = ctx.services.metadata_cache

    def pending() -> list[TopicPartition]:
        return [
            tp
            for tp, r in results.items()
            if r.error == ErrorCode.NONE
            and (state := cache.partition(tp.topic, tp.partition)) is not None
            and state.leader != r.leader
        ]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    while True:
        waiting = pending()
        if not waiting or loop.time() >= deadline:
            break
        await asyncio.sleep(0.01)
    timed_out = ElectionResult(
        ErrorCode.REQUEST_TIMED_OUT, "The election was made; this broker has not seen it yet."
    )
    return {tp: timed_out if tp in waiting else r for tp, r in results.items()}


def _elect(
    controller: Controller, election_type: ElectionType, named: list[TopicPartition] | None
) -> dict[TopicPartition, ElectionResult] | None:
    if not is_active(controller):
        return None
    return elect_leaders(controller, election_type, named)


def _every(
    named: list[TopicPartition] | None, result: ElectionResult
) -> dict[TopicPartition, ElectionResult]:
    return dict.fromkeys(named or [], result)


def _response(
    error: ErrorCode, results: dict[TopicPartition, ElectionResult]
) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for tp, result in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_id": tp.partition,
                "error_code": result.error,
                "error_message": result.message,
            }
        )
    topics: list[ReplicaElectionResult] = [
        {"topic": name, "partition_result": parts} for name, parts in by_topic.items()
    ]
    return {"throttle_time_ms": 0, "error_code": error, "replica_election_results": topics}


HANDLERS = [
    ApiHandler(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, handle_controlled_shutdown),
    ApiHandler(ApiKey.ELECT_LEADERS, 0, 2, handle_elect_leaders),
]
