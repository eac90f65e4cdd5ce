"""RA1 and CS1: operating the 3-broker cluster of P3 (issue 26).

- RA1, a reassignment's copy rate: P1's 1 KiB load is written into a 6-partition topic whose
  only replica is broker 0 (not timed); then AlterPartitionReassignments (the logbus admin
  client, as `logbus reassign-partitions --execute` sends it) moves every partition to
  broker 1, unthrottled. Broker 1 fetches the whole log as a new replica, joins the ISR,
  takes leadership, and broker 0's copies are deleted. The headline is the values' MB over
  the time from the request to the moment broker 1's log files hold as many bytes as
  broker 0's ("copied"); the time until no reassignment is listed any more is beside it.
  Target: >= 0.5x P1's single-broker MB/s, same run. A second case moves 64 MiB with
  `logbus reassign-partitions --execute --throttle 10000000` (10 MB/s) and `--verify`:
  the copy rate once the copy runs, against the throttle (target: within 20%).
- CS1, a controlled shutdown under load: a topic of 90 partitions, rf=3,
  min.insync.replicas=2, so each broker leads 30; a confluent-kafka producer with its
  defaults plus idempotence (acks=all) sends 100-byte records round-robin over every
  partition at `CS1_RATE` records/s. A broker that is not the controller gets SIGTERM
  (`logbus server start` then shuts down as Kafka does: ControlledShutdown, leadership
  handed to the other replicas, then stop). For each partition it led, the longest gap
  between two acknowledgements from the last one before the signal to `CS1_TAIL_S` after
  the broker exited; the headline is the p99 over those 30 partitions (beside it, the
  longest gap of the 60 it followed, which wait for it to leave their ISR). Target: <= 1 s
  (F1 times a kill -9 of a leader: zookeeper.session.timeout.ms and more). The broker is
  started again and the ISR made whole before the next run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import logbus
from bench import load_kafka
from bench.cluster import LogbusCluster
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.scenarios.common import KIB, PARTITIONS
from bench.scenarios.isolation import AckStream, load_until_ready, longest_gap
from bench.systems import REPO

SYSTEM = "logbus x3"
COPY_TIMEOUT_S = 600.0
THROTTLE = 10_000_000  # bytes/s, leader and follower
THROTTLED_BYTES = 64 << 20

CS1_PARTITIONS = 90
CS1_RATE = 1_000  # records/s over all partitions (as Kafka's system tests' producers)
CS1_VALUE = b"x" * 100
CS1_STEADY_S = 3.0
CS1_TAIL_S = 3.0
CS1_BUDGET_MS = 1000.0


def log_bytes(directory: Path) -> int:
    """Bytes in a partition directory's segment files (0 while it does not exist)."""
    if not directory.is_dir():
        return 0
    total = 0
    for segment in directory.glob("*.log"):
        try:
            total += segment.stat().st_size
        except FileNotFoundError:  # a segment deleted or renamed between glob and stat
            continue
    return total


def _topic_bytes(cluster: LogbusCluster, broker: int, topic: str) -> int:
    data_dir = cluster.brokers[broker].data_dir
    return sum(log_bytes(data_dir / f"{topic}-{p}") for p in range(PARTITIONS))


# -- RA1 --------------------------------------------------------------------------------------


def _create_on(cluster: LogbusCluster, topic: str, broker: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=PARTITIONS,
                   replica_assignment=[[broker]] * PARTITIONS,
                   config={"min.insync.replicas": "1"})
    for future in admin.create_topics([new]).values():
        future.result(30)


def _wait_copied(cluster: LogbusCluster, topic: str, target: int, size: int,
                 started: float) -> float:
    deadline = started + COPY_TIMEOUT_S
    while _topic_bytes(cluster, target, topic) < size:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{topic}: broker {target} copied "
                               f"{_topic_bytes(cluster, target, topic)} of {size} bytes")
        time.sleep(0.01)
    return time.perf_counter()


def _wait_completed(admin: Any, topic: str, target: int, started: float) -> float:
    parts = [logbus.TopicPartition(topic, p) for p in range(PARTITIONS)]
    deadline = started + COPY_TIMEOUT_S
    while admin.list_partition_reassignments(parts):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{topic}: the reassignment to broker {target} did not end")
        time.sleep(0.02)
    return time.perf_counter()


def _loaded_topic(ctx: Context, cluster: LogbusCluster, source: int,
                  volume: int) -> tuple[str, int, int]:
    """A fresh topic on `source` alone holding `volume` bytes of 1 KiB values: its name,
    its records and its log bytes."""
    topic = load_kafka.unique_name("RA1")
    _create_on(cluster, topic, source)
    cluster.wait_for(lambda: len(cluster.partitions(topic)) == PARTITIONS, 60,
                     f"{topic}: every partition's leader")
    written = load_kafka.produce(cluster.bootstrap, topic, KIB, volume, ctx.progress)
    records = int(written["records"]) + 1  # and the one sent before produce's clock
    return topic, records, _topic_bytes(cluster, source, topic)


