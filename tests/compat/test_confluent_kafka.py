"""confluent-kafka (librdkafka) against a real broker: every codec, record shapes, size
limits, partitioning, idempotence, acks, seeking, timestamps and offset queries.

Consumers use manual assignment (groups: `test_groups_confluent.py`)."""

from __future__ import annotations

import os
import time
import zlib
from typing import Any

import pytest
from compat_clients import (
    CODECS,
    MESSAGE_MAX_BYTES,
    Delivery,
    Msg,
    check_librdkafka_codec,
    confluent_consume,
    confluent_consumer,
    confluent_poll,
    confluent_produce,
    expected,
    log_end_offset,
    new_topic,
    sample_messages,
    stored_batches,
)
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_wire import create_topic, wait_for
from logbus.client.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_every_codec(broker: Any, codec: str) -> None:
    topic = new_topic()
    msgs = sample_messages(40)
    deliveries = confluent_produce(broker.bootstrap, topic, msgs, {"compression.type": codec})
    assert deliveries == [Delivery(0, i, None) for i in range(40)]
    assert confluent_consume(broker.bootstrap, topic, 0, 0, 40) == expected(msgs)
    # The broker keeps batches as the producer compressed them.
    check_librdkafka_codec(broker.bootstrap, topic, codec, old_feature_map=False)


def test_large_record_just_under_message_max_bytes(broker: Any) -> None:
    topic = new_topic()
    value = os.urandom(MESSAGE_MAX_BYTES - 200)
    deliveries = confluent_produce(broker.bootstrap, topic, [Msg(b"big", value)])
    assert deliveries == [Delivery(0, 0, None)]
    got = confluent_consume(broker.bootstrap, topic, 0, 0, 1)
    assert len(got) == 1
    assert got[0].key == b"big"
    assert got[0].value == value
    (batch,) = stored_batches(broker.bootstrap, topic)
    assert MESSAGE_MAX_BYTES - 200 < batch.size <= MESSAGE_MAX_BYTES


def test_record_over_message_max_bytes_is_rejected_and_not_stored(broker: Any) -> None:
    topic = new_topic()
    assert confluent_produce(broker.bootstrap, topic, [Msg(b"k", b"small")]) == [
        Delivery(0, 0, None)
    ]
    too_big = Msg(b"big", os.urandom(MESSAGE_MAX_BYTES))
    (failed,) = confluent_produce(broker.bootstrap, topic, [too_big], {"retries": 0})
    assert failed.error == KafkaError.MSG_SIZE_TOO_LARGE
    assert log_end_offset(broker.bootstrap, topic) == 1
    # The partition still takes records, at the next offset.
    assert confluent_produce(broker.bootstrap, topic, [Msg(b"k", b"after")]) == [
        Delivery(0, 1, None)
    ]
    got = confluent_consume(broker.bootstrap, topic, 0, 0, 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"small"), (1, b"after")]


@pytest.mark.parametrize(
    ("partitioner", "choose"),
    [
        # librdkafka's default: CRC-32 of the key
        ("consistent_random", lambda key, n: zlib.crc32(key) % n),
        # the Java client's: murmur2 of the key
        ("murmur2_random", partition_for_key),
    ],
)
def test_keyed_records_over_twelve_partitions(broker: Any, partitioner: str, choose: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 12)
    keys = [f"user-{k}".encode() for k in range(48)]
    msgs = [Msg(keys[i % len(keys)], f"v{i}".encode()) for i in range(480)]
    deliveries = confluent_produce(broker.bootstrap, topic, msgs, {"partitioner": partitioner})
    assert all(d.error is None for d in deliveries)
    by_partition: dict[int, list[Msg]] = {}
    for msg, d in zip(msgs, deliveries, strict=True):
        assert d.partition == choose(msg.key, 12)
        by_partition.setdefault(d.partition, []).append(msg)
    assert len(by_partition) > 6  # 48 keys spread over most partitions
    for partition, sent in by_partition.items():
        got = confluent_consume(broker.bootstrap, topic, partition, 0, len(sent))
        assert [(r.offset, r.key, r.value) for r in got] == [
            (i, m.key, m.value) for i, m in enumerate(sent)
        ]


