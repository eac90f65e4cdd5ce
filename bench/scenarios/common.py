"""Helpers shared by the Kafka-protocol scenarios: one produce or consume run on logbus,
nafka or Redis, with the server's CPU time and peak RSS taken around it."""

from __future__ import annotations

import os
from typing import Any

from bench import load_kafka, load_redis, load_wire
from bench.cluster import LogbusCluster
from bench.core import GIB, Context, Metrics
from bench.systems import Server

PARTITIONS = 6
KIB = 1024


def settle(ctx: Context) -> None:
    """Write back the page cache before a latency scenario, so the gigabytes the
    throughput scenarios left dirty are not flushed (and appends throttled) inside this
    scenario's tail: measured on logbus, whose appends go to the page cache (Redis keeps
    its stream in memory). Not timed; the same for every system."""
    ctx.progress.note("sync: writing back the page cache before measuring latency")
    os.sync()


def with_resources(server: Server | LogbusCluster, metrics_fn: Any,
                   bytes_key: str = "bytes") -> Metrics:
    """Run `metrics_fn()` while sampling `server` (a cluster: CPU summed over its brokers,
    the largest broker's RSS); adds CPU seconds per GiB moved and the peak RSS in MB."""
    with server.sampler() as sampler:
        metrics: Metrics = metrics_fn()
    nbytes = metrics["records"] * metrics.pop(bytes_key)
    metrics["cpu_s_per_gib"] = sampler.usage.cpu_seconds / (nbytes / GIB)
    metrics["peak_rss_mb"] = sampler.usage.peak_rss_bytes / 1e6
    return metrics


def kafka_produce_run(ctx: Context, system: str, dataset: str, value_size: int,
                      total_bytes: int, partitions: int = PARTITIONS, raw: bool = False,
                      **overrides: Any) -> Metrics:
    """Produce into a fresh topic (librdkafka, or with `raw` pre-encoded requests); the
    topic is kept as `dataset` for readers (C1) and the previous run's topic of the same
    dataset is deleted."""
    server = ctx.server(system)
    topic = load_kafka.unique_name(dataset.replace("/", "-").replace(" ", ""))
    if system != "nafka":  # nafka has no CreateTopics: one partition, made on first use
        load_kafka.create_topic(server.bootstrap, topic, partitions)

    def run() -> Metrics:
        if raw:
            metrics = load_wire.produce_batches(server.bootstrap, topic, partitions,
                                                value_size, total_bytes, ctx.progress)
        else:
            metrics = load_kafka.produce(server.bootstrap, topic, value_size, total_bytes,
                                         ctx.progress, **overrides)
        metrics["bytes"] = float(value_size)
        return metrics

    metrics = with_resources(server, run)
    written = int(metrics.pop("written"))  # with the warm-up record
    replace_dataset(ctx, dataset, {"system": system, "topic": topic,
                                   "partitions": partitions if system != "nafka" else 1,
                                   "records": written,
                                   "value_size": value_size})
    return metrics


def redis_produce_run(ctx: Context, dataset: str, value_size: int, total_bytes: int) -> Metrics:
    server = ctx.server("redis")
    key = load_kafka.unique_name(dataset.replace("/", "-").replace(" ", ""))

    def run() -> Metrics:
        metrics = load_redis.xadd(server.port, key, value_size, total_bytes, ctx.progress)
        metrics["bytes"] = float(value_size)
        return metrics

    metrics = with_resources(server, run)
    replace_dataset(ctx, dataset, {"system": "redis", "topic": key,
                                   "records": int(metrics["records"]),
                                   "value_size": value_size})
    return metrics


def replace_dataset(ctx: Context, name: str, dataset: dict[str, Any]) -> None:
    old = ctx.datasets.get(name)
    ctx.datasets[name] = dataset
    if old is not None:
        drop_dataset(ctx, old)


def drop_dataset(ctx: Context, dataset: dict[str, Any]) -> None:
    server = ctx.server(dataset["system"])
    if dataset["system"] == "redis":
        load_redis.delete(server.port, dataset["topic"])
    elif dataset["system"] in ("logbus", "logbus-metrics"):  # (P1 "metrics on")
        load_kafka.delete_topic(server.bootstrap, dataset["topic"])
    # nafka keeps everything in one SQLite file until the bench ends


def drop_datasets(ctx: Context, prefix: str) -> None:
    for name in [n for n in ctx.datasets if n.startswith(prefix)]:
        drop_dataset(ctx, ctx.datasets.pop(name))
