"""FindCoordinator v0-6 (batched keys from v4, KIP-699): which broker coordinates a
consumer group. A group's coordinator is the leader of its `__consumer_offsets` partition,
`abs(java_hash(group_id)) % offsets.topic.num.partitions`; a transactional id's (key
type 1) is the leader of its `__transaction_state` partition,
`Utils.abs(java_hash(id)) % transaction.state.log.num.partitions`. Both topics are
created with their internal settings on first use, as Kafka does."""

from __future__ import annotations

from collections.abc import Callable

from logbus.controller.controller import NewTopic
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC, offsets_partition_for
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from logbus.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.api.topic_admin import create_topic_for_client
from logbus.server.security.acl import AclOperation, ResourceType

GROUP, TRANSACTION = 0, 1


async def ensure_offsets_topic(ctx: RequestContext) -> ErrorCode:
    """Create `__consumer_offsets` on first use, with offsets.topic.replication.factor
    replicas: while fewer brokers are alive, creation fails and the answer is
    COORDINATOR_NOT_AVAILABLE (Kafka's rule since 0.11, KIP-115)."""
    cfg = ctx.config
    if OFFSETS_TOPIC in ctx.services.metadata_cache.topics:
        return ErrorCode.NONE
    result = await create_topic_for_client(
        ctx,
        NewTopic(
            OFFSETS_TOPIC,
            cfg.offsets_topic_num_partitions,
            cfg.offsets_topic_replication_factor,
            {},
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(cfg.offsets_topic_segment_bytes),
            },
        ),
    )
    if result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        return ErrorCode.NONE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def ensure_transaction_state_topic(ctx: RequestContext) -> ErrorCode:
    """Create `__transaction_state` on first use (transaction.state.log.* settings);
    COORDINATOR_NOT_AVAILABLE while fewer brokers than its replication factor are alive."""
    cfg = ctx.config
    if TRANSACTION_STATE_TOPIC in ctx.services.metadata_cache.topics:
        return ErrorCode.NONE
    result = await create_topic_for_client(
        ctx,
        NewTopic(
            TRANSACTION_STATE_TOPIC,
            cfg.transaction_state_log_num_partitions,
            cfg.transaction_state_log_replication_factor,
            {},
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(cfg.transaction_state_log_min_isr),
                "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
                "unclean.leader.election.enable": "false",
            },
        ),
    )
    if result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        return ErrorCode.NONE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def find(ctx: RequestContext, key: str | None, key_type: int) -> Coordinator:
    """One coordinator lookup: node_id, host, port, error_code, error_message."""
    none: Coordinator = {"node_id": -1, "host": "", "port": -1}
    if key_type not in (GROUP, TRANSACTION):
        return {
            **none,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"unknown coordinator key type {key_type}",
        }
    if not key:
        return {
            **none,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"the {'group' if key_type == GROUP else 'transactional'} id "
            "must not be empty",
        }
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return {**none, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None}
    if key_type == TRANSACTION and not ctx.authorize(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return {
            **none,
            "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "error_message": None,
        }
    partition_for: Callable[[str, int], int]
    if key_type == GROUP:
        error = await ensure_offsets_topic(ctx)
        name, partition_for = OFFSETS_TOPIC, offsets_partition_for
    else:
        error = await ensure_transaction_state_topic(ctx)
        name, partition_for = TRANSACTION_STATE_TOPIC, txn_partition_for
    cache = ctx.services.metadata_cache
    topic = cache.topics.get(name)
    if error != ErrorCode.NONE or topic is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    state = topic.partitions[partition_for(key, len(topic.partitions))]
    node = cache.brokers.get(state.leader)
    if node is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    endpoint = node.endpoint(ctx.listener or None)
    return {
        "node_id": node.broker_id,
        "host": endpoint.host,
        "port": endpoint.port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


async def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    key_type = request["key_type"]
    if ctx.version >= 4:
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {**(await find(ctx, key, key_type)), "key": key}
                for key in request["coordinator_keys"]
            ],
        }
    found = await find(ctx, request["key"], key_type)
    return {
        "throttle_time_ms": 0,
        "error_code": found["error_code"],
        "error_message": found["error_message"],
        "node_id": found["node_id"],
        "host": found["host"],
        "port": found["port"],
    }


HANDLERS = [ApiHandler(ApiKey.FIND_COORDINATOR, 0, 6, handle_find_coordinator)]
