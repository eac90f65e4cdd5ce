"""DescribeProducers v0 (KIP-664): the active producers of partitions, from the leader's
producer state: id, epoch, last sequence, last timestamp, coordinator epoch and the first
offset of the open transaction (-1 if none). A partition this broker holds no replica of
is UNKNOWN_TOPIC_OR_PARTITION, one it follows NOT_LEADER_OR_FOLLOWER, as Kafka answers.
"""

from __future__ import annotations

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.describe_producers_request import DescribeProducersRequest
from logbus.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.replica.partition import PartitionError
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.producer_state import ProducerStateEntry


def _producer(entry: ProducerStateEntry) -> ProducerState:
    txn = entry.current_txn_first_offset
    return {
        "producer_id": entry.producer_id,
        "producer_epoch": entry.producer_epoch,
        "last_sequence": entry.last_seq,
        "last_timestamp": entry.last_timestamp,
        "coordinator_epoch": entry.coordinator_epoch,
        "current_txn_start_offset": -1 if txn is None else txn,
    }


def _describe(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    answer: PartitionResponse = {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "active_producers": [],
    }
    part = ctx.services.replica_manager.partition(topic, index)
    if part is None:
        answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    try:
        part.ensure_leader()
    except PartitionError as exc:
        answer["error_code"] = exc.error
        answer["error_message"] = str(exc) or None
        return answer
    entries = list(part.log.producer_state.producers.values())
    answer["active_producers"] = [_producer(e) for e in entries]
    return answer


def _refused(index: int) -> PartitionResponse:
    return {
        "partition_index": index,
        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "error_message": None,
        "active_producers": [],
    }


async def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    readable = ctx.authorized(
        AclOperation.READ, ResourceType.TOPIC, (t["name"] for t in request["topics"])
    )
    topics: list[TopicResponse] = [
        {
            "name": topic["name"],
            "partitions": [
                _describe(ctx, topic["name"], i)
                if topic["name"] in readable
                else _refused(i)
                for i in topic["partition_indexes"]
            ],
        }
        for topic in request["topics"]
    ]
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS = [ApiHandler(ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle_describe_producers)]
