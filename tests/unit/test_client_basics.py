"""Client values without a broker: addresses, errors, metadata."""

from __future__ import annotations

from uuid import UUID

import pytest

from logbus.client.connection import format_address, parse_address, parse_bootstrap
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, check
from logbus.client.requests.metadata import read_metadata
from logbus.protocol import ErrorCode, schema


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:9092", ("localhost", 9092)),
        (" broker-1 ", ("broker-1", 9092)),
        ("10.0.0.1:1", ("10.0.0.1", 1)),
        ("[::1]:9093", ("::1", 9093)),
        ("[fe80::1]", ("fe80::1", 9092)),
        ("::1", ("::1", 9092)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", ":9092", "host:", "host:0", "host:65536", "h:x", "[::1"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2,") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")
    assert format_address("::1", 9092) == "[::1]:9092"
    assert format_address("a", 1) == "a:1"


def test_kafka_error() -> None:
    error = KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")
    assert str(error) == "TOPIC_ALREADY_EXISTS: Topic 't' already exists."
    assert error.name == "TOPIC_ALREADY_EXISTS"
    assert not error.retriable
    assert KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER).retriable
    assert str(KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)) == "NOT_LEADER_OR_FOLLOWER"
    assert str(KafkaError(9999, "x")) == "ERROR_9999: x"
    with pytest.raises(KafkaError) as info:
        check(ErrorCode.INVALID_PARTITIONS, "too few")
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    check(ErrorCode.NONE)


def test_connection_errors_are_connection_errors() -> None:
    error = KafkaConnectionError("cannot connect to a:1: Connection refused")
    assert isinstance(error, ConnectionError)
    assert isinstance(error, KafkaError)
    assert error.retriable
    assert str(error) == "cannot connect to a:1: Connection refused"
    timeout = KafkaTimeoutError("Fetch request to a:1 timed out after 30s")
    assert isinstance(timeout, KafkaConnectionError)
    assert timeout.code == ErrorCode.REQUEST_TIMED_OUT


def _metadata_response() -> dict[str, object]:
    response = schema.response(3).defaults()
    response.update(
        brokers=[{"node_id": 1, "host": "h1", "port": 9092, "rack": None}],
        cluster_id="c",
        controller_id=1,
        topics=[
            {
                "error_code": 0,
                "name": "t",
                "topic_id": UUID(int=7),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 1,
                        "leader_id": -1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [],
                        "offline_replicas": [1],
                    },
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 2,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    },
                ],
            },
            {
                "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "name": "gone",
                "topic_id": UUID(int=0),
                "is_internal": False,
                "partitions": [],
            },
        ],
    )
    return response


def test_read_metadata() -> None:
    md = read_metadata(_metadata_response())
    assert md.controller_id == 1
    assert md.brokers[1].host == "h1"
    topic = md.topic("t")
    assert list(topic.partitions) == [0, 1]
    assert topic.replication_factor == 1
    assert md.leader("t", 0) == 1
    with pytest.raises(KafkaError) as no_leader:
        md.leader("t", 1)
    assert no_leader.value.code == ErrorCode.LEADER_NOT_AVAILABLE
    with pytest.raises(KafkaError, match="has no partition 5"):
        md.leader("t", 5)
    for missing in ("gone", "never-heard-of"):
        with pytest.raises(KafkaError, match=f"Topic '{missing}' does not exist"):
            md.topic(missing)
