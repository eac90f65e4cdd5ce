"""The log side of transactions on a real broker: transactional batches produced over the
wire with a transactional id, markers written with WriteTxnMarkers, and what
read_committed readers (confluent-kafka, kcat, raw Fetch and ListOffsets) see.

There is no transaction coordinator here: the tests play its part, choosing producer ids
and sending the markers themselves."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from kafka_wire import PRODUCE_V, WireClient, fetch_body, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import build_batch
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.types import TopicPartition as LogbusTopicPartition

WRITE_TXN_MARKERS_V = 1
LIST_OFFSETS_V = 7
TXN_ID = "txn-test"


def txn_produce(
    conn: WireClient,
    topic: str,
    pid: int,
    seq: int,
    values: list[bytes],
    *,
    epoch: int = 0,
    transactional_id: str | None = TXN_ID,
    partition: int = 0,
    records: bytes | None = None,
) -> dict[str, Any]:
    batch = records or build_batch(
        [(b"k", v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    body = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
        ],
    }
    response = conn.request(ApiKey.PRODUCE, PRODUCE_V, body)
    return dict(response["responses"][0]["partition_responses"][0])


def write_marker(
    conn: WireClient,
    pid: int,
    commit: bool,
    partitions: dict[str, list[int]],
    *,
    epoch: int = 0,
    coordinator_epoch: int = 0,
) -> dict[tuple[str, int], int]:
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "topics": [
                    {"name": t, "partition_indexes": ps} for t, ps in partitions.items()
                ],
                "coordinator_epoch": coordinator_epoch,
            }
        ]
    }
    response = conn.request(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_V, body)
    (marker,) = response["markers"]
    assert marker["producer_id"] == pid
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in marker["topics"]
        for p in t["partitions"]
    }


def committed_fetch(conn: WireClient, topic: str, offset: int = 0) -> dict[str, Any]:
    body = fetch_body(topic, 0, offset)
    body["isolation_level"] = 1
    response = conn.request(ApiKey.FETCH, 12, body)
    return dict(response["responses"][0]["partitions"][0])


def latest_offset(conn: WireClient, topic: str, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                ],
            }
        ],
    }
    part = conn.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == ErrorCode.NONE
    return int(part["offset"])


def confluent_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value a confluent-kafka consumer with `isolation` reads from partition 0
    until the end it may read (partition EOF)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for _ in range(300):
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(f"consumer error: {error}")
            values.append(message.value())
        raise AssertionError(f"no partition EOF; read {values}")
    finally:
        consumer.close()


def kcat_values(bootstrap: str, topic: str) -> list[bytes]:
    out = subprocess.run(
        [
            "kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
            "-q", "-X", "isolation.level=read_committed", "-f", "%s\\n",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return out.stdout.splitlines()


@pytest.fixture
def conn(broker: Any) -> Any:
    with WireClient(broker.bootstrap) as client:
        yield client


def make_topic(conn: WireClient, name: str) -> str:
    assert conn.create_topic(name, 1)[0] == ErrorCode.NONE
    return name


P1, P2, P3 = 9001, 9002, 9003


def test_read_committed_hides_aborted_records_and_stops_at_open_transactions(
    broker: Any, conn: WireClient
) -> None:
    topic = make_topic(conn, "orders")
    assert conn.produce(topic, 0, build_batch([(b"k", b"a0")]))["error_code"] == 0  # 0
    assert txn_produce(conn, topic, P1, 0, [b"c1", b"c2"])["error_code"] == 0  # 1-2
    assert txn_produce(conn, topic, P2, 0, [b"x1", b"x2"])["error_code"] == 0  # 3-4
    assert txn_produce(conn, topic, P1, 2, [b"c3"])["error_code"] == 0  # 5
    assert write_marker(conn, P1, True, {topic: [0]}) == {(topic, 0): 0}  # 6
    assert write_marker(conn, P2, False, {topic: [0]}) == {(topic, 0): 0}  # 7
    assert txn_produce(conn, topic, P3, 0, [b"o1"])["base_offset"] == 8  # open
    assert conn.produce(topic, 0, build_batch([(b"k", b"b1")]))["error_code"] == 0  # 9

    everything = [b"a0", b"c1", b"c2", b"x1", b"x2", b"c3", b"o1", b"b1"]
    assert confluent_values(broker.bootstrap, topic, "read_uncommitted") == everything
    assert confluent_values(broker.bootstrap, topic, "read_committed") == [
        b"a0", b"c1", b"c2", b"c3"
    ]
    part = committed_fetch(conn, topic)
    assert (part["high_watermark"], part["last_stable_offset"]) == (10, 8)
    assert part["aborted_transactions"] == [{"producer_id": P2, "first_offset": 3}]
    assert latest_offset(conn, topic, 1) == 8
    assert latest_offset(conn, topic, 0) == 10
    if shutil.which("kcat"):
        assert kcat_values(broker.bootstrap, topic) == [b"a0", b"c1", b"c2", b"c3"]

    # the open transaction commits: everything but the aborted records is readable
    assert write_marker(conn, P3, True, {topic: [0]}) == {(topic, 0): 0}  # 10
    committed = [b"a0", b"c1", b"c2", b"c3", b"o1", b"b1"]
    assert confluent_values(broker.bootstrap, topic, "read_committed") == committed
    assert latest_offset(conn, topic, 1) == 11
    # from offset 5 the range still holds the aborted transaction's marker (7)
    part = committed_fetch(conn, topic, 5)
    assert part["aborted_transactions"] == [{"producer_id": P2, "first_offset": 3}]
    part = committed_fetch(conn, topic, 8)
    assert part["last_stable_offset"] == 11 and part["aborted_transactions"] == []
    if shutil.which("kcat"):
        assert kcat_values(broker.bootstrap, topic) == committed


def test_markers_call_the_completion_listeners_and_describe_producers(
    broker: Any, conn: WireClient
) -> None:
    topic = make_topic(conn, "ledger")
    calls: list[tuple[LogbusTopicPartition, int, bool]] = []
    broker.broker.services.replica_manager.txn_completion_listeners.append(
        lambda tp, pid, committed: calls.append((tp, pid, committed))
    )
    assert txn_produce(conn, topic, P1, 0, [b"v"], epoch=2)["error_code"] == 0
    described = conn.request(
        ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0, 7]}]}
    )
    (found, missing) = described["topics"][0]["partitions"]
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert found["error_code"] == ErrorCode.NONE
    (producer,) = found["active_producers"]
    assert (producer["producer_id"], producer["producer_epoch"], producer["last_sequence"]) == (
        P1, 2, 0
    )
    assert producer["current_txn_start_offset"] == 0 and producer["coordinator_epoch"] == -1

    assert write_marker(conn, P1, False, {topic: [0]}, epoch=2, coordinator_epoch=4) == {
        (topic, 0): 0
    }
    wait_for(lambda: calls)
    assert calls == [(LogbusTopicPartition(topic, 0), P1, False)]
    described = conn.request(
        ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}
    )
    (producer,) = described["topics"][0]["partitions"][0]["active_producers"]
    assert producer["current_txn_start_offset"] == -1 and producer["coordinator_epoch"] == 4


def test_bad_markers_and_batches_are_refused(broker: Any, conn: WireClient) -> None:
    topic = make_topic(conn, "guarded")
    assert txn_produce(conn, topic, P1, 0, [b"v"], epoch=3)["error_code"] == 0
    assert write_marker(conn, P1, True, {topic: [0]}, epoch=3, coordinator_epoch=5) == {
        (topic, 0): 0
    }
    assert txn_produce(conn, topic, P1, 1, [b"w"], epoch=3)["error_code"] == 0  # 2, open
    end = conn.list_offset(topic, 0, -1)[1]
    # a stale coordinator epoch, an older producer epoch, a partition with no replica here
    stale = write_marker(conn, P1, False, {topic: [0]}, epoch=3, coordinator_epoch=4)
    assert stale == {(topic, 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    older = write_marker(conn, P1, False, {topic: [0]}, epoch=2, coordinator_epoch=5)
    assert older == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    unknown = write_marker(conn, P1, False, {"nowhere": [0], topic: [9]}, epoch=3)
    assert unknown == {
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (topic, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    invalid = write_marker(conn, -1, False, {topic: [0]}, epoch=3)
    assert invalid == {(topic, 0): ErrorCode.INVALID_RECORD}
    assert conn.list_offset(topic, 0, -1)[1] == end
    assert committed_fetch(conn, topic)["last_stable_offset"] == 2

    # clients may not write markers, nor transactional batches without a transactional id
    control = build_end_txn_batch(
        ControlType.COMMIT, producer_id=P1, producer_epoch=3, coordinator_epoch=9
    )
    written = txn_produce(conn, topic, P1, 0, [], records=control)
    assert written["error_code"] == ErrorCode.INVALID_RECORD
    # (without a transactional id the whole request fails first, as Kafka's does)
    unauthorized = conn.produce(topic, 0, control)
    assert unauthorized["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    refused = txn_produce(conn, topic, P2, 0, [b"z"], transactional_id=None)
    assert refused["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert conn.list_offset(topic, 0, -1)[1] == end
    assert committed_fetch(conn, topic)["last_stable_offset"] == 2


def test_kill_9_mid_transaction_keeps_lso_and_aborted_index(broker_process: Any) -> None:
    proc = broker_process()
    with WireClient(proc.bootstrap) as conn:
        topic = make_topic(conn, "durable")
        assert txn_produce(conn, topic, P1, 0, [b"x1", b"x2"])["error_code"] == 0  # 0-1
        assert write_marker(conn, P1, False, {topic: [0]}) == {(topic, 0): 0}  # 2
        assert txn_produce(conn, topic, P2, 0, [b"c1"])["error_code"] == 0  # 3
        assert write_marker(conn, P2, True, {topic: [0]}) == {(topic, 0): 0}  # 4
        assert txn_produce(conn, topic, P3, 0, [b"o1"])["error_code"] == 0  # 5, open
        before = committed_fetch(conn, topic)
    assert before["last_stable_offset"] == 5
    assert before["aborted_transactions"] == [{"producer_id": P1, "first_offset": 0}]
    proc.kill()
    proc.start()
    with WireClient(proc.bootstrap) as conn:
        after = wait_for(lambda: _leading(conn, topic))
        assert after["high_watermark"] == 6
        assert after["last_stable_offset"] == 5
        assert after["aborted_transactions"] == before["aborted_transactions"]
        assert confluent_values(proc.bootstrap, topic, "read_committed") == [b"c1"]
        # the transaction left open is still open: its commit is accepted and read
        assert write_marker(conn, P3, True, {topic: [0]}) == {(topic, 0): 0}
        assert confluent_values(proc.bootstrap, topic, "read_committed") == [b"c1", b"o1"]


def _leading(conn: WireClient, topic: str) -> dict[str, Any] | None:
    part = committed_fetch(conn, topic)
    return part if part["error_code"] == ErrorCode.NONE and part["high_watermark"] > 0 else None
