"""kafka-python and aiokafka against a real broker, the same cases for both: every codec,
record shapes, size limits, partitioning, idempotence, acks, seeking, timestamps and offset
queries.

Consumers use `group_id=None` and manual assignment (groups: `test_groups_*.py`). aiokafka
runs behind `BlockingAiokafka`, which drives its coroutines on an event loop of its own,
so one test body exercises both clients' consumer APIs."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from compat_clients import (
    CODEC_IDS,
    CODECS,
    CONSUMERS,
    MESSAGE_MAX_BYTES,
    PRODUCERS,
    Delivery,
    Got,
    Msg,
    aiokafka_consumer,
    aiokafka_poll,
    expected,
    kafka_python_consumer,
    kafka_python_poll,
    log_end_offset,
    new_topic,
    sample_messages,
    stored_batches,
)

from kafka_wire import create_topic, wait_for
from logbus.client.partitioner import partition_for_key
from logbus.protocol import ErrorCode

pytestmark = pytest.mark.timeout(90)

T = TypeVar("T")


class BlockingKafkaPython:
    """kafka-python's consumer, as it is (its API is blocking)."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import TopicPartition

        self.tp = TopicPartition
        self.consumer = kafka_python_consumer(bootstrap)

    def poll(self, count: int) -> list[Got]:
        return kafka_python_poll(self.consumer, count)

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.consumer, method)(*args)

    def close(self) -> None:
        self.consumer.close()


class BlockingAiokafka:
    """aiokafka's consumer, every call run to completion on an event loop of its own."""

    def __init__(self, bootstrap: str) -> None:
        from aiokafka import TopicPartition

        self.tp = TopicPartition
        self.loop = asyncio.new_event_loop()

        async def start() -> Any:
            consumer = aiokafka_consumer(bootstrap)
            await consumer.start()
            return consumer

        self.consumer = self.run(start())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def poll(self, count: int) -> list[Got]:
        return self.run(aiokafka_poll(self.consumer, count))

    def call(self, method: str, *args: Any) -> Any:
        """The method, called inside the loop (some of its plain methods need one too)."""

        async def inside() -> Any:
            result = getattr(self.consumer, method)(*args)
            return await result if asyncio.iscoroutine(result) else result

        return self.run(inside())

    def close(self) -> None:
        try:
            self.run(self.consumer.stop())
        finally:
            self.loop.close()


@dataclass(frozen=True)
class Client:
    name: str
    consumer_class: type[BlockingKafkaPython] | type[BlockingAiokafka]
    null_header: bool  # kafka-python cannot send a header with a null value
    too_large_config: dict[str, Any]  # kafka-python retries MESSAGE_TOO_LARGE unless told
    idempotent_codec: str

    def produce(
        self, bootstrap: str, topic: str, msgs: list[Msg], config: dict[str, Any] | None = None
    ) -> list[Delivery]:
        return PRODUCERS[self.name](bootstrap, topic, msgs, config)

    def consume(
        self, bootstrap: str, topic: str, partition: int, start: int, count: int
    ) -> list[Got]:
        return CONSUMERS[self.name](bootstrap, topic, partition, start, count)


CLIENTS = [
    Client("kafka-python", BlockingKafkaPython, False, {"retries": 0}, "gzip"),
    Client("aiokafka", BlockingAiokafka, True, {}, "zstd"),
]


@pytest.fixture(params=CLIENTS, ids=[c.name for c in CLIENTS])
def client(request: pytest.FixtureRequest) -> Client:
    chosen: Client = request.param
    return chosen


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_every_codec(broker: Any, client: Client, codec: str) -> None:
    topic = new_topic()
    msgs = sample_messages(40, null_header=client.null_header)
    compression = None if codec == "none" else codec
    deliveries = client.produce(broker.bootstrap, topic, msgs, {"compression_type": compression})
    assert deliveries == [Delivery(0, i, None) for i in range(40)]
    assert client.consume(broker.bootstrap, topic, 0, 0, 40) == expected(msgs)
    batches = stored_batches(broker.bootstrap, topic)
    assert batches
    assert {b.compression for b in batches} == {CODEC_IDS[codec]}


def test_large_record_just_under_message_max_bytes(broker: Any, client: Client) -> None:
    topic = new_topic()
    value = os.urandom(MESSAGE_MAX_BYTES - 200)
    assert client.produce(broker.bootstrap, topic, [Msg(b"big", value)]) == [Delivery(0, 0, None)]
    got = client.consume(broker.bootstrap, topic, 0, 0, 1)
    assert [(r.key, r.value) for r in got] == [(b"big", value)]


def test_record_over_message_max_bytes_is_rejected_and_not_stored(
    broker: Any, client: Client
) -> None:
    topic = new_topic()
    assert client.produce(broker.bootstrap, topic, [Msg(b"k", b"small")]) == [
        Delivery(0, 0, None)
    ]
    too_big = Msg(b"big", os.urandom(MESSAGE_MAX_BYTES))
    (failed,) = client.produce(broker.bootstrap, topic, [too_big], client.too_large_config)
    assert failed.error == ErrorCode.MESSAGE_TOO_LARGE
    assert log_end_offset(broker.bootstrap, topic) == 1
    assert client.produce(broker.bootstrap, topic, [Msg(b"k", b"after")]) == [
        Delivery(0, 1, None)
    ]
    got = client.consume(broker.bootstrap, topic, 0, 0, 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"small"), (1, b"after")]


