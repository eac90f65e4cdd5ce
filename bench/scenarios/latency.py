"""L1: end-to-end latency at a fixed rate (10,000 records/s of 1 KiB at full scale),
acks=all, from send to receipt: a pacing producer on the main thread stamps each value
with the monotonic clock, a consumer thread reads them back. Peer: Redis XADD (the records
due in each 1 ms tick, one pipeline) and XREAD BLOCK at the same rate."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench import load_kafka, load_redis
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.scenarios.common import KIB, PARTITIONS, settle

WARMUP_FRACTION = 0.1  # samples of the first 10% of the run are dropped (connections, caches)
TICK = 0.001
# librdkafka's default. With linger.ms=0 every record at 10,000/s is its own request, and
# at the broker's per-request cost (R1) they queue: p50 was 614 ms on a loaded machine.
LINGER_MS = 5

LATENCY = {
    "p99_ms": ("p99 ms", False),
    "p50_ms": ("p50 ms", False),
    "p999_ms": ("p99.9 ms", False),
    "max_ms": ("max ms", False),
    "records_s": ("records/s sent", True),
    "cpu_cores": ("server CPU cores", False),  # the logbus rows: CPU s per s while paced
}


def stamped(value: bytes) -> bytes:
    return time.perf_counter_ns().to_bytes(8, "big") + value[8:]


def pace(rate: int, seconds: float, send: Callable[[int], None],
         ctx: Context) -> tuple[int, float]:
    """Call send(n) every tick with the number of records due; returns (sent, elapsed)."""
    total = int(rate * seconds)
    ctx.progress.begin(f"{rate:,} records/s for {seconds:g} s", total)
    sent = 0
    start = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        if due > sent:
            send(due - sent)
            ctx.progress.advance(due - sent, (due - sent) * KIB)
            sent = due
        time.sleep(TICK / 2)
    elapsed = time.perf_counter() - start
    ctx.progress.end()
    return sent, elapsed


def summarize(latencies_ns: list[int], sent: int, elapsed: float) -> Metrics:
    kept = sorted(latencies_ns[int(len(latencies_ns) * WARMUP_FRACTION):])
    ms = [v / 1e6 for v in kept]
    return {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
            "p999_ms": percentile(ms, 99.9), "max_ms": ms[-1] if ms else float("nan"),
            "records_s": sent / elapsed, "samples": float(len(ms))}


class Receiver(threading.Thread):
    def __init__(self, poll: Callable[[], list[bytes]], expected: int) -> None:
        super().__init__(name="latency-receiver", daemon=True)
        self.poll = poll
        self.expected = expected
        self.latencies: list[int] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while len(self.latencies) < self.expected and not self.stop.is_set():
                values = self.poll()
                now = time.perf_counter_ns()
                self.latencies.extend(now - int.from_bytes(v[:8], "big") for v in values)
        except BaseException as exc:  # reported by the measuring thread
            self.error = exc

    def finish(self, timeout: float = 60.0) -> list[int]:
        self.join(timeout)
        self.stop.set()
        self.join(5)
        if self.error is not None:
            raise self.error
        if len(self.latencies) < self.expected:
            raise RuntimeError(f"received {len(self.latencies)} of {self.expected} records")
        return self.latencies


def _switch_interval(fn: Callable[[], Metrics]) -> Metrics:
    """Two threads share the GIL: a short switch interval keeps the receiver from waiting
    up to 5 ms for the pacing loop (the same for both systems)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        return fn()
    finally:
        sys.setswitchinterval(old)


def logbus_run(ctx: Context) -> Metrics:
    server = ctx.server("logbus")
    topic = load_kafka.unique_name("L1")
    load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)
    try:
        return kafka_latency_run(ctx, server.bootstrap, topic, server.sampler)
    finally:
        load_kafka.delete_topic(server.bootstrap, topic)


def kafka_latency_run(ctx: Context, bootstrap: str, topic: str,
                      sampler: Callable[[], Any]) -> Metrics:
    """One latency run on an existing, empty topic of PARTITIONS partitions (L1 on the
    single broker, L2 on the cluster): the same clients, settings and clock. `sampler`
    takes the servers' CPU time around the paced part ("server CPU cores": CPU seconds
    per second, summed over a cluster's brokers)."""
    rate, seconds = ctx.scale.latency_rate, ctx.scale.latency_seconds
    value = load_kafka.make_values(KIB, 1)[0]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "enable.auto.commit": False, "enable.partition.eof": False})
    errors = load_kafka.DeliveryErrors()
    producer = Producer(load_kafka.producer_config(
        bootstrap, acks="all", **{"linger.ms": LINGER_MS, "on_delivery": errors}))

    def poll() -> list[bytes]:
        # consume(n, timeout) would wait for n records or the timeout: poll returns the
        # first record that arrives, as XREAD BLOCK does
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            return []
        return [message.value()]

    def measure() -> Metrics:
        # the topic is new: reading from its start sees every record; one poll first so
        # the consumer is connected and long-polling before the clock starts
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        consumer.consume(1, 1.0)
        receiver = Receiver(poll, int(rate * seconds))
        receiver.start()

        def send(n: int) -> None:
            for _ in range(n):
                producer.produce(topic, stamped(value))
            producer.poll(0)

        with sampler() as usage:
            sent, elapsed = pace(rate, seconds, send, ctx)
        producer.flush(60)
        errors.check()
        metrics = summarize(receiver.finish(), sent, elapsed)
        metrics["cpu_cores"] = usage.usage.cpu_seconds / elapsed
        return metrics

    try:
        return _switch_interval(measure)
    finally:
        consumer.close()


def redis_run(ctx: Context) -> Metrics:
    server = ctx.server("redis")
    key = load_kafka.unique_name("L1")
    rate, seconds = ctx.scale.latency_rate, ctx.scale.latency_seconds
    value = load_kafka.make_values(KIB, 1)[0]
    writer = load_redis.RespConnection(server.port)
    reader = load_redis.RespConnection(server.port)
    # a first entry gives the reader a concrete id to read after (no race with "$")
    last_id = [writer.call(b"XADD", key.encode(), b"*", load_redis.FIELD, b"start")]

    def poll() -> list[bytes]:
        reply: Any = reader.call(b"XREAD", b"COUNT", b"1000", b"BLOCK", b"100", b"STREAMS",
                                 key.encode(), last_id[0])
        if not reply:
            return []
        entries = reply[0][1]
        last_id[0] = entries[-1][0]
        return [fields[1] for _id, fields in entries]

    def measure() -> Metrics:
        receiver = Receiver(poll, int(rate * seconds))
        receiver.start()

        def send(n: int) -> None:
            writer.send(b"".join(load_redis.xadd_command(key, stamped(value))
                                 for _ in range(n)))
            for _ in range(n):
                writer.reply()

        sent, elapsed = pace(rate, seconds, send, ctx)
        return summarize(receiver.finish(), sent, elapsed)

    try:
        return _switch_interval(measure)
    finally:
        writer.close()
        reader.close()
        load_redis.delete(server.port, key)


def _cases(ctx: Context) -> list[Case]:
    note = f"{ctx.scale.latency_rate:,}/s for {ctx.scale.latency_seconds:g} s per run"
    return [
        Case("1 KiB acks=all", "logbus", logbus_run, setup=settle,
             note=note + f", linger.ms={LINGER_MS}"),
        Case("1 KiB XADD/XREAD BLOCK", "redis", redis_run, setup=settle, note=note),
    ]


L1 = Scenario("L1", "End-to-end latency at a fixed rate", _cases, LATENCY,
              "send to receipt, 1 KiB values, acks=all, first 10% of each run dropped")
