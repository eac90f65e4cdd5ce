"""The same round trip through each third-party client, whatever the listener's security:
create a topic, produce `count` values `v0`, `v1`, ... and consume them back in a group.
The security tests (TLS, SASL, pre-authentication limits) pass each client its own
security settings."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 30


def values(count: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(count)]


def produce_consume_confluent(config: dict[str, Any], topic: str, count: int = 20) -> None:
    """confluent-kafka with `config`; the group commits what it read."""
    admin = AdminClient(config)
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    futures[topic].result(TIMEOUT)
    producer = Producer(config)
    for value in values(count):
        producer.produce(topic, value, key=b"k")
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        received: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(received) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                received.append(message.value())
        assert received == values(count)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def kafka_python_round_trip(common: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """kafka-python with the keyword arguments `common`: the values consumed."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    admin = KafkaAdminClient(**common)
    try:
        admin.create_topics([KpNewTopic(topic, 1, 1)])
        assert topic in admin.list_topics()
    finally:
        admin.close()
    producer = KafkaProducer(**common)
    try:
        for value in values(count):
            producer.send(topic, value)
        producer.flush(TIMEOUT)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
        consumer_timeout_ms=15000, **common,
    )  # fmt: skip
    try:
        return [m.value for _, m in zip(range(count), consumer, strict=False)]
    finally:
        consumer.close()


async def aiokafka_round_trip(common: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """aiokafka with the keyword arguments `common`: the values consumed."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    admin = AIOKafkaAdminClient(**common)
    await admin.start()
    try:
        await admin.create_topics([AioNewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        for value in values(count):
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **common
    )
    await consumer.start()
    received: list[bytes] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            async for message in consumer:
                received.append(message.value)
                if len(received) == count:
                    break
    finally:
        await consumer.stop()
    return received
