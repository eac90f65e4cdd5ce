"""C1: consume P1's 1 KiB data from offset 0 (librdkafka, assigned partitions). Peers:
Redis XRANGE and XREADGROUP COUNT 1000 over the stream P1 wrote, nafka. Beside them, the
logbus columnar consumer (issue 21): the request layer and column decoder the Spark source
reads with (`fetch_many_raw` + `records.columnar.decode_columns`), the records of every
partition as columns (offsets, timestamps, keys, values), one Fetch in flight."""

from __future__ import annotations

import asyncio
import time
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
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.fetch import FetchOptions, fetch_many_raw
from logbus.records.columnar import decode_columns
from logbus.types import TopicPartition

# As C1's librdkafka consumer: fetches of up to 64 MB (and 1 MB per partition, the default
# max.partition.fetch.bytes)
COLUMNAR_FETCH = FetchOptions(max_wait_ms=100, max_bytes=64 << 20,
                              partition_max_bytes=1 << 20)

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


async def _columnar_read(bootstrap: str, topic: str, partitions: int, expected: int,
                         progress: Any) -> tuple[int, int, float]:
    """(records, value bytes, seconds) read from offset 0 of every partition, as columns."""
    host, _, port = bootstrap.rpartition(":")
    conn = await Connection.connect(host, int(port), max_response_size=128 << 20)
    try:
        offsets = {TopicPartition(topic, p): 0 for p in range(partitions)}
        records = nbytes = 0
        start = time.perf_counter()
        while records < expected:
            fetched = await fetch_many_raw(conn, offsets, COLUMNAR_FETCH)
            for tp, data in fetched.items():
                if isinstance(data, KafkaError):
                    raise data
                columns = decode_columns(data.batches, min_offset=offsets[tp])
                offsets[tp] = data.next_offset
                records += len(columns)
                nbytes += columns.values.nbytes
                progress.advance(len(columns), len(columns) * KIB)
        return records, nbytes, time.perf_counter() - start
    finally:
        await conn.close()


def _columnar(ctx: Context) -> Metrics:
    data = _dataset(ctx, "logbus")
    server = ctx.server("logbus")

    def measure() -> Metrics:
        ctx.progress.begin(f"columnar consume {data['records']:,}", data["records"])
        records, _nbytes, seconds = asyncio.run(_columnar_read(
            server.bootstrap, data["topic"], data["partitions"], data["records"],
            ctx.progress))
        ctx.progress.end()
        value_bytes = records * data["value_size"]
        return {"mb_s": value_bytes / seconds / 1e6, "records_s": records / seconds,
                "seconds": seconds, "records": float(records),
                "bytes": float(data["value_size"])}

    return with_resources(server, measure)


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
        Case("1 KiB from offset 0, logbus columnar consumer", "logbus", _columnar,
             note="fetch_many_raw + decode_columns (the Spark source's reader), one "
             "Fetch of up to 64 MB in flight, in the bench process"),
        Case("1 KiB XRANGE", "redis", _redis("XRANGE")),
        Case("1 KiB XREADGROUP", "redis", _redis("XREADGROUP")),
        Case("1 KiB from offset 0", "nafka", _kafka("nafka")),
    ]


C1 = Scenario("C1", "Consume throughput", _cases, THROUGHPUT,
              "P1's 1 KiB data read from offset 0; Redis reads COUNT 1000 per call")
