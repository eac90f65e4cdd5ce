"""Client quotas against librdkafka (confluent-kafka), on a broker in its own process:
a producer quota of 1 MiB/s holds within 10% over 10 s while a client with another
client id on the same broker is not throttled at all; librdkafka sees the throttle time
(its throttle callback fires); a consumer quota likewise.

Kafka measures a rate over `quota.window.num` samples and lets a new client send up to a
whole window's worth at once before throttling it. The broker here is started with a
10 s window (10 samples of 1 s), so "1 MiB/s over 10 s" is exactly what it enforces.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from admin_helpers import name
from confluent_kafka import Consumer, Producer

from logbus import Admin
from logbus.client.admin import ClientQuotaEntity, NewTopic

QUOTA = 1024 * 1024
SPAN = 9.8  # seconds measured: within the first 10 s window
PAYLOAD = b"x" * 10_000
WINDOWS = ("--override", "quota.window.num=10", "--override", "quota.window.size.seconds=1")


def set_quota(bootstrap: str, client_id: str, key: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_client_quotas({ClientQuotaEntity.of({"client-id": client_id}): {key: QUOTA}})
        assert admin.describe_client_quotas()[ClientQuotaEntity.of({"client-id": client_id})]


class ProduceRun:
    """One librdkafka producer producing as fast as it can for `seconds`."""

    def __init__(self, bootstrap: str, topic: str, client_id: str) -> None:
        self.throttles: list[float] = []
        self.acked = 0
        self.acked_in_span = 0
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "batch.size": 16384,
                "throttle_cb": lambda event: self.throttles.append(event.throttle_time),
            }
        )
        self.topic = topic

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked += len(msg.value())

    def run(self, seconds: float) -> None:
        producer = self.producer
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            try:
                producer.produce(self.topic, PAYLOAD, on_delivery=self._delivered)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.poll(0)
        self.acked_in_span = self.acked
        producer.purge()
        producer.flush(30)


@pytest.mark.slow
def test_producer_quota_holds_and_other_clients_are_unaffected(broker_process: Any) -> None:
    broker = broker_process(*WINDOWS)
    topic = name("quota")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    set_quota(broker.bootstrap, "throttled", "producer_byte_rate")
    throttled = ProduceRun(broker.bootstrap, topic, "throttled")
    free = ProduceRun(broker.bootstrap, topic, "free")
    other = threading.Thread(target=free.run, args=(SPAN,))
    other.start()
    throttled.run(SPAN)
    other.join(60)
    rate = throttled.acked_in_span / SPAN
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, rate / QUOTA
    # librdkafka was told how long to wait: its throttle callback fired
    assert throttled.throttles and max(throttled.throttles) > 0
    # the client with another id was never throttled, and went faster than the band the
    # quota holds the throttled one to (how much faster depends on the machine's load)
    assert free.throttles == []
    assert free.acked_in_span / SPAN > 1.1 * QUOTA


@pytest.mark.slow
def test_consumer_quota_holds(broker_process: Any) -> None:
    broker = broker_process(*WINDOWS)
    topic = name("quota")
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    loader = ProduceRun(broker.bootstrap, topic, "loader")
    while loader.acked < 30 * QUOTA:
        loader.run(1.0)
    set_quota(broker.bootstrap, "reader", "consumer_byte_rate")
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "reader",
            "group.id": name("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # fetches of a quarter of the quota: a throttled fetch is answered empty and
            # fetched again after the throttle time, so smaller ones track the rate closer
            "max.partition.fetch.bytes": QUOTA // 4,
            "fetch.max.bytes": QUOTA // 4,
            "message.max.bytes": QUOTA // 4,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    try:
        consumer.subscribe([topic])
        got = 0
        start = None
        while start is None or time.monotonic() - start < SPAN:
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue
            if start is None:
                start = time.monotonic()
            got += len(msg.value())
    finally:
        consumer.close()
    rate = got / SPAN
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA, rate / QUOTA
    assert throttles and max(throttles) > 0
