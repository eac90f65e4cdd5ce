"""TLS and SCRAM (issue 16's performance figures), on a broker of their own with PLAINTEXT,
SSL and SASL_PLAINTEXT (SCRAM-SHA-256/512) listeners (`bench/secure_broker.py`).

TLS: P1's and C1's 1 KiB loads with the same client (librdkafka: P1's producer tuning,
C1's consumer) over the PLAINTEXT listener and over the SSL listener of that one broker,
in one run; the target is SSL >= 0.6x PLAINTEXT. Both C1 rows read the same topic, written
by the "P1 1 KiB PLAINTEXT" row.

SCRAM: connections set up per second, one after the other from one client process (the
logbus asyncio client's `Connection.connect`: TCP connect, ApiVersions, SaslHandshake and
the two SaslAuthenticate rounds of SCRAM, then close), for each mechanism and, for
reference, PLAINTEXT (connect and ApiVersions only). Reported, no target."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.scenarios.common import KIB, PARTITIONS, with_resources
from bench.scenarios.produce import THROUGHPUT
from bench.secure_broker import SCRAM_PASSWORD, SCRAM_USER, SecureBroker

DATASET = "TLS/P1/1KiB"


def broker(ctx: Context) -> SecureBroker:
    server = ctx.own_server("logbus-secure", lambda d: SecureBroker(d, ctx.event_loop))
    assert isinstance(server, SecureBroker)
    return server


def _pid(ctx: Context) -> int:
    return broker(ctx).pid


def _client(server: SecureBroker, protocol: str) -> dict[str, Any]:
    if protocol == "SSL":
        config = server.ssl_client_config()
        return {k: v for k, v in config.items() if k != "bootstrap.servers"}
    return {}


def _bootstrap(server: SecureBroker, protocol: str) -> str:
    return server.ssl_bootstrap if protocol == "SSL" else server.bootstrap


def _produce(protocol: str) -> Any:
    def run(ctx: Context) -> Metrics:
        server = broker(ctx)
        topic = load_kafka.unique_name(f"TLS-P1-{protocol}")
        load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)

        def measure() -> Metrics:
            metrics = load_kafka.produce(_bootstrap(server, protocol), topic, KIB,
                                         ctx.scale.p2_bytes, ctx.progress,
                                         **_client(server, protocol))
            metrics["bytes"] = float(KIB)
            return metrics

        try:
            metrics = with_resources(server, measure)
        except BaseException:
            load_kafka.delete_topic(server.bootstrap, topic)
            raise
        written = int(metrics.pop("written"))
        if protocol == "PLAINTEXT":  # the C1 rows read the last one
            _replace(ctx, {"topic": topic, "records": written})
        else:
            load_kafka.delete_topic(server.bootstrap, topic)
        return metrics

    return run


def _replace(ctx: Context, data: dict[str, Any] | None) -> None:
    old = ctx.datasets.pop(DATASET, None)
    if data is not None:
        ctx.datasets[DATASET] = data
    if old is not None:
        load_kafka.delete_topic(broker(ctx).bootstrap, old["topic"])


def _consume(protocol: str) -> Any:
    def run(ctx: Context) -> Metrics:
        server = broker(ctx)
        if DATASET not in ctx.datasets:
            ctx.progress.note("TLS: writing the data the P1 PLAINTEXT row would have left")
            _produce("PLAINTEXT")(ctx)
        data = ctx.datasets[DATASET]

        def measure() -> Metrics:
            metrics = load_kafka.consume(_bootstrap(server, protocol), data["topic"],
                                         PARTITIONS, data["records"], KIB, ctx.progress,
                                         **_client(server, protocol))
            metrics["bytes"] = float(KIB)
            return metrics

        return with_resources(server, measure)

    return run


def _drop(ctx: Context) -> None:
    if DATASET in ctx.datasets:
        _replace(ctx, None)


def _tls_cases(ctx: Context) -> list[Case]:
    volume = ctx.scale.p2_bytes
    note = f"{volume >> 20} MiB per run"
    cases = [
        Case(f"P1 1 KiB {protocol}", "logbus", _produce(protocol), requires=("logbus",),
             profile_pid=_pid, note=note + (", read by the C1 rows" if protocol ==
                                            "PLAINTEXT" else ""))
        for protocol in ("PLAINTEXT", "SSL")
    ]
    cases += [
        Case(f"C1 1 KiB {protocol}", "logbus", _consume(protocol), requires=("logbus",),
             profile_pid=_pid, note="P1 1 KiB PLAINTEXT's topic from offset 0")
        for protocol in ("PLAINTEXT", "SSL")
    ]
    cases[-1].teardown = _drop
    return cases


async def _connect_loop(host: str, port: int, security: Any, seconds: float
                        ) -> list[float]:
    from logbus.client.connection import Connection

    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while not times or time.perf_counter() < deadline:
        start = time.perf_counter()
        connection = await Connection.connect(host, port, client_id="bench",
                                              security=security)
        times.append(time.perf_counter() - start)
        await connection.close()
    return times


def _connections(mechanism: str | None) -> Any:
    def run(ctx: Context) -> Metrics:
        from logbus.client.security import ClientSecurity

        server = broker(ctx)
        if mechanism is None:
            security, port = ClientSecurity(), server.port
        else:
            security = ClientSecurity("SASL_PLAINTEXT", None, mechanism, SCRAM_USER,
                                      SCRAM_PASSWORD)
            port = server.sasl_port
        seconds = ctx.scale.request_seconds
        asyncio.run(_connect_loop("127.0.0.1", port, security, 0.1))  # warm up, not timed
        ctx.progress.begin(f"connect {mechanism or 'PLAINTEXT'} for {seconds:g} s", None)
        try:
            with server.sampler() as sampler:
                start = time.perf_counter()
                times = asyncio.run(_connect_loop("127.0.0.1", port, security, seconds))
                elapsed = time.perf_counter() - start
        finally:
            ctx.progress.end()
        times.sort()
        return {
            "connections_s": len(times) / elapsed,
            "p50_ms": percentile(times, 50) * 1000,
            "p99_ms": percentile(times, 99) * 1000,
            "server_cpu_ms": sampler.usage.cpu_seconds / len(times) * 1000,
            "connections": float(len(times)),
        }

    return run


def _scram_cases(ctx: Context) -> list[Case]:
    note = f"one client process, one connection at a time, {ctx.scale.request_seconds:g} s"
    return [
        Case(f"{mechanism}, 4096 iterations", "logbus", _connections(mechanism),
             requires=("logbus",), profile_pid=_pid, note=note)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    ] + [Case("PLAINTEXT, no authentication", "logbus", _connections(None),
              requires=("logbus",), profile_pid=_pid, note=note + ", connect + ApiVersions")]


TLS = Scenario("TLS", "Produce and consume over TLS", _tls_cases, THROUGHPUT,
               "P1's and C1's 1 KiB loads (librdkafka) over PLAINTEXT and over SSL, one broker")
SCRAM = Scenario("SCRAM", "SASL SCRAM connection set-up", _scram_cases, {
    "connections_s": ("connections/s", True),
    "p50_ms": ("p50 ms", False),
    "p99_ms": ("p99 ms", False),
    "server_cpu_ms": ("server CPU ms/connection", False),
}, "connect, ApiVersions, SaslHandshake, SaslAuthenticate x2, close; one at a time")
