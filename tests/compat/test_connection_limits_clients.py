"""Third-party clients against a broker that enforces Kafka's connection settings: held
back by queued.max.request.bytes, closed when idle, they lose nothing."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from compat_clients import (
    Delivery,
    Msg,
    confluent_consume,
    confluent_produce,
    kafka_python_produce,
    log_end_offset,
    new_topic,
)

from kafka_wire import create_topic

pytestmark = pytest.mark.timeout(180)


def test_producers_held_back_by_queued_max_request_bytes_lose_nothing(
    broker_factory: Any,
) -> None:
    # A pool as small as Kafka allows (the largest request): most requests wait.
    broker = broker_factory(
        queued_max_request_bytes="262144", socket_request_max_bytes="262144"
    )
    topic = new_topic("pool")
    create_topic(broker.bootstrap, topic, 3)
    per_producer = 1500
    batches: dict[str, list[Msg]] = {
        name: [
            Msg(f"{name}-{i}".encode(), os.urandom(1000), partition=i % 3)
            for i in range(per_producer)
        ]
        for name in ("confluent-a", "confluent-b", "kafka-python")
    }
    results: dict[str, list[Delivery]] = {}

    def produce(name: str) -> None:
        if name == "kafka-python":  # batches of 16 KiB
            results[name] = kafka_python_produce(broker.bootstrap, topic, batches[name])
        else:  # requests within socket.request.max.bytes
            small = {"batch.size": 60000, "message.max.bytes": 200000}
            results[name] = confluent_produce(broker.bootstrap, topic, batches[name], small)

    threads = [threading.Thread(target=produce, args=(name,)) for name in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(100)
    for name, deliveries in results.items():
        assert len(deliveries) == per_producer, name
        assert all(d.error is None for d in deliveries), name
    assert set(results) == set(batches)
    ends = [log_end_offset(broker.bootstrap, topic, p) for p in range(3)]
    assert sum(ends) == 3 * per_producer
    stored = {
        (got.key, got.value)
        for p in range(3)
        for got in confluent_consume(broker.bootstrap, topic, p, 0, ends[p])
    }
    assert stored == {(m.key, m.value) for msgs in batches.values() for m in msgs}


def test_a_client_whose_idle_connection_was_closed_carries_on(broker_factory: Any) -> None:
    from confluent_kafka import Producer

    broker = broker_factory(connections_max_idle_ms="1000")
    topic = new_topic("idle")
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "reconnect.backoff.max.ms": 200}
    )
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        errors.append(error)

    producer.produce(topic, b"before", on_delivery=delivered)
    assert producer.flush(60) == 0
    # Idle timeouts pass: the broker closes the producer's connections.
    threading.Event().wait(3.0)
    producer.produce(topic, b"after", on_delivery=delivered)
    assert producer.flush(60) == 0
    assert errors == [None, None]
    got = confluent_consume(broker.bootstrap, topic, 0, 0, 2)
    assert [g.value for g in got] == [b"before", b"after"]
