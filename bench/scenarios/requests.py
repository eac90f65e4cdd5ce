"""R1: small requests, one 100-byte record per request and one request in flight, for a
fixed time: requests/s and the latency percentiles of a request. logbus through librdkafka
(produce then flush, linger.ms=0, acks=1); peer: Redis XADD without pipelining."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer

from bench import load_kafka, load_redis
from bench.core import Case, Context, Metrics, Scenario, percentile

VALUE_SIZE = 100
REQUESTS = {
    "requests_s": ("requests/s", True),
    "p50_ms": ("p50 ms", False),
    "p99_ms": ("p99 ms", False),
}


def timed_loop(seconds: float, request: Callable[[], None], ctx: Context) -> Metrics:
    latencies: list[float] = []
    ctx.progress.begin(f"1 request in flight for {seconds:g} s", None)
    clock = time.perf_counter
    start = clock()
    end = start + seconds
    now = start
    while now < end:
        request()
        done = clock()
        latencies.append(done - now)
        now = done
        if len(latencies) % 256 == 0:
            ctx.progress.advance(256, 256 * VALUE_SIZE)
    elapsed = now - start
    ctx.progress.end()
    latencies.sort()
    return {"requests_s": len(latencies) / elapsed,
            "p50_ms": percentile(latencies, 50) * 1e3,
            "p99_ms": percentile(latencies, 99) * 1e3,
            "requests": float(len(latencies))}


def logbus_run(ctx: Context) -> Metrics:
    server = ctx.server("logbus")
    topic = load_kafka.unique_name("R1")
    load_kafka.create_topic(server.bootstrap, topic, 1)
    errors = load_kafka.DeliveryErrors()
    producer = Producer(load_kafka.producer_config(
        server.bootstrap, **{"linger.ms": 0, "max.in.flight": 1, "on_delivery": errors}))
    value = load_kafka.make_values(VALUE_SIZE, 1)[0]
    produce, flush = producer.produce, producer.flush
    try:
        produce(topic, value)  # connect and learn the topic's leader first
        flush(30)

        def request() -> None:
            produce(topic, value)
            flush(30)

        metrics = timed_loop(ctx.scale.request_seconds, request, ctx)
        errors.check()
        return metrics
    finally:
        load_kafka.delete_topic(server.bootstrap, topic)


def redis_run(ctx: Context) -> Metrics:
    server = ctx.server("redis")
    key = load_kafka.unique_name("R1")
    command = load_redis.xadd_command(key, load_kafka.make_values(VALUE_SIZE, 1)[0])
    with load_redis.RespConnection(server.port) as conn:
        send, reply = conn.send, conn.reply

        def request() -> None:
            send(command)
            reply()

        try:
            return timed_loop(ctx.scale.request_seconds, request, ctx)
        finally:
            conn.call(b"DEL", key.encode())


def _cases(ctx: Context) -> list[Case]:
    note = f"{ctx.scale.request_seconds:g} s per run"
    return [
        Case("100 B, 1 in flight", "logbus", logbus_run, note=note + ", librdkafka"),
        Case("100 B XADD unpipelined", "redis", redis_run, note=note),
    ]


R1 = Scenario("R1", "Small requests, one in flight", _cases, REQUESTS,
              "one 100-byte record per request, acks=1")