def test_keyed_records_over_twelve_partitions(broker: Any, client: Client) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 12)
    keys = [f"user-{k}".encode() for k in range(48)]
    msgs = [Msg(keys[i % len(keys)], f"v{i}".encode()) for i in range(480)]
    deliveries = client.produce(broker.bootstrap, topic, msgs)
    by_partition: dict[int, list[Msg]] = {}
    for msg, d in zip(msgs, deliveries, strict=True):
        assert d.error is None
        assert msg.key is not None
        assert d.partition == partition_for_key(msg.key, 12)  # murmur2, as Java
        by_partition.setdefault(d.partition, []).append(msg)
    assert len(by_partition) > 6
    for partition, sent in by_partition.items():
        got = client.consume(broker.bootstrap, topic, partition, 0, len(sent))
        assert [(r.offset, r.key, r.value) for r in got] == [
            (i, m.key, m.value) for i, m in enumerate(sent)
        ]


def test_idempotent_producer(broker: Any, client: Client) -> None:
    topic = new_topic()
    msgs = [Msg(f"k{i % 5}".encode(), f"v{i}".encode()) for i in range(200)]
    deliveries = client.produce(
        broker.bootstrap,
        topic,
        msgs,
        {"enable_idempotence": True, "acks": "all", "compression_type": client.idempotent_codec},
    )
    assert deliveries == [Delivery(0, i, None) for i in range(200)]
    got = client.consume(broker.bootstrap, topic, 0, 0, 200)
    assert [r.value for r in got] == [m.value for m in msgs]
    batches = stored_batches(broker.bootstrap, topic)
    assert len({b.producer_id for b in batches}) == 1
    assert batches[0].producer_id >= 0
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker: Any, client: Client, acks: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    msgs = [Msg(None, f"acks-{acks}-{i}".encode()) for i in range(100)]
    deliveries = client.produce(broker.bootstrap, topic, msgs, {"acks": acks})
    assert all(d.error is None for d in deliveries)
    if acks != 0:
        assert [d.offset for d in deliveries] == list(range(100))
    wait_for(lambda: log_end_offset(broker.bootstrap, topic) == 100)
    got = client.consume(broker.bootstrap, topic, 0, 0, 100)
    assert [r.value for r in got] == [m.value for m in msgs]


def test_start_at_an_offset_and_seek(broker: Any, client: Client) -> None:
    topic = new_topic()
    client.produce(broker.bootstrap, topic, [Msg(None, f"v{i}".encode()) for i in range(30)])
    consumer = client.consumer_class(broker.bootstrap)
    try:
        tp = consumer.tp(topic, 0)
        consumer.call("assign", [tp])
        consumer.call("seek", tp, 17)
        got = consumer.poll(13)
        assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(17, 30)]
        consumer.call("seek", tp, 5)
        got = consumer.poll(25)
        assert [r.offset for r in got] == list(range(5, 30))
        consumer.call("seek_to_beginning", tp)
        assert consumer.call("position", tp) == 0
        consumer.call("seek_to_end", tp)
        assert consumer.call("position", tp) == 30
    finally:
        consumer.close()


def test_offsets_for_times_and_consume_from_a_timestamp(broker: Any, client: Client) -> None:
    topic = new_topic()
    base = int(time.time() * 1000) - 100_000
    msgs = [Msg(None, f"v{i}".encode(), timestamp=base + i * 1000) for i in range(20)]
    client.produce(broker.bootstrap, topic, msgs)
    consumer = client.consumer_class(broker.bootstrap)
    try:
        tp = consumer.tp(topic, 0)

        def lookup(ts: int) -> tuple[int, int] | None:
            found = consumer.call("offsets_for_times", {tp: ts})[tp]
            return None if found is None else (found.offset, found.timestamp)

        assert lookup(base - 1) == (0, base)
        assert lookup(base + 5000) == (5, base + 5000)
        assert lookup(base + 5500) == (6, base + 6000)
        assert lookup(base + 19_001) is None
        consumer.call("assign", [tp])
        start = lookup(base + 12_345)
        assert start is not None
        consumer.call("seek", tp, start[0])
        got = consumer.poll(7)
        assert [(r.offset, r.timestamp) for r in got] == [
            (i, base + i * 1000) for i in range(13, 20)
        ]
    finally:
        consumer.close()


def test_list_offsets_earliest_and_latest(broker: Any, client: Client) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 3)
    consumer = client.consumer_class(broker.bootstrap)
    try:
        tps = [consumer.tp(topic, p) for p in range(3)]
        assert consumer.call("beginning_offsets", tps) == dict.fromkeys(tps, 0)
        assert consumer.call("end_offsets", tps) == dict.fromkeys(tps, 0)
        msgs = [Msg(None, b"x", partition=p) for p in (0, 1, 1, 2, 2, 2)]
        client.produce(broker.bootstrap, topic, msgs)
        assert consumer.call("beginning_offsets", tps) == dict.fromkeys(tps, 0)
        assert consumer.call("end_offsets", tps) == {tps[0]: 1, tps[1]: 2, tps[2]: 3}
    finally:
        consumer.close()
