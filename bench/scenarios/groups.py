"""G1: scaling a consumer group (issue 22). A group of 10 confluent-kafka members reads a
100-partition topic under a steady load (2,000 records/s of 100 B spread over the
partitions); an 11th member joins. Measured: the longest pause in consumption of any
partition that an original member owns both before and after the change (the gap between
two records of that partition reaching that member, around the join), and how long the
group took to own every partition again with 11 members.

Variants: a KIP-848 group (`group.protocol=consumer`, the broker's `uniform` assignor,
Kafka's default broker settings: 5 s heartbeats) against a classic group with an eager
assignor (`range`: every member gives up everything at a rebalance), and a baseline with
the same load and window and no join (the gaps the load and the machine make by
themselves). Target: the KIP-848 pause <= 0.2 s (the classic eager figure is reported
beside it)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.core import Case, Context, Metrics, Scenario

PARTITIONS = 100
MEMBERS = 10
RATE = 2000  # records/s, over all partitions
VALUE = b"x" * 100
SETTLE_TIMEOUT_S = 120.0
OBSERVE_AFTER_S = 3.0  # keep watching once the group has settled

METRICS: dict[str, tuple[str, bool]] = {
    "max_pause_s": ("longest pause of a kept partition, s", False),
    "settle_s": ("join to all partitions owned, s", False),
    "kept_partitions": ("partitions kept by the original members", True),
    "pause_budget_s": ("pause budget, s", False),
}
PAUSE_BUDGET_S = 0.2  # what the issue allows a KIP-848 group


class Member(threading.Thread):
    """One consumer polling in its thread: per partition, when its records arrived."""

    def __init__(self, bootstrap: str, topic: str, group: str, config: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "auto.offset.reset": "latest", "enable.auto.commit": True, **config,
        })
        self.consumer.subscribe([topic])
        self.arrivals: dict[int, list[float]] = {}
        self.owned: frozenset[int] = frozenset()
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for msg in self.consumer.consume(500, 0.05):
                    if msg.error() is None:
                        self.arrivals.setdefault(msg.partition(), []).append(time.monotonic())
                self.owned = frozenset(p.partition for p in self.consumer.assignment())
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


class Load(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stopping = threading.Event()

    def run(self) -> None:
        start, sent = time.monotonic(), 0
        while not self.stopping.is_set():
            due = int((time.monotonic() - start) * RATE)
            while sent < due:
                self.producer.produce(self.topic, VALUE, partition=sent % PARTITIONS)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(30)

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def _owned_by(members: list[Member], count: int) -> bool:
    owned = [p for m in members for p in m.owned]
    return len(owned) == PARTITIONS and len(set(owned)) == PARTITIONS and all(
        m.owned for m in members[:count]
    )


def _wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"G1: timed out waiting for {what}")
        time.sleep(0.05)


def _longest_pause(member: Member, partitions: frozenset[int], since: float,
                   until: float) -> float:
    """The largest gap between two records of a kept partition around [since, until]."""
    worst = 0.0
    for p in partitions:
        times = member.arrivals.get(p, [])
        before = [t for t in times if t < since]
        during = [t for t in times if since <= t <= until]
        points = before[-1:] + during
        if len(points) < 2:
            worst = max(worst, until - (points[0] if points else since))
            continue
        worst = max(worst, *(b - a for a, b in itertools.pairwise(points)))
    return worst


def run_scaling(ctx: Context, config: dict[str, Any], *, join: bool = True) -> Metrics:
    bootstrap = ctx.logbus().bootstrap
    topic, group = f"g1-{uuid.uuid4().hex[:8]}", f"g1-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(120)
    load = Load(bootstrap, topic)
    load.start()
    members = [Member(bootstrap, topic, group, config) for _ in range(MEMBERS)]
    try:
        ctx.progress.begin(f"{MEMBERS} members over {PARTITIONS} partitions", 0)
        for m in members:
            m.start()
        _wait(lambda: _owned_by(members, MEMBERS), f"{MEMBERS} members to own everything")
        time.sleep(OBSERVE_AFTER_S)
        before = {id(m): m.owned for m in members}
        joined = time.monotonic()
        if join:
            ctx.progress.note("an 11th member joins")
            newcomer = Member(bootstrap, topic, group, config)
            newcomer.start()
            members.append(newcomer)
            _wait(lambda: _owned_by(members, MEMBERS + 1), "11 members to own everything")
        settled = time.monotonic()
        time.sleep(OBSERVE_AFTER_S if join else 2 * OBSERVE_AFTER_S)
        until = time.monotonic()
        kept = {id(m): before[id(m)] & m.owned for m in members[:MEMBERS]}
        pause = max(_longest_pause(m, kept[id(m)], joined, until) for m in members[:MEMBERS])
        ctx.progress.end()
        return {
            "max_pause_s": pause,
            "settle_s": settled - joined,
            "kept_partitions": float(sum(len(k) for k in kept.values())),
            "pause_budget_s": PAUSE_BUDGET_S,
        }
    finally:
        for m in members:
            m.stop()
        load.stop()
        for future in admin.delete_topics([topic]).values():
            future.result(120)


def cases(ctx: Context) -> list[Case]:
    return [
        Case("10 -> 11 members, KIP-848 (uniform)", "logbus",
             lambda c: run_scaling(c, {"group.protocol": "consumer"}),
             note="group.protocol=consumer, broker defaults (5 s heartbeats)"),
        Case("10 members, nobody joins (baseline)", "logbus",
             lambda c: run_scaling(c, {"group.protocol": "consumer"}, join=False),
             note="the same load and window with no change: gaps the machine makes"),
        Case("10 -> 11 members, classic eager (range)", "logbus",
             lambda c: run_scaling(c, {"group.protocol": "classic",
                                       "partition.assignment.strategy": "range",
                                       "heartbeat.interval.ms": 3000,
                                       "session.timeout.ms": 45000}),
             note="librdkafka's classic defaults, range assignor"),
    ]


G1 = Scenario(
    "G1",
    f"Consumer group scaling ({MEMBERS} -> {MEMBERS + 1} members, {PARTITIONS} partitions, "
    f"{RATE:,} records/s)",
    cases,
    METRICS,
    __doc__ or "",
)
