"""The clients' metrics by Kafka's names, checked against the traffic a real broker saw:
records sent, consumed, the lag after a partial read, commit latency."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import logbus
from logbus import aio
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition

PRODUCER_NAMES = {
    "record-send-rate", "record-send-total", "request-latency-avg", "request-latency-max",
    "batch-size-avg", "batch-size-max", "records-per-request-avg", "record-error-rate",
    "record-retry-rate", "outgoing-byte-rate", "buffer-available-bytes",
    "compression-rate-avg",
}
CONSUMER_NAMES = {
    "records-lag-max", "records-consumed-rate", "records-consumed-total",
    "bytes-consumed-rate", "fetch-rate", "fetch-latency-avg", "fetch-latency-max",
    "fetch-size-avg", "commit-latency-avg", "assigned-partitions",
}


def test_blocking_producer_and_consumer_metrics(broker: Any) -> None:
    topic = "metered"
    n = 1000
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, 2, 1)])
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap}, linger_ms=20, compression_type="gzip"
    ) as producer:
        before = producer.metrics()
        assert before.keys() >= PRODUCER_NAMES
        assert before["record-send-total"] == 0
        assert math.isnan(before["request-latency-avg"])
        assert before["buffer-available-bytes"] == 32 * 1024 * 1024
        for i in range(n):
            producer.send(topic, b"v" * 100, key=str(i).encode())
        producer.flush()
        m = producer.metrics()
    assert m["record-send-total"] == n
    assert m["record-error-rate"] == 0 and m["record-retry-rate"] == 0
    assert m["record-send-rate"] > 0 and m["outgoing-byte-rate"] > 0
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"]
    assert 0 < m["batch-size-avg"] <= m["batch-size-max"]
    assert 1 <= m["records-per-request-avg"] <= n
    # 100 identical bytes per value: gzip shrinks every batch well below its raw size.
    assert 0 < m["compression-rate-avg"] < 0.5
    assert m["buffer-available-bytes"] == 32 * 1024 * 1024  # all delivered, all freed

    with logbus.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "meters"},
        auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=100,
    ) as consumer:
        consumer.subscribe([topic])
        got = 0
        while got < 300:
            got += len(consumer.poll(1.0, max_records=300 - got))
        consumer.commit()
        m = consumer.metrics()
        assert m.keys() >= CONSUMER_NAMES
        assert m["records-consumed-total"] == got == 300
        assert m["assigned-partitions"] == 2
        assert m["commit-latency-avg"] > 0
        assert m["fetch-rate"] > 0 and m["fetch-latency-avg"] >= 0
        assert m["fetch-size-avg"] > 0
        # Lag is recorded as records are handed out (as Kafka's consumer does): at least
        # what remains of each partition read from so far.
        tps = [TopicPartition(topic, p) for p in range(2)]
        ends = consumer.end_offsets(tps)
        read = {tp: consumer.position(tp) for tp in tps if consumer.position(tp) > 0}
        assert read
        assert max(ends[tp] - pos for tp, pos in read.items()) <= m["records-lag-max"] <= n
        while got < n:
            got += len(consumer.poll(1.0))
        m = consumer.metrics()
        assert m["records-consumed-total"] == n
        assert m["bytes-consumed-rate"] > 0
    assert consumer.metrics()["records-consumed-total"] == n  # readable after close


def test_asyncio_clients_metrics(broker: Any) -> None:
    async def main() -> None:
        async with aio.Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            for i in range(50):
                await producer.send("ametered", str(i).encode())
            await producer.flush()
            assert producer.metrics()["record-send-total"] == 50
        async with aio.Consumer(
            {"bootstrap.servers": broker.bootstrap}, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([TopicPartition("ametered", 0)])
            got = 0
            while not got:  # the first poll that returns records: its lag is the largest
                got = len(await consumer.poll(1000, max_records=20))
            m = consumer.metrics()
            assert m["records-consumed-total"] == got
            assert m["records-lag-max"] == 50 - got
            assert m["assigned-partitions"] == 1
            assert math.isnan(m["commit-latency-avg"])

    asyncio.run(main())


def test_failed_records_count_as_errors(broker: Any) -> None:
    with logbus.Producer(
        {"bootstrap.servers": broker.bootstrap},
        linger_ms=0, request_timeout_ms=500, delivery_timeout_ms=1000,
        reconnect_backoff_max_ms=100,
    ) as producer:
        producer.send("doomed", b"first").get(30)  # metadata known, then the broker goes
        broker.stop()
        futures = [producer.send("doomed", b"x") for _ in range(10)]
        for future in futures:
            with pytest.raises(KafkaError):
                future.get(30)
        m = producer.metrics()
        assert m["record-error-total"] == 10
        assert m["record-error-rate"] > 0
        assert m["record-send-total"] >= 1