def test_idempotent_producer(broker: Any) -> None:
    topic = new_topic()
    msgs = [Msg(f"k{i % 5}".encode(), f"v{i}".encode()) for i in range(200)]
    deliveries = confluent_produce(
        broker.bootstrap, topic, msgs, {"enable.idempotence": True, "compression.type": "lz4"}
    )
    assert deliveries == [Delivery(0, i, None) for i in range(200)]
    got = confluent_consume(broker.bootstrap, topic, 0, 0, 200)
    assert [r.value for r in got] == [m.value for m in msgs]
    batches = stored_batches(broker.bootstrap, topic)
    assert len({b.producer_id for b in batches}) == 1
    assert batches[0].producer_id >= 0
    assert batches[0].producer_epoch >= 0
    # One producer session from sequence 0 to offset 0: sequences track offsets.
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: Any, acks: str) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    msgs = [Msg(None, f"acks-{acks}-{i}".encode()) for i in range(100)]
    deliveries = confluent_produce(broker.bootstrap, topic, msgs, {"acks": acks})
    assert all(d.error is None for d in deliveries)
    if acks != "0":
        assert [d.offset for d in deliveries] == list(range(100))
    wait_for(lambda: log_end_offset(broker.bootstrap, topic) == 100)
    got = confluent_consume(broker.bootstrap, topic, 0, 0, 100)
    assert [r.value for r in got] == [m.value for m in msgs]


def test_start_at_an_offset_and_seek(broker: Any) -> None:
    topic = new_topic()
    msgs = [Msg(None, f"v{i}".encode()) for i in range(30)]
    confluent_produce(broker.bootstrap, topic, msgs)
    consumer = confluent_consumer(broker.bootstrap)
    try:
        consumer.assign([TopicPartition(topic, 0, 17)])
        got = confluent_poll(consumer, 13)
        assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(17, 30)]
        consumer.seek(TopicPartition(topic, 0, 5))
        got = confluent_poll(consumer, 3)
        assert [r.offset for r in got] == [5, 6, 7]
    finally:
        consumer.close()


def test_offsets_for_times_and_consume_from_a_timestamp(broker: Any) -> None:
    topic = new_topic()
    base = int(time.time() * 1000) - 100_000
    msgs = [Msg(None, f"v{i}".encode(), timestamp=base + i * 1000) for i in range(20)]
    confluent_produce(broker.bootstrap, topic, msgs, {"linger.ms": 0})
    consumer = confluent_consumer(broker.bootstrap)
    try:

        def lookup(ts: int) -> int:
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert tp.error is None
            return int(tp.offset)

        assert lookup(base - 1) == 0
        assert lookup(base + 5000) == 5
        assert lookup(base + 5500) == 6
        assert lookup(base + 19_000) == 19
        assert lookup(base + 19_001) == -1  # no record at or after: the end
        consumer.assign([TopicPartition(topic, 0, lookup(base + 12_345))])
        got = confluent_poll(consumer, 7)
        assert [r.offset for r in got] == list(range(13, 20))
        assert got[0].timestamp == base + 13_000
    finally:
        consumer.close()


def test_list_offsets_earliest_latest_and_max_timestamp(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    consumer = confluent_consumer(broker.bootstrap)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 0)
        base = int(time.time() * 1000) - 50_000
        stamps = [base + i for i in range(25)]
        stamps[7] = base + 10_000  # the newest record is not the last one
        confluent_produce(broker.bootstrap, topic, [Msg(None, b"x", timestamp=ts) for ts in stamps])
        assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 25)

        def admin_offset(spec: Any) -> tuple[int, int]:
            result = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(10)
            return result.offset, result.timestamp

        assert admin_offset(OffsetSpec.earliest())[0] == 0
        assert admin_offset(OffsetSpec.latest())[0] == 25
        assert admin_offset(OffsetSpec.max_timestamp()) == (7, base + 10_000)
    finally:
        consumer.close()