def _moved(cluster: LogbusCluster, topic: str, target: int) -> None:
    # every broker's metadata names the new leader soon after (not timed)
    cluster.wait_for(
        lambda: {p.leader for p in cluster.partitions(topic).values()} == {target}, 30,
        f"{topic}: broker {target} leading every partition after the move")


def reassignment_run(ctx: Context) -> Metrics:
    cluster = ctx.cluster()
    source, target = 0, 1
    topic, records, size = _loaded_topic(ctx, cluster, source, ctx.scale.produce_bytes)
    plan = {logbus.TopicPartition(topic, p): [target] for p in range(PARTITIONS)}
    try:
        with logbus.Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
            ctx.progress.note(f"RA1: moving {size / 1e6:.0f} MB from broker {source} "
                              f"to broker {target}")
            started = time.perf_counter()
            errors = {tp: e for tp, e in admin.alter_partition_reassignments(plan).items()
                      if e is not None}
            if errors:
                raise RuntimeError(f"reassignment refused: {errors}")
            copied = _wait_copied(cluster, topic, target, size, started)
            completed = _wait_completed(admin, topic, target, started)
        _moved(cluster, topic, target)
    finally:
        load_kafka.delete_topic(cluster.bootstrap, topic)
    copy_s = copied - started
    return {"mb_s": records * KIB / copy_s / 1e6, "copy_s": copy_s,
            "complete_s": completed - started, "log_mb": size / 1e6}


def _reassign_cli(cluster: LogbusCluster, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "reassign-partitions",
         "--bootstrap-server", cluster.bootstrap, *args],
        capture_output=True, text=True, timeout=120, check=False, env=_cli_env())
    if done.returncode != 0:
        raise RuntimeError(f"reassign-partitions {args[0]}: {done.stderr.strip()}")
    return done.stdout


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def throttled_run(ctx: Context) -> Metrics:
    """The same move through `logbus reassign-partitions --execute --throttle`, as a user
    runs it; the copy rate once the copy runs (from a tenth of the bytes, past the new
    replicas' start), against the throttle; `--verify` removes the throttle after."""
    cluster = ctx.cluster()
    source, target = 0, 1
    volume = min(ctx.scale.produce_bytes, THROTTLED_BYTES)
    topic, _records, size = _loaded_topic(ctx, cluster, source, volume)
    plan = ctx.workdir / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [target]} for p in range(PARTITIONS)]}))
    samples: list[tuple[float, int]] = []
    try:
        ctx.progress.note(f"RA1: moving {size / 1e6:.0f} MB at {THROTTLE / 1e6:g} MB/s")
        _reassign_cli(cluster, "--execute", "--reassignment-json-file", str(plan),
                      "--throttle", str(THROTTLE))
        deadline = time.perf_counter() + COPY_TIMEOUT_S
        while not samples or samples[-1][1] < size:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{topic}: the throttled copy did not end: {samples[-1]}")
            samples.append((time.perf_counter(), _topic_bytes(cluster, target, topic)))
            time.sleep(0.05)
        verified = ""
        while "Clearing broker-level throttles" not in verified:  # completed: throttle gone
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{topic}: --verify did not report the move completed")
            time.sleep(0.2)
            verified = _reassign_cli(cluster, "--verify", "--reassignment-json-file", str(plan))
        _moved(cluster, topic, target)
    finally:
        load_kafka.delete_topic(cluster.bootstrap, topic)
    start = next((t, n) for t, n in samples if n >= size // 10)
    rate = (samples[-1][1] - start[1]) / (samples[-1][0] - start[0])
    return {"mb_s": rate / 1e6, "copy_s": samples[-1][0] - samples[0][0],
            "log_mb": size / 1e6, "throttle_mb_s": THROTTLE / 1e6}


RA1_METRICS = {
    "mb_s": ("MB/s copied", True),
    "copy_s": ("request to copied, s", False),
    "complete_s": ("request to completed, s", False),
    "log_mb": ("log MB moved", True),
    "throttle_mb_s": ("throttle MB/s", True),
}


def _cases_ra1(ctx: Context) -> list[Case]:
    throttled = min(ctx.scale.produce_bytes, THROTTLED_BYTES)
    return [
        Case("6 partitions to a new replica, unthrottled", SYSTEM, reassignment_run,
             requires=("logbus",),
             note=f"{ctx.scale.produce_bytes >> 20} MiB of 1 KiB values, rf=1, "
             "broker 0 -> broker 1, the logbus admin client"),
        Case("6 partitions to a new replica, throttled", SYSTEM, throttled_run,
             requires=("logbus",),
             note=f"{throttled >> 20} MiB, `logbus reassign-partitions --execute "
             f"--throttle {THROTTLE}` then `--verify`; MB/s of log bytes from the first "
             "tenth copied to the last"),
    ]


# -- CS1 --------------------------------------------------------------------------------------


class PartitionAcks(AckStream):
    """F2's acknowledgement stream with a confluent-kafka producer of its defaults plus
    idempotence, sending round-robin over every partition of `topic` at `rate` records/s;
    the perf_counter time of each partition's acknowledgements."""

    max_pending = 1 << 30  # the rate alone paces it

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int) -> None:
        super().__init__(bootstrap, topic, {"enable.idempotence": True, "log_level": 0})
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.by_partition: dict[int, list[float]] = defaultdict(list)

    def _produce(self) -> None:
        self.producer.produce(self.topic, CS1_VALUE, partition=self.sent % self.partitions,
                              on_delivery=self._delivered)

    def _acked(self, msg: Any, at: float) -> None:
        self.by_partition[msg.partition()].append(at)


