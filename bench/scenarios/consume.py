"""C1: consume P1's 1 KiB data from offset 0 (librdkafka, assigned partitions). Peers:
Redis XRANGE and XREADGROUP COUNT 1000 over the stream P1 wrote, nafka."""

from __future__ import annotations

from typing import Any

from bench import load_kafka, load_redis
from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.common import (
    KIB,
    kafka_produce_run,
    redis_produce_run,
    with_resources,
)
from bench.scenarios.produce import THROUGHPUT

DATASET = "P1/1KiB"


def _dataset(ctx: Context, system: str) -> dict[str, Any]:
    """P1's data when P1 ran first in this bench, else written now (not measured)."""
    name = f"{DATASET}/{system}"
    if name not in ctx.datasets:
        ctx.progress.note(f"C1: writing the {system} data P1 would have left")
        volume = ctx.scale.nafka_bytes if system == "nafka" else ctx.scale.produce_bytes
        if system == "redis":
            redis_produce_run(ctx, name, KIB, volume)
        else:
            kafka_produce_run(ctx, system, name, KIB, volume)
    return ctx.datasets[name]


def _kafka(system: str) -> Any:
    def run(ctx: Context) -> Metrics:
        data = _dataset(ctx, system)
        server = ctx.server(system)

        def measure() -> Metrics:
            metrics = load_kafka.consume(server.bootstrap, data["topic"], data["partitions"],
                                         data["records"], data["value_size"], ctx.progress)
            metrics["bytes"] = float(data["value_size"])
            return metrics

        return with_resources(server, measure)

    return run


def _redis(command: str) -> Any:
    def run(ctx: Context) -> Metrics:
        data = _dataset(ctx, "redis")
        server = ctx.server("redis")

        def measure() -> Metrics:
            if command == "XRANGE":
                metrics = load_redis.xrange(server.port, data["topic"], data["records"],
                                            data["value_size"], ctx.progress)
            else:
                metrics = load_redis.xreadgroup(server.port, data["topic"], data["records"],
                                                data["value_size"], ctx.progress,
                                                load_kafka.unique_name("g"))
            metrics["bytes"] = float(data["value_size"])
            return metrics

        return with_resources(server, measure)

    return run


def _cases(ctx: Context) -> list[Case]:
    return [
        Case("1 KiB from offset 0", "logbus", _kafka("logbus")),
        Case("1 KiB XRANGE", "redis", _redis("XRANGE")),
        Case("1 KiB XREADGROUP", "redis", _redis("XREADGROUP")),
        Case("1 KiB from offset 0", "nafka", _kafka("nafka")),
    ]


C1 = Scenario("C1", "Consume throughput", _cases, THROUGHPUT,
              "P1's 1 KiB data read from offset 0; Redis reads COUNT 1000 per call")
