"""Leadership requests to the controller: ControlledShutdown v0-3 (a stopping broker asks
the controller to move its leaderships away) and ElectLeaders v0-2 (an admin asks for
preferred or unclean leader elections)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from logbus.protocol.messages.controlled_shutdown_response import ControlledShutdownResponse
from logbus.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from logbus.protocol.messages.elect_leaders_response import ElectLeadersResponse
from logbus.types import TopicPartition

BROKER_EPOCH_FROM = 2
ELECTION_TYPE_FROM = 1
TOP_LEVEL_ERROR_FROM = 1


class ElectionType(enum.IntEnum):
    """Kafka's `ElectionType`: PREFERRED moves leadership to the first assigned replica
    when it is in the ISR; UNCLEAN elects a leader for a partition without a live one,
    from outside the ISR when no in-sync replica is live."""

    PREFERRED = 0
    UNCLEAN = 1


# --- ControlledShutdown -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControlledShutdownResult:
    error: ErrorCode
    remaining: list[TopicPartition]


def build_controlled_shutdown(
    version: int, broker_id: int, broker_epoch: int
) -> ControlledShutdownRequest:
    body: ControlledShutdownRequest = {"broker_id": broker_id}
    if version >= BROKER_EPOCH_FROM:
        body["broker_epoch"] = broker_epoch
    return body


def read_controlled_shutdown(response: ControlledShutdownResponse) -> ControlledShutdownResult:
    try:
        error = ErrorCode(response["error_code"])
    except ValueError:
        error = ErrorCode.UNKNOWN_SERVER_ERROR
    remaining = [
        TopicPartition(p["topic_name"], p["partition_index"])
        for p in response["remaining_partitions"]
    ]
    return ControlledShutdownResult(error, remaining)


async def controlled_shutdown(
    conn: Connection, broker_id: int, broker_epoch: int
) -> ControlledShutdownResult:
    """Ask the controller at `conn` to move this broker's leaderships away."""
    version = conn.choose_version(ApiKey.CONTROLLED_SHUTDOWN)
    body = build_controlled_shutdown(version, broker_id, broker_epoch)
    response = await send(conn, apis.CONTROLLED_SHUTDOWN, body, version)
    return read_controlled_shutdown(response)


# --- ElectLeaders -------------------------------------------------------------------------


def build_elect_leaders(
    version: int,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None,
    timeout_ms: int,
) -> ElectLeadersRequest:
    """The request; `partitions` None means every partition of the cluster."""
    if version < ELECTION_TYPE_FROM and election_type is not ElectionType.PREFERRED:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION, "the broker supports only preferred elections"
        )
    topics: list[TopicPartitions] | None = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    body: ElectLeadersRequest = {"topic_partitions": topics, "timeout_ms": timeout_ms}
    if version >= ELECTION_TYPE_FROM:
        body["election_type"] = int(election_type)
    return body


def read_elect_leaders(
    response: ElectLeadersResponse, version: int
) -> tuple[ErrorCode, dict[TopicPartition, KafkaError | None]]:
    """The request-level error and each partition's outcome: None when a leader was
    elected, else the error (ELECTION_NOT_NEEDED among them, as Kafka's admin reports)."""
    error = ErrorCode(response["error_code"]) if version >= TOP_LEVEL_ERROR_FROM else 0
    out: dict[TopicPartition, KafkaError | None] = {}
    for topic in response["replica_election_results"]:
        for p in topic["partition_result"]:
            tp = TopicPartition(topic["topic"], p["partition_id"])
            code = p["error_code"]
            out[tp] = None if code == ErrorCode.NONE else KafkaError(code, p["error_message"])
    return ErrorCode(error), out


async def elect_leaders(
    conn: Connection,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None,
    timeout_ms: int,
) -> tuple[ErrorCode, dict[TopicPartition, KafkaError | None]]:
    """Send ElectLeaders to the controller at `conn` (newest version both support)."""
    version = conn.choose_version(ApiKey.ELECT_LEADERS)
    body = build_elect_leaders(version, election_type, partitions, timeout_ms)
    response = await send(conn, apis.ELECT_LEADERS, body, version)
    return read_elect_leaders(response, version)
