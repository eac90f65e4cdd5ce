"""Partition reassignment requests to the controller (KIP-455):
AlterPartitionReassignments v0 (start, replace or cancel the move of partitions to new
replicas) and ListPartitionReassignments v0 (the moves in progress)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignableTopic,
)
from logbus.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from logbus.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from logbus.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from logbus.types import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (Kafka's `PartitionReassignment`): every replica the
    partition has now, and those being added and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def build_alter_reassignments(
    reassignments: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int
) -> AlterPartitionReassignmentsRequest:
    """The request; a partition mapped to None cancels its reassignment."""
    by_topic: dict[str, ReassignableTopic] = {}
    for tp, replicas in reassignments.items():
        topic = by_topic.setdefault(tp.topic, {"name": tp.topic, "partitions": []})
        topic["partitions"].append(
            {
                "partition_index": tp.partition,
                "replicas": None if replicas is None else list(replicas),
            }
        )
    return {"timeout_ms": timeout_ms, "topics": list(by_topic.values())}


def read_alter_reassignments(
    response: AlterPartitionReassignmentsResponse,
) -> tuple[KafkaError | None, dict[TopicPartition, KafkaError | None]]:
    """The request-level error and each partition's outcome (None: accepted)."""
    error = _code(response["error_code"])
    top = None if error == ErrorCode.NONE else KafkaError(error, response.get("error_message"))
    out: dict[TopicPartition, KafkaError | None] = {}
    for topic in response["responses"]:
        for p in topic["partitions"]:
            code = _code(p["error_code"])
            out[TopicPartition(topic["name"], p["partition_index"])] = (
                None if code == ErrorCode.NONE else KafkaError(code, p.get("error_message"))
            )
    return top, out


async def alter_partition_reassignments(
    conn: Connection,
    reassignments: Mapping[TopicPartition, Sequence[int] | None],
    timeout_ms: int,
) -> tuple[KafkaError | None, dict[TopicPartition, KafkaError | None]]:
    """Send AlterPartitionReassignments to the controller at `conn`."""
    version = conn.choose_version(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    body = build_alter_reassignments(reassignments, timeout_ms)
    response = await send(conn, apis.ALTER_PARTITION_REASSIGNMENTS, body, version)
    return read_alter_reassignments(response)


def build_list_reassignments(
    partitions: Iterable[TopicPartition] | None, timeout_ms: int
) -> ListPartitionReassignmentsRequest:
    topics: list[ListPartitionReassignmentsTopics] | None = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    return {"timeout_ms": timeout_ms, "topics": topics}


def read_list_reassignments(
    response: ListPartitionReassignmentsResponse,
) -> tuple[KafkaError | None, dict[TopicPartition, PartitionReassignment]]:
    error = _code(response["error_code"])
    top = None if error == ErrorCode.NONE else KafkaError(error, response.get("error_message"))
    out: dict[TopicPartition, PartitionReassignment] = {}
    for topic in response["topics"]:
        for p in topic["partitions"]:
            out[TopicPartition(topic["name"], p["partition_index"])] = PartitionReassignment(
                tuple(p["replicas"]), tuple(p["adding_replicas"]), tuple(p["removing_replicas"])
            )
    return top, out


async def list_partition_reassignments(
    conn: Connection, partitions: Iterable[TopicPartition] | None, timeout_ms: int
) -> tuple[KafkaError | None, dict[TopicPartition, PartitionReassignment]]:
    """Send ListPartitionReassignments to the controller at `conn` (None: every partition)."""
    version = conn.choose_version(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    body = build_list_reassignments(partitions, timeout_ms)
    response = await send(conn, apis.LIST_PARTITION_REASSIGNMENTS, body, version)
    return read_list_reassignments(response)
