"""Bounded admin requests (issue 13): CreateTopics and CreatePartitions refuse more than
10,000 new partitions per request and more than max.broker.partitions per broker with
POLICY_VIOLATION, validate_only builds nothing, and a large creation does not stop the
broker from answering other clients."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from admin_helpers import create_topics

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import NewRecord, build_batch

INT32_MAX = 2**31 - 1
EXCESSIVE = "Excessively large number of partitions per request."




def create_partitions(
    client: WireClient, topic: str, count: int, *, validate_only: bool = False
) -> dict[str, Any]:
    body = {
        "topics": [{"name": topic, "count": count, "assignments": None}],
        "timeout_ms": 60_000,
        "validate_only": validate_only,
    }
    return dict(client.request(ApiKey.CREATE_PARTITIONS, 3, body)["results"][0])


def partition_dirs(data_dir: Path, topic: str) -> list[Path]:
    return [p for p in data_dir.iterdir() if p.name.rpartition("-")[0] == topic]


def test_a_request_over_ten_thousand_partitions_is_refused_whole(broker: Any) -> None:
    with WireClient(broker.bootstrap) as client:
        for validate_only in (True, False):
            results = create_topics(
                client, {"huge": INT32_MAX, "small": 1}, validate_only=validate_only
            )
            assert [(r["name"], r["error_code"], r["error_message"]) for r in results] == [
                ("huge", ErrorCode.POLICY_VIOLATION, EXCESSIVE),
                ("small", ErrorCode.POLICY_VIOLATION, EXCESSIVE),
            ]
            # Two topics of 5,001: each is fine, together they are too many (as in Kafka).
            results = create_topics(client, {"a": 5001, "b": 5001}, validate_only=validate_only)
            assert {r["error_code"] for r in results} == {ErrorCode.POLICY_VIOLATION}
        # One topic of exactly 10,000 passes validation (nothing is built for it).
        (result,) = create_topics(client, {"edge": 10_000}, validate_only=True)
        assert result["error_code"] == ErrorCode.NONE, result["error_message"]
        assert result["num_partitions"] == 10_000
        names = {t["name"] for t in client.metadata(None)["topics"]}
        assert not names & {"huge", "small", "a", "b", "edge"}
    assert not any(partition_dirs(broker.data_dir, t) for t in ("huge", "small", "edge"))


def test_create_partitions_is_bounded_and_validate_only_builds_nothing(broker: Any) -> None:
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("grow", 2)[0] == ErrorCode.NONE
        for validate_only in (True, False):
            result = create_partitions(client, "grow", INT32_MAX, validate_only=validate_only)
            assert result["error_code"] == ErrorCode.POLICY_VIOLATION
            assert result["error_message"] == EXCESSIVE
        result = create_partitions(client, "grow", 10_002, validate_only=True)
        assert result["error_code"] == ErrorCode.NONE, result["error_message"]
        (topic,) = client.metadata(["grow"])["topics"]
        assert len(topic["partitions"]) == 2
        assert len(partition_dirs(broker.data_dir, "grow")) == 2
        result = create_partitions(client, "grow", 5)
        assert result["error_code"] == ErrorCode.NONE, result["error_message"]
        (topic,) = client.metadata(["grow"])["topics"]
        assert sorted(p["partition_index"] for p in topic["partitions"]) == list(range(5))
    assert len(partition_dirs(broker.data_dir, "grow")) == 5


def test_max_broker_partitions_bounds_what_one_broker_hosts(broker_factory: Any) -> None:
    running = broker_factory(max_broker_partitions="10")
    with WireClient(running.bootstrap) as client:
        (ok,) = create_topics(client, {"first": 8})
        assert ok["error_code"] == ErrorCode.NONE, ok["error_message"]
        for validate_only in (True, False):
            (refused,) = create_topics(client, {"second": 3}, validate_only=validate_only)
            assert refused["error_code"] == ErrorCode.POLICY_VIOLATION
            assert "max.broker.partitions (10)" in refused["error_message"]
            result = create_partitions(client, "first", 11, validate_only=validate_only)
            assert result["error_code"] == ErrorCode.POLICY_VIOLATION
            assert "max.broker.partitions" in result["error_message"]
        (fits,) = create_topics(client, {"second": 2})
        assert fits["error_code"] == ErrorCode.NONE, fits["error_message"]
        names = {t["name"] for t in client.metadata(None)["topics"]}
        assert names == {"first", "second"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_other_clients_are_served_while_a_large_topic_is_created(broker: Any) -> None:
    """While a 5,000-partition topic is being created, Metadata and Produce requests of
    another connection are answered: the creation hands the event loop back."""
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("busy", 1)[0] == ErrorCode.NONE
    batch = build_batch([NewRecord(b"k", b"v")])
    created = threading.Event()
    outcome: list[Any] = []

    def create() -> None:
        try:
            with WireClient(broker.bootstrap, timeout=600) as admin:
                outcome.extend(create_topics(admin, {"large": 5000}))
        except Exception as exc:  # reported by the main thread
            outcome.append(exc)
        finally:
            created.set()

    creator = threading.Thread(target=create, daemon=True)
    creator.start()
    answered_during_creation = 0
    with WireClient(broker.bootstrap, timeout=600) as other:
        # The creation has begun once its first partition directories exist.
        wait_for(lambda: partition_dirs(broker.data_dir, "large") or created.is_set(), 60)
        while not created.is_set() and answered_during_creation < 5:
            metadata = other.metadata(["busy"])
            produced = other.produce("busy", 0, batch, acks=1)
            assert metadata["topics"][0]["error_code"] == ErrorCode.NONE
            assert produced["error_code"] == ErrorCode.NONE
            if not created.is_set():
                answered_during_creation += 1
    creator.join(600)
    assert not [r for r in outcome if isinstance(r, Exception)], outcome
    assert [(r["name"], r["error_code"]) for r in outcome] == [("large", ErrorCode.NONE)]
    assert answered_during_creation >= 5
    with WireClient(broker.bootstrap) as client:
        (topic,) = client.metadata(["large"])["topics"]
        assert len(topic["partitions"]) == 5000
        assert all(p["leader_id"] == 0 for p in topic["partitions"])
    assert len(partition_dirs(broker.data_dir, "large")) == 5000


def test_a_creation_that_cannot_create_its_logs_is_answered_and_can_be_deleted(
    broker_factory: Any,
) -> None:
    running = broker_factory(log_segment_delete_delay_ms="0")
    (running.data_dir / "blocked-3").write_bytes(b"not a directory")
    with WireClient(running.bootstrap) as client:
        (result,) = create_topics(client, {"blocked": 5})
        assert result["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
        assert "Cannot create the logs" in result["error_message"]
        assert client.create_topic("fine", 1)[0] == ErrorCode.NONE  # the broker carries on
        response = client.request(
            ApiKey.DELETE_TOPICS, 4, {"topic_names": ["blocked"], "timeout_ms": 10_000}
        )
        assert response["responses"][0]["error_code"] == ErrorCode.NONE
        wait_for(
            lambda: [p.name for p in partition_dirs(running.data_dir, "blocked")] == ["blocked-3"]
        )
