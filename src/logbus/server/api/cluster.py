"""DescribeCluster v0-1 (KIP-700; v1 adds the endpoint type of KIP-919).

A broker describes brokers (endpoint type 1). As in Kafka (`AuthHelper`), a request for
controller endpoints (2) is MISMATCHED_ENDPOINT_TYPE, an unknown type
UNSUPPORTED_ENDPOINT_TYPE, and either is INVALID_REQUEST at v0. A controller id that is
not among the live brokers is reported as -1.
"""

from __future__ import annotations

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.describe_cluster_request import DescribeClusterRequest
from logbus.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import CLUSTER_NAME, AclOperation, ResourceType

BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINTS: "BROKER", CONTROLLER_ENDPOINTS: "CONTROLLER"}
NO_OPERATIONS = -2147483648
"""The schema default of an authorized-operations field: not requested."""
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
"""Every operation Kafka supports on the cluster resource (`AclEntry.supportedOperations`:
CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE)
as a bit field of AclOperation codes."""


def cluster_authorized_operations(ctx: RequestContext) -> int:
    """As Kafka: the cluster operations the principal may perform, 0 unless it may
    Describe the cluster (DescribeCluster itself needs no ACL, as in Kafka)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


async def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    endpoint_type: int = request["endpoint_type"]
    if endpoint_type not in _ENDPOINT_NAMES:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.INVALID_REQUEST
            if ctx.version == 0
            else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            "error_message": f"Unsupported endpoint type {endpoint_type}",
        }
    if endpoint_type != BROKER_ENDPOINTS:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.INVALID_REQUEST
            if ctx.version == 0
            else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "error_message": "The request was sent to an endpoint of type BROKER, but we "
            f"wanted an endpoint of type {_ENDPOINT_NAMES[endpoint_type]}",
        }
    cache = ctx.services.metadata_cache
    brokers: list[DescribeClusterBroker] = [
        {"broker_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack}
        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
        for ep in (b.endpoint(ctx.listener or None),)
    ]
    include_operations = bool(request["include_cluster_authorized_operations"])
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINTS,
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id if cache.controller_id in cache.brokers else -1,
        "brokers": brokers,
        "cluster_authorized_operations": cluster_authorized_operations(ctx)
        if include_operations
        else NO_OPERATIONS,
    }


HANDLERS = [ApiHandler(ApiKey.DESCRIBE_CLUSTER, 0, 1, handle_describe_cluster)]
