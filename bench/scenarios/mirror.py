"""MM1: `logbus mirror` throughput between two local clusters (issue 26): the single broker
of P1 as the source, the 3-broker cluster of P3 as the target (replication factor 3,
min.insync.replicas=2, the mirror's producer with acks=all). P1's 1 KiB load is written
into a 6-partition source topic first (not timed); then a `logbus mirror` process copies
it into a target topic of as many partitions (partition for partition). The clock runs
from the first record seen on the target to the last, so the mirror's start (connections,
the group's join) is not on it. The target's figure compares with P1's in the same run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench import load_kafka
from bench.core import Case, Context, Metrics, Scenario
from bench.scenarios.common import KIB, PARTITIONS
from bench.scenarios.produce import THROUGHPUT

SYSTEM = "logbus mirror"
MIRROR_TIMEOUT_S = 600.0


def _on_target(consumer: Consumer, topic: str) -> int:
    return sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(PARTITIONS)
    )


def _write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def mirror_run(ctx: Context) -> Metrics:
    source = ctx.logbus().bootstrap
    cluster = ctx.cluster()
    topic = load_kafka.unique_name("MM1")
    load_kafka.create_topic(source, topic, PARTITIONS)
    load_kafka.create_topic(cluster.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    cluster.wait_ready(topic, PARTITIONS)
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
        {"bootstrap.servers": cluster.bootstrap, "acks": "all"},
    )
    args = [
        sys.executable, "-m", "logbus.cli.main", "mirror",
        "--consumer.config", str(consumer_file), "--producer.config", str(producer_file),
        "--include", topic, "--offset.commit.interval.ms", "5000",
    ]
    probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic}-probe"})
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
        load_kafka.delete_topic(cluster.bootstrap, topic)
    moved = records - first[0]
    return {"mb_s": moved * KIB / seconds / 1e6, "records_s": moved / seconds}


MM1_METRICS = {k: v for k, v in THROUGHPUT.items() if k in ("mb_s", "records_s")}


def _cases(ctx: Context) -> list[Case]:
    return [Case("1 KiB to rf=3 acks=all", SYSTEM, mirror_run, requires=("logbus",),
                 note=f"{ctx.scale.produce_bytes >> 20} MiB per run, 6 partitions, "
                 "single broker -> 3 brokers")]


MM1 = Scenario("MM1", "Mirror throughput between two clusters", _cases, MM1_METRICS,
               "logbus mirror from the single broker to the 3-broker cluster, 1 KiB values, "
               "6 partitions, target rf=3 acks=all")