def _shut_down(cluster: LogbusCluster, stream: PartitionAcks, victim: int) -> tuple[float, float]:
    """SIGTERM to `victim` with the load running; the perf_counter times of the signal and
    of the process's exit."""
    proc = cluster.brokers[victim].proc
    assert proc is not None
    signalled = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    if not stream.run_until(lambda: proc.poll() is not None, 120):
        raise RuntimeError(f"broker {victim} did not stop within 120 s of SIGTERM")
    return signalled, time.perf_counter()


def shutdown_run(ctx: Context) -> Metrics:
    cluster = ctx.cluster()
    topic = load_kafka.unique_name("CS1")
    load_kafka.create_topic(cluster.bootstrap, topic, CS1_PARTITIONS, 3,
                            {"min.insync.replicas": "2"})
    cluster.wait_ready(topic, CS1_PARTITIONS)
    controller = cluster.controller()
    led: dict[int, list[int]] = defaultdict(list)
    for p, meta in cluster.partitions(topic).items():
        led[meta.leader].append(p)
    victim = max((b for b in led if b != controller), key=lambda b: len(led[b]))
    stream = PartitionAcks(cluster.bootstrap, topic, CS1_PARTITIONS, CS1_RATE)
    try:
        # connected, and every partition acknowledged (the first second or two of an
        # idempotent producer over 90 partitions is its start), then steady
        if not stream.run_until(lambda: len(stream.by_partition) == CS1_PARTITIONS, 60):
            raise RuntimeError(f"{topic}: not every partition acknowledged within 60 s")
        stream.run_for(CS1_STEADY_S)
        signalled, exited = _shut_down(cluster, stream, victim)
        stream.run_for(CS1_TAIL_S)
        end = time.perf_counter()
        gaps_ms = sorted(longest_gap(stream.by_partition[p], signalled, end)[0] * 1000
                         for p in led[victim])
        # the partitions it followed wait for it to leave their ISR
        followed_ms = max(longest_gap(stream.by_partition[p], signalled, end)[0] * 1000
                          for p in range(CS1_PARTITIONS) if p not in led[victim])
        ctx.progress.note(f"CS1: broker {victim} stopped in {exited - signalled:.2f} s; "
                          f"longest gap {gaps_ms[-1]:.0f} ms")
        cluster.restart(victim)
        load_until_ready(stream, cluster, topic, CS1_PARTITIONS, "the restart", step=0.5)
    finally:
        stream.close()
        for broker in cluster.brokers:  # the scenarios that follow need all three
            if not broker.running:
                cluster.restart(broker.broker_id)
        load_kafka.delete_topic(cluster.bootstrap, topic)
    return {"p99_ms": percentile(gaps_ms, 99), "p50_ms": percentile(gaps_ms, 50),
            "max_ms": gaps_ms[-1], "followed_max_ms": followed_ms, "led": float(len(gaps_ms)),
            "shutdown_s": exited - signalled, "failed": float(stream.failed),
            "budget_ms": CS1_BUDGET_MS}


CS1_METRICS = {
    "p99_ms": ("longest gap between acks, p99 over led partitions, ms", False),
    "p50_ms": ("longest gap p50 ms", False),
    "max_ms": ("longest gap max ms", False),
    "followed_max_ms": ("longest gap of a partition it followed, ms", False),
    "led": ("partitions led", True),
    "shutdown_s": ("SIGTERM to exit, s", False),
    "failed": ("failed deliveries", False),
    "budget_ms": ("target ms", True),
}


def _cases_cs1(ctx: Context) -> list[Case]:
    return [Case("controlled shutdown of a leader of 30", SYSTEM, shutdown_run,
                 requires=("logbus",),
                 note=f"{CS1_PARTITIONS} partitions, rf=3, min.insync.replicas=2, "
                 f"{CS1_RATE:,} records/s of 100 B, confluent-kafka defaults + idempotence")]


RA1 = Scenario("RA1", "Reassignment copy rate", _cases_ra1, RA1_METRICS,
               "6 partitions of 1 KiB values moved from broker 0 to broker 1 of the "
               "3-broker cluster, unthrottled")
CS1 = Scenario("CS1", "Controlled shutdown under load", _cases_cs1, CS1_METRICS,
               "SIGTERM to a broker leading 30 of 90 partitions under an idempotent "
               "acks=all load: each led partition's longest gap between acknowledgements")
