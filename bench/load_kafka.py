"""Load generated with librdkafka (confluent-kafka), so the client is not the bottleneck:
produce a volume at full speed, consume a topic from offset 0, and the topic admin the
scenarios need."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from bench.core import Metrics
from bench.progress import Progress

VALUE_POOL = 256
ADVANCE_EVERY = 4096


def make_values(size: int, count: int = VALUE_POOL, seed: int = 7) -> list[bytes]:
    """Values that compress about 2:1 (half random bytes, half a repeated log-like text),
    so the zstd variant has something to do; the same pool feeds every system."""
    rnd = __import__("random").Random(seed)
    text = b'{"level":"info","service":"checkout","msg":"order accepted","region":"eu-1"} '
    values = []
    for _ in range(count):
        half = size // 2
        random_part = rnd.randbytes(half)
        filler = (text * (size // len(text) + 1))[: size - half]
        values.append(random_part + filler)
    return values


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, replication_factor, config=config or {})
    for future in admin.create_topics([new]).values():
        future.result(30)


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        future.result(60)


class DeliveryErrors:
    """Collects delivery errors (librdkafka reports only errors: delivery.report.only.error)."""

    def __init__(self) -> None:
        self.first: Any = None
        self.count = 0

    def __call__(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.count += 1
            if self.first is None:
                self.first = err

    def check(self) -> None:
        if self.count:
            raise RuntimeError(f"{self.count} records not delivered, first: {self.first}")


def producer_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.size": 1_000_000,  # "large batches": librdkafka's cap per partition batch
        "batch.num.messages": 100_000,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 512 * 1024,
        "queue.buffering.max.messages": 2_000_000,
        "delivery.report.only.error": True,
        "enable.idempotence": False,
    }
    config.update(overrides)
    return config


def produce(bootstrap: str, topic: str, value_size: int, total_bytes: int,
            progress: Progress, **overrides: Any) -> Metrics:
    """Produce `total_bytes` of values of `value_size` bytes as fast as librdkafka takes
    them; the clock stops when every record is acknowledged (flush)."""
    errors = DeliveryErrors()
    producer = Producer(producer_config(bootstrap, on_delivery=errors, **overrides))
    values = make_values(value_size)
    count = max(1, total_bytes // value_size)
    mask = VALUE_POOL - 1
    send = producer.produce
    poll = producer.poll
    # one record first, so connecting and learning the leaders are not on the clock
    send(topic, values[0])
    producer.flush(60)
    progress.begin(f"produce {count:,} x {value_size} B", count)
    start = time.perf_counter()
    for i in range(count):
        value = values[i & mask]
        while True:
            try:
                send(topic, value)
                break
            except BufferError:
                poll(0.005)
        if i % ADVANCE_EVERY == ADVANCE_EVERY - 1:
            poll(0)
            progress.advance(ADVANCE_EVERY, ADVANCE_EVERY * value_size)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    progress.end()
    if remaining:
        raise RuntimeError(f"{remaining} records still unacknowledged after 300 s")
    errors.check()
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "seconds": elapsed, "records": float(count), "written": float(count + 1)}


def consume(bootstrap: str, topic: str, partitions: int, expected: int, value_size: int,
            progress: Progress, **overrides: Any) -> Metrics:
    """Read `expected` records of a topic from offset 0 with a fresh consumer (assigned,
    no group), from the first request to the last record."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": unique_name("bench"),
        "enable.auto.commit": False,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 256 * 1024,
        "enable.partition.eof": False,
    }
    config.update(overrides)
    consumer = Consumer(config)
    clock = ReadClock(expected)
    progress.begin(f"consume {expected:,} x {value_size} B", expected)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 600
        while not clock.done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {clock.records} of {expected} records in 600 s")
            batch = consumer.consume(10_000, 0.05)
            nbytes = 0
            for message in batch:
                err = message.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                nbytes += len(message.value())
            clock.add(len(batch), nbytes)
            progress.advance(len(batch), nbytes)
    finally:
        consumer.close()
        progress.end()
    return clock.metrics(value_size)


class ReadClock:
    """Throughput of a reader from its first batch to its last: the first batch's arrival
    starts the clock and its records are not counted, so connecting, looking up offsets
    and a client's start-up pauses are not on the clock (the same for every reader)."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.records = 0
        self.counted_records = 0
        self.counted_bytes = 0
        self.created = time.perf_counter()
        self.start = 0.0
        self.end = 0.0

    def add(self, records: int, nbytes: int) -> None:
        if not records:
            return
        now = time.perf_counter()
        if self.records:
            self.counted_records += records
            self.counted_bytes += nbytes
        else:
            self.start = now
        self.records += records
        self.end = now

    def done(self) -> bool:
        return self.records >= self.expected

    def metrics(self, value_size: int) -> Metrics:
        if self.counted_records:
            elapsed = max(self.end - self.start, 1e-9)
            records, nbytes = self.counted_records, self.counted_bytes
        else:  # everything came in one batch: the clock runs from the reader's creation
            elapsed = max(self.end - self.created, 1e-9)
            records, nbytes = self.records, self.records * value_size
        return {"mb_s": nbytes / elapsed / 1e6, "records_s": records / elapsed,
                "seconds": elapsed, "records": float(self.records)}
