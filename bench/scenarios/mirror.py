"""MM1: `logbus mirror` throughput between two local clusters (issue 26). P1's 1 KiB load is
written into a 6-partition topic of P1's single broker (not timed); then a `logbus mirror`
process copies it into a topic of as many partitions (partition for partition) on one of
two targets, one row each:

- a second single-broker cluster like P1's (its own broker process, rf=1, the mirror's
  default acks): the issue's "between two local clusters" against "single-broker P1",
  like for like. The headline: the target against P1's MB/s.
- P3's 3-broker cluster (rf=3, min.insync.replicas=2, acks=all): that cluster's own
  acks=all throughput (P3, same run) is a ceiling the mirror cannot pass, on this machine
  about 0.3-0.4x P1.

The clock runs from the first record seen on the target to the last, so the mirror's start
(connections, the group's join) is not on it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.common import KIB, PARTITIONS
from bench.scenarios.produce import THROUGHPUT
from bench.systems import LogbusBroker

SYSTEM = "logbus mirror"
MIRROR_TIMEOUT_S = 600.0
SINGLE_TARGET = "logbus-mirror-target"  # the second single-broker cluster


def _on_target(consumer: Consumer, topic: str) -> int:
    return sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(PARTITIONS)
    )


def _write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def _single_broker_target(ctx: Context, topic: str) -> tuple[str, dict[str, str]]:
    server = ctx.own_server(SINGLE_TARGET, lambda workdir: LogbusBroker(workdir, ctx.event_loop))
    load_kafka.create_topic(server.bootstrap, topic, PARTITIONS)
    return server.bootstrap, {}


def _replicated_target(ctx: Context, topic: str) -> tuple[str, dict[str, str]]:
    cluster = ctx.cluster()
    load_kafka.create_topic(cluster.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_ready(topic, PARTITIONS)
    return cluster.bootstrap, {"acks": "all"}


Target = Callable[[Context, str], tuple[str, dict[str, str]]]


def mirror_run(ctx: Context, target: Target) -> Metrics:
    """Write P1's load into the source, then time a mirror copying it into `target`
    (which makes the target topic and says the producer settings the row sets)."""
    source = ctx.logbus().bootstrap
    topic = load_kafka.unique_name("MM1")
    load_kafka.create_topic(source, topic, PARTITIONS)
    bootstrap, producer_settings = target(ctx, topic)
    written = load_kafka.produce(source, topic, KIB, ctx.scale.produce_bytes, ctx.progress)
    records = int(written["records"]) + 1  # and the one sent before the clock started
    workdir = ctx.workdir / "mirror"
    workdir.mkdir(exist_ok=True)
    consumer_file = _write_properties(
        workdir / f"{topic}-source.properties",
        {"bootstrap.servers": source, "group.id": f"{topic}-mirror"},
    )
    producer_file = _write_properties(
        workdir / f"{topic}-target.properties",
        {"bootstrap.servers": bootstrap, **producer_settings},
    )
    args = [
        sys.executable, "-m", "logbus.cli.main", "mirror",
        "--consumer.config", str(consumer_file), "--producer.config", str(producer_file),
        "--include", topic, "--offset.commit.interval.ms", "5000",
    ]
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-probe"})
    with open(workdir / f"{topic}.log", "wb") as log:
        mirror = subprocess.Popen(args, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + MIRROR_TIMEOUT_S
        first = (0, 0.0)
        while (copied := _on_target(probe, topic)) < records:
            if mirror.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the mirror stopped at {copied} of {records} records")
            if not first[0] and copied:
                first = (copied, time.perf_counter())
            time.sleep(0.05)
        seconds = time.perf_counter() - first[1]
    finally:
        mirror.terminate()
        mirror.wait(60)
        probe.close()
        load_kafka.delete_topic(source, topic)
        load_kafka.delete_topic(bootstrap, topic)
    moved = records - first[0]
    return {"mb_s": moved * KIB / seconds / 1e6, "records_s": moved / seconds}


MM1_METRICS = {k: v for k, v in THROUGHPUT.items() if k in ("mb_s", "records_s")}
SINGLE_VARIANT = "1 KiB to a single broker"
REPLICATED_VARIANT = "1 KiB to rf=3 acks=all"


def _cases(ctx: Context) -> list[Case]:
    volume = f"{ctx.scale.produce_bytes >> 20} MiB per run, 6 partitions"
    return [
        Case(SINGLE_VARIANT, SYSTEM, lambda c: mirror_run(c, _single_broker_target),
             requires=("logbus",),
             note=f"{volume}, single broker -> a second single broker (rf=1, the mirror's "
             "default acks); the headline, against P1"),
        Case(REPLICATED_VARIANT, SYSTEM, lambda c: mirror_run(c, _replicated_target),
             requires=("logbus",),
             note=f"{volume}, single broker -> 3 brokers; capped by the cluster's own "
             "acks=all rate (P3, same run)"),
    ]


MM1 = Scenario("MM1", "Mirror throughput between two clusters", _cases, MM1_METRICS,
               "logbus mirror from the single broker to a second single broker (rf=1), and to "
               "the 3-broker cluster (rf=3, acks=all), 1 KiB values, 6 partitions")
