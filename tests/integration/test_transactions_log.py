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
from txn_wire import committed_fetch, txn_produce, write_marker

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.builder import build_batch
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.types import TopicPartition as LogbusTopicPartition

LIST_OFFSETS_V = 7








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


def test_aborted_transactions_listed_are_those_of_the_segment_read(
    broker: Any, conn: WireClient
) -> None:
    # Small segments: each transaction and its marker roll into segments of their own, so a
    # read from the start returns the first segment only.
    topic = "segmented"
    assert conn.create_topic(topic, 1, {"segment.bytes": "300"})[0] == ErrorCode.NONE
    first_offsets = []
    for i in range(6):
        pid = P1 + i
        first_offsets.append(txn_produce(conn, topic, pid, 0, [b"x" * 100])["base_offset"])
        assert write_marker(conn, pid, False, {topic: [0]}) == {(topic, 0): 0}
    log = broker.broker.services.replica_manager.partition(topic, 0).log
    assert len(log.segments) > 3
    part = committed_fetch(conn, topic)
    first_segment_end = log.segments[1].base_offset
    listed = [(a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"]]
    expected = [
        (P1 + i, first) for i, first in enumerate(first_offsets) if first < first_segment_end
    ]
    assert listed == expected and 0 < len(listed) < 6
    # from the last transaction's offset the list holds it alone
    part = committed_fetch(conn, topic, first_offsets[-1])
    last = {"producer_id": P1 + 5, "first_offset": first_offsets[-1]}
    assert part["aborted_transactions"] == [last]
