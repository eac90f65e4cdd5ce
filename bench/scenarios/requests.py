"""R1: small requests, one 100-byte record per request and one request in flight, for a
fixed time: requests/s and the latency percentiles of a request, acks=1. logbus through
librdkafka (produce then flush, linger.ms=0) and through a raw wire connection that resends
one encoded Produce request; peer: Redis XADD without pipelining, resent the same way.

The raw row is the like-for-like one (both clients resend pre-encoded bytes); librdkafka's
flush adds its own turnaround on top."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer

from bench import load_kafka, load_redis, load_wire
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.scenarios.common import settle

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


def logbus_raw_run(ctx: Context) -> Metrics:
    server = ctx.server("logbus")
    topic = load_kafka.unique_name("R1")
    load_kafka.create_topic(server.bootstrap, topic, 1)
    frame = load_wire.produce_request(topic, 0, load_kafka.make_values(VALUE_SIZE, 1)[0], 1)
    try:
        with load_wire.WireConnection(server.bootstrap) as conn:
            load_wire.check_produce_response(conn.request(frame))

            def request() -> None:
                conn.request(frame)

            metrics = timed_loop(ctx.scale.request_seconds, request, ctx)
            load_wire.check_produce_response(conn.request(frame))
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
        Case("100 B, 1 in flight, raw wire", "logbus", logbus_raw_run, setup=settle,
             note=note + ", one encoded Produce resent"),
        Case("100 B, 1 in flight, librdkafka", "logbus", logbus_run, setup=settle,
             note=note + ", produce + flush"),
        Case("100 B XADD unpipelined", "redis", redis_run, setup=settle, note=note),
    ]


R1 = Scenario("R1", "Small requests, one in flight", _cases, REQUESTS,
              "one 100-byte record per request, acks=1")
