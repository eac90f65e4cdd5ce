"""P1 and P2: produce throughput with librdkafka (6 partitions, acks=1, linger.ms=5, large
batches, no compression), 1 KiB and 100-byte values; P2 with acks=all and with zstd.
Peers: Redis XADD in pipelines of 1000, nafka (one partition, its only layout).

P1 also has a "raw wire" row: the same batches pre-encoded once and resent (two requests in
flight), as the Redis load resends one encoded pipeline, so neither client's per-record
Python work is on the clock. librdkafka's row is the issue's method; the Python produce()
call per record costs the load generator about as much CPU as the broker spends."""

from __future__ import annotations

import threading
import urllib.request
from functools import partial

from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.common import (
    KIB,
    drop_datasets,
    kafka_produce_run,
    redis_produce_run,
)
from bench.systems import LogbusBroker

THROUGHPUT = {
    "mb_s": ("MB/s", True),
    "records_s": ("records/s", True),
    "cpu_s_per_gib": ("server CPU s/GiB", False),
    "peak_rss_mb": ("server peak RSS MB", False),
}


def _cases_p1(ctx: Context) -> list[Case]:
    scale = ctx.scale
    cases = []
    for label, size, volume, nafka_volume in (
        ("1 KiB", KIB, scale.produce_bytes, scale.nafka_bytes),
        ("100 B", 100, scale.produce_small_bytes, scale.nafka_bytes // 8),
    ):
        dataset = f"P1/{label.replace(' ', '')}"
        keep = size == KIB  # C1 reads the 1 KiB data
        teardown = None if keep else partial(_drop, prefix=dataset)

        def logbus(c: Context, d: str = dataset, s: int = size, v: int = volume) -> Metrics:
            return kafka_produce_run(c, "logbus", f"{d}/logbus", s, v)

        def raw(c: Context, d: str = dataset, s: int = size, v: int = volume) -> Metrics:
            return kafka_produce_run(c, "logbus", f"{d}/logbus-raw", s, v, raw=True)

        def redis(c: Context, d: str = dataset, s: int = size, v: int = volume) -> Metrics:
            return redis_produce_run(c, f"{d}/redis", s, v)

        def nafka(c: Context, d: str = dataset, s: int = size, v: int = nafka_volume) -> Metrics:
            return kafka_produce_run(c, "nafka", f"{d}/nafka", s, v)

        cases += [
            Case(label, "logbus", logbus, teardown=teardown,
                 note=f"{volume >> 20} MiB per run"),
        ]
        if size == KIB:
            cases.append(
                Case(f"{label}, metrics on", "logbus",
                     partial(_metrics_on, dataset=dataset, size=size, volume=volume),
                     teardown=partial(_drop, prefix=f"{dataset}/logbus-metrics"),
                     note=f"{volume >> 20} MiB per run, a broker with metrics.listener "
                     "scraped every second")
            )
        cases += [
            Case(f"{label} raw wire", "logbus", raw,
                 teardown=partial(_drop, prefix=f"{dataset}/logbus-raw"),
                 note=f"{volume >> 20} MiB per run, 1 MB batches x 6 partitions resent"),
            Case(label, "redis", redis, teardown=teardown, note=f"{volume >> 20} MiB per run"),
            Case(label, "nafka", nafka, teardown=teardown,
                 note=f"{nafka_volume >> 20} MiB per run (nafka is slow)"),
        ]
    return cases


def _metrics_on(ctx: Context, dataset: str, size: int, volume: int) -> Metrics:
    """As the P1 logbus case, on a broker of its own started with metrics.listener, while
    a scraper reads /metrics every second (as Prometheus would, more often)."""
    server = ctx.own_server(
        "logbus-metrics", lambda workdir: LogbusBroker(workdir, ctx.event_loop, metrics=True)
    )
    assert isinstance(server, LogbusBroker)
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    stop = threading.Event()
    scrapes: list[int] = []

    def scrape() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    scrapes.append(len(response.read()))
            except OSError:
                pass
            stop.wait(1.0)

    scraper = threading.Thread(target=scrape, name="metrics-scraper", daemon=True)
    scraper.start()
    try:
        metrics = kafka_produce_run(ctx, "logbus-metrics", f"{dataset}/logbus-metrics", size,
                                    volume)
    finally:
        stop.set()
        scraper.join(15)
    if not scrapes:
        raise RuntimeError(f"no scrape of {url} succeeded during the run")
    return metrics


def _drop(ctx: Context, prefix: str) -> None:
    drop_datasets(ctx, prefix)


def _cases_p2(ctx: Context) -> list[Case]:
    volume = ctx.scale.p2_bytes

    def acks_all(c: Context) -> Metrics:
        return kafka_produce_run(c, "logbus", "P2/acks-all", KIB, volume, acks="all")

    def zstd(c: Context) -> Metrics:
        return kafka_produce_run(c, "logbus", "P2/zstd", KIB, volume,
                                 **{"compression.type": "zstd"})

    teardown = partial(_drop, prefix="P2/")
    note = f"{volume >> 20} MiB per run"
    return [
        Case("1 KiB acks=all", "logbus", acks_all, teardown=teardown, note=note),
        Case("1 KiB zstd", "logbus", zstd, teardown=teardown, note=note + ", values ~2:1"),
    ]


P1 = Scenario("P1", "Produce throughput", _cases_p1, THROUGHPUT,
              "6 partitions, acks=1, linger.ms=5, batch.size=1 MB, no compression")
P2 = Scenario("P2", "Produce with acks=all and zstd", _cases_p2, THROUGHPUT,
              "as P1 with 1 KiB values, acks=all; and acks=1 with zstd")
