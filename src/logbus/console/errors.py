"""What goes wrong in the console, as a readable message and an HTTP status."""

from __future__ import annotations

from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.protocol import ErrorCode

_NOT_FOUND = frozenset(
    {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.GROUP_ID_NOT_FOUND}
)
_BAD_REQUEST = frozenset(
    {
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.POLICY_VIOLATION,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.NON_EMPTY_GROUP,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)
_FORBIDDEN = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
    }
)


class ConsoleError(Exception):
    """A refusal to show on the page: a bad form value, an offset out of range, an
    operation the group's state does not allow. `status` is the HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def kafka_status(exc: KafkaError) -> int:
    """The HTTP status of a Kafka error: 404 for what does not exist, 400 for what was
    asked wrongly, 403 for what is not allowed, 503 when the cluster cannot be reached."""
    if isinstance(exc, KafkaConnectionError):
        return 503
    if exc.code in _NOT_FOUND:
        return 404
    if exc.code in _BAD_REQUEST:
        return 400
    if exc.code in _FORBIDDEN:
        return 403
    if exc.retriable:
        return 503
    return 502


def kafka_message(exc: KafkaError) -> str:
    """A Kafka error for a person: what the broker said, and, when the cluster is out of
    reach, that the console keeps trying."""
    if isinstance(exc, KafkaConnectionError) or (exc.retriable and kafka_status(exc) == 503):
        return (
            f"The cluster could not be reached ({exc}). The console keeps running and "
            "reconnects when a broker answers again: reload the page."
        )
    return str(exc)
