"""kafka-python against a real broker: every codec, record shapes, size limits,
partitioning, idempotence, acks, seeking, timestamps and offset queries.

Consumers use `group_id=None` and manual assignment (groups: `test_groups_kafka_python.py`)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from compat_clients import (
    CODEC_IDS,
    CODECS,
    MESSAGE_MAX_BYTES,
    Delivery,
    Msg,
    create_topic,
    expected,
    kafka_python_consume,
    kafka_python_consumer,
    kafka_python_poll,
    kafka_python_produce,
    log_end_offset,
    new_topic,
    sample_messages,
    stored_batches,
)
from kafka import TopicPartition

from kafka_wire import wait_for
from logbus.client.partitioner import partition_for_key
from logbus.protocol import ErrorCode

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_every_codec(broker: Any, codec: str) -> None:
    topic = new_topic()
    msgs = sample_messages(40, null_header=False)
    compression = None if codec == "none" else codec
    deliveries = kafka_python_produce(
        broker.bootstrap, topic, msgs, {"compression_type": compression}
    )
    assert deliveries == [Delivery(0, i, None) for i in range(40)]
    assert kafka_python_consume(broker.bootstrap, topic, 0, 0, 40) == expected(msgs)
    batches = stored_batches(broker.bootstrap, topic)
    assert batches
    assert {b.compression for b in batches} == {CODEC_IDS[codec]}


def test_large_record_just_under_message_max_bytes(broker: Any) -> None:
    topic = new_topic()
    value = os.urandom(MESSAGE_MAX_BYTES - 200)
    assert kafka_python_produce(broker.bootstrap, topic, [Msg(b"big", value)]) == [
        Delivery(0, 0, None)
    ]
    got = kafka_python_consume(broker.bootstrap, topic, 0, 0, 1)
    assert [(r.key, r.value) for r in got] == [(b"big", value)]


def test_record_over_message_max_bytes_is_rejected_and_not_stored(broker: Any) -> None:
    topic = new_topic()
    assert kafka_python_produce(broker.bootstrap, topic, [Msg(b"k", b"small")]) == [
        Delivery(0, 0, None)
    ]
    too_big = Msg(b"big", os.urandom(MESSAGE_MAX_BYTES))
    (failed,) = kafka_python_produce(broker.bootstrap, topic, [too_big], {"retries": 0})
    assert failed.error == ErrorCode.MESSAGE_TOO_LARGE
    assert log_end_offset(broker.bootstrap, topic) == 1
    assert kafka_python_produce(broker.bootstrap, topic, [Msg(b"k", b"after")]) == [
        Delivery(0, 1, None)
    ]
    got = kafka_python_consume(broker.bootstrap, topic, 0, 0, 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"small"), (1, b"after")]


def test_keyed_records_over_twelve_partitions(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 12)
    keys = [f"user-{k}".encode() for k in range(48)]
    msgs = [Msg(keys[i % len(keys)], f"v{i}".encode()) for i in range(480)]
    deliveries = kafka_python_produce(broker.bootstrap, topic, msgs)
    by_partition: dict[int, list[Msg]] = {}
    for msg, d in zip(msgs, deliveries, strict=True):
        assert d.error is None
        assert msg.key is not None
        assert d.partition == partition_for_key(msg.key, 12)  # murmur2, as Java
        by_partition.setdefault(d.partition, []).append(msg)
    assert len(by_partition) > 6
    for partition, sent in by_partition.items():
        got = kafka_python_consume(broker.bootstrap, topic, partition, 0, len(sent))
        assert [(r.offset, r.key, r.value) for r in got] == [
            (i, m.key, m.value) for i, m in enumerate(sent)
        ]


def test_idempotent_producer(broker: Any) -> None:
    topic = new_topic()
    msgs = [Msg(f"k{i % 5}".encode(), f"v{i}".encode()) for i in range(200)]
    deliveries = kafka_python_produce(
        broker.bootstrap,
        topic,
        msgs,
        {"enable_idempotence": True, "acks": "all", "compression_type": "gzip"},
    )
    assert deliveries == [Delivery(0, i, None) for i in range(200)]
    got = kafka_python_consume(broker.bootstrap, topic, 0, 0, 200)
    assert [r.value for r in got] == [m.value for m in msgs]
    batches = stored_batches(broker.bootstrap, topic)
    assert len({b.producer_id for b in batches}) == 1
    assert batches[0].producer_id >= 0
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker: Any, acks: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    msgs = [Msg(None, f"acks-{acks}-{i}".encode()) for i in range(100)]
    deliveries = kafka_python_produce(broker.bootstrap, topic, msgs, {"acks": acks})
    assert all(d.error is None for d in deliveries)
    if acks != 0:
        assert [d.offset for d in deliveries] == list(range(100))
    wait_for(lambda: log_end_offset(broker.bootstrap, topic) == 100)
    got = kafka_python_consume(broker.bootstrap, topic, 0, 0, 100)
    assert [r.value for r in got] == [m.value for m in msgs]


def test_start_at_an_offset_and_seek(broker: Any) -> None:
    topic = new_topic()
    kafka_python_produce(broker.bootstrap, topic, [Msg(None, f"v{i}".encode()) for i in range(30)])
    consumer = kafka_python_consumer(broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 17)
        got = kafka_python_poll(consumer, 13)
        assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(17, 30)]
        consumer.seek(tp, 5)
        got = kafka_python_poll(consumer, 25)
        assert [r.offset for r in got] == list(range(5, 30))
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 30
    finally:
        consumer.close()


def test_offsets_for_times_and_consume_from_a_timestamp(broker: Any) -> None:
    topic = new_topic()
    base = int(time.time() * 1000) - 100_000
    msgs = [Msg(None, f"v{i}".encode(), timestamp=base + i * 1000) for i in range(20)]
    kafka_python_produce(broker.bootstrap, topic, msgs)
    consumer = kafka_python_consumer(broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)

        def lookup(ts: int) -> tuple[int, int] | None:
            found = consumer.offsets_for_times({tp: ts})[tp]
            return None if found is None else (found.offset, found.timestamp)

        assert lookup(base - 1) == (0, base)
        assert lookup(base + 5000) == (5, base + 5000)
        assert lookup(base + 5500) == (6, base + 6000)
        assert lookup(base + 19_001) is None
        consumer.assign([tp])
        start = lookup(base + 12_345)
        assert start is not None
        consumer.seek(tp, start[0])
        got = kafka_python_poll(consumer, 7)
        assert [(r.offset, r.timestamp) for r in got] == [
            (i, base + i * 1000) for i in range(13, 20)
        ]
    finally:
        consumer.close()


def test_list_offsets_earliest_and_latest(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    consumer = kafka_python_consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        assert consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert consumer.end_offsets(tps) == dict.fromkeys(tps, 0)
        msgs = [Msg(None, b"x", partition=p) for p in (0, 1, 1, 2, 2, 2)]
        kafka_python_produce(broker.bootstrap, topic, msgs)
        assert consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
        assert consumer.end_offsets(tps) == {tps[0]: 1, tps[1]: 2, tps[2]: 3}
    finally:
        consumer.close()
