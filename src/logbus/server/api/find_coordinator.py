"""FindCoordinator v0-6 (batched keys from v4, KIP-699): which broker coordinates a
consumer group. A group's coordinator is the leader of its `__consumer_offsets` partition,
`abs(java_hash(group_id)) % offsets.topic.num.partitions`; the topic is created with its
internal settings on first use, as Kafka does. Transaction keys are answered with
COORDINATOR_NOT_AVAILABLE until the transaction coordinator exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logbus.controller.controller import NewTopic
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.api import ApiHandler, Body, RequestContext

if TYPE_CHECKING:
    from logbus.server.broker import Broker

OFFSETS_TOPIC = "__consumer_offsets"
GROUP, TRANSACTION = 0, 1


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition_for(group_id: str, partitions: int) -> int:
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


def ensure_offsets_topic(broker: Broker) -> ErrorCode:
    cfg = broker.config
    if OFFSETS_TOPIC in broker.metadata_cache.topics:
        return ErrorCode.NONE
    assert broker.controller is not None
    result = broker.controller.create_topic(
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
        )
    )
    if result.error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        return ErrorCode.NONE
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def find(broker: Broker, key: str | None, key_type: int) -> Body:
    """One coordinator lookup: node_id, host, port, error_code, error_message."""
    none = {"node_id": -1, "host": "", "port": -1}
    if key_type == TRANSACTION:
        return {
            **none,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "error_message": "transactions are not supported by this broker yet",
        }
    if key_type != GROUP:
        return {
            **none,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"unknown coordinator key type {key_type}",
        }
    if not key:
        return {
            **none,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": "the group id must not be empty",
        }
    error = ensure_offsets_topic(broker)
    topic = broker.metadata_cache.topics.get(OFFSETS_TOPIC)
    if error != ErrorCode.NONE or topic is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    state = topic.partitions[offsets_partition_for(key, len(topic.partitions))]
    node = broker.metadata_cache.brokers.get(state.leader)
    if node is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": None}
    return {
        "node_id": node.broker_id,
        "host": node.host,
        "port": node.port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


async def handle_find_coordinator(ctx: RequestContext, request: Body) -> Body:
    key_type = request["key_type"]
    if ctx.version >= 4:
        return {
            "throttle_time_ms": 0,
            "coordinators": [
                {"key": key, **find(ctx.broker, key, key_type)}
                for key in request["coordinator_keys"]
            ],
        }
    return {"throttle_time_ms": 0, **find(ctx.broker, request["key"], key_type)}


HANDLERS = [ApiHandler(ApiKey.FIND_COORDINATOR, 0, 6, handle_find_coordinator)]
