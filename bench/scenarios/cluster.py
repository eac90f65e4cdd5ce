"""P3, L2 and F1: the replicated cluster (issue 14). Three `logbus server start` processes
on one ZooKeeper (bench/cluster.py), topics with replication factor 3 and
min.insync.replicas=2, producers with acks=all; the load is P1's and L1's (librdkafka),
so the targets compare against the single broker's P1 and L1 rows of the same run.

- P3: produce throughput, 1 KiB values, 6 partitions (leaders spread over the 3 brokers).
- L2: end-to-end latency at L1's rate, L1's method.
- F1: kill -9 of a partition leader (not the controller) -> the first acks=all produce to
  that partition that succeeds. The headline is the cluster's: a probe sends one acks=all
  Produce over the raw wire to each surviving broker in turn until one acknowledges it (no
  client discovery delay; metadata names the new leader within ~20 ms of its election).
  A librdkafka producer connected before the kill measures the same kill as a user sees
  it: librdkafka re-queries a partition whose leader is down once a second (its topic
  scan timer, not configurable), which adds up to about a second. The killed broker is
  started again and the ISR made whole before the next kill.

Without Java or Debian's ZooKeeper the rows read "not available" with the reason."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer

from bench import load_kafka
from bench.cluster import SESSION_TIMEOUT_MS, LogbusCluster
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.load_wire import PRODUCE_VERSION, WireConnection, produce_request
from bench.scenarios.common import KIB, PARTITIONS, settle, with_resources
from bench.scenarios.latency import LATENCY, LINGER_MS, kafka_latency_run
from bench.scenarios.produce import THROUGHPUT
from logbus.protocol import ApiKey, ErrorCode, codec

SYSTEM = "logbus x3"
REPLICATED = {"min.insync.replicas": "2"}
F1_PARTITIONS = 3
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, Kafka's default
# librdkafka's retry backoff grows to retry.backoff.max.ms (1 s by default) while the dead
# leader refuses connections: capped at 100 ms so the figure is the cluster's, not the
# client's back-off.
F1_PRODUCER = {
    "acks": "all",
    "linger.ms": 0,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 100,
    "message.timeout.ms": 120_000,
    "delivery.report.only.error": False,
    "log_level": 0,  # the killed broker's refused connections are expected
}


def _replicated_topic(ctx: Context, prefix: str, partitions: int) -> str:
    cluster = ctx.cluster()
    topic = load_kafka.unique_name(prefix)
    load_kafka.create_topic(cluster.bootstrap, topic, partitions, 3, REPLICATED)
    cluster.wait_ready(topic, partitions)
    return topic


def _broker0_pid(ctx: Context) -> int:
    return ctx.cluster().brokers[0].pid


# -- P3 ---------------------------------------------------------------------------------------


def produce_run(ctx: Context) -> Metrics:
    cluster = ctx.cluster()
    topic = _replicated_topic(ctx, "P3", PARTITIONS)
    volume = ctx.scale.produce_bytes

    def run() -> Metrics:
        metrics = load_kafka.produce(cluster.bootstrap, topic, KIB, volume, ctx.progress,
                                     acks="all")
        metrics["bytes"] = float(KIB)
        return metrics

    try:
        metrics = with_resources(cluster, run)
        metrics.pop("written")
        # the followers kept up if every ISR is still whole (acks=all waited for all three)
        metrics["min_isr"] = float(min(len(p.isrs) for p in cluster.partitions(topic).values()))
        return metrics
    finally:
        load_kafka.delete_topic(cluster.bootstrap, topic)


P3_METRICS = {**THROUGHPUT, "min_isr": ("smallest ISR after", True)}


def _cases_p3(ctx: Context) -> list[Case]:
    return [Case("1 KiB rf=3 acks=all", SYSTEM, produce_run, requires=("logbus",),
                 profile_pid=_broker0_pid,
                 note=f"{ctx.scale.produce_bytes >> 20} MiB per run, min.insync.replicas=2; "
                 "CPU summed over the 3 brokers, RSS of the largest")]


# -- L2 ---------------------------------------------------------------------------------------


def latency_run(ctx: Context) -> Metrics:
    cluster = ctx.cluster()
    topic = _replicated_topic(ctx, "L2", PARTITIONS)
    try:
        return kafka_latency_run(ctx, cluster.bootstrap, topic, cluster.sampler)
    finally:
        load_kafka.delete_topic(cluster.bootstrap, topic)


def _cases_l2(ctx: Context) -> list[Case]:
    note = (f"{ctx.scale.latency_rate:,}/s for {ctx.scale.latency_seconds:g} s per run, "
            f"linger.ms={LINGER_MS}, min.insync.replicas=2")
    return [Case("1 KiB rf=3 acks=all", SYSTEM, latency_run, setup=settle,
                 requires=("logbus",), profile_pid=_broker0_pid, note=note)]


# -- F1 ---------------------------------------------------------------------------------------


def _produce_one(producer: Any, topic: str, partition: int, deadline: float) -> float:
    """Send one record to `partition` with librdkafka until it is acknowledged (acks=all);
    the perf_counter time of the successful delivery report."""
    attempt = LibrdkafkaAttempt(producer, topic, partition)
    while (done := attempt.poll()) is None:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"no acks=all produce to {topic}[{partition}] succeeded")
    return done


class LibrdkafkaAttempt:
    """One record produced with librdkafka (acks=all), produced again after a failed
    delivery; `poll()` returns the time of the first successful delivery report."""

    def __init__(self, producer: Any, topic: str, partition: int) -> None:
        self.producer, self.topic, self.partition = producer, topic, partition
        self.outcome: list[tuple[Any, float]] = []
        self.acked_at: float | None = None
        self._send()

    def _send(self) -> None:
        self.outcome.clear()
        self.producer.produce(self.topic, b"f1", partition=self.partition,
                              on_delivery=self._delivered)

    def _delivered(self, err: Any, _msg: Any) -> None:
        self.outcome.append((err, time.perf_counter()))

    def poll(self, timeout: float = 0.005) -> float | None:
        if self.acked_at is None:
            self.producer.poll(timeout)
            if self.outcome:
                err, at = self.outcome[0]
                if err is None:
                    self.acked_at = at
                else:
                    self._send()
        return self.acked_at


class WireProbe:
    """The cluster's side of a failover, without any client's discovery delay: one
    acks=all Produce of one record to `partition`, sent over the raw wire to every live
    broker in turn (the others answer NOT_LEADER_OR_FOLLOWER) until one acknowledges it."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.conns: dict[str, WireConnection] = {}

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()

    def try_once(self, topic: str, partition: int) -> bool:
        frame = produce_request(topic, partition, b"f1", acks=-1)
        for address in self.addresses:
            try:
                conn = self.conns.get(address)
                if conn is None:
                    conn = self.conns[address] = WireConnection(address)
                    conn.sock.settimeout(60)
                _corr, body = codec.decode_response(ApiKey.PRODUCE, PRODUCE_VERSION,
                                                    conn.request(frame))
            except OSError:
                dropped = self.conns.pop(address, None)
                if dropped is not None:
                    dropped.close()
                continue
            [answer] = [p for t in body["responses"] for p in t["partition_responses"]]
            if answer["error_code"] == ErrorCode.NONE:
                return True
        return False


def _measure_kill(cluster: LogbusCluster, producer: Any, topic: str, partition: int,
                  victim: int) -> tuple[float, float, float]:
    """Kill -9 `victim` (the partition's leader); seconds from the kill to the first
    acknowledged acks=all produce to the partition by the wire probe and by librdkafka,
    and to ZooKeeper's deletion of the victim's registration (its session's expiry)."""
    probe = WireProbe([b.address for b in cluster.brokers if b.broker_id != victim])
    expired = cluster.watch_unregistered(victim)
    try:
        killed_at = cluster.kill(victim)
        attempt = LibrdkafkaAttempt(producer, topic, partition)
        probed_at: float | None = None
        deadline = killed_at + 120
        while probed_at is None or attempt.acked_at is None:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"no acks=all produce to {topic}[{partition}] succeeded "
                                   "within 120 s of the kill")
            if probed_at is None and probe.try_once(topic, partition):
                probed_at = time.perf_counter()
            attempt.poll(0.01)
        expired_at = cluster.wait_for(expired, 10, f"broker {victim}'s registration to go")
        return probed_at - killed_at, attempt.acked_at - killed_at, expired_at - killed_at
    finally:
        probe.close()


def _ensure_offsets_topic(cluster: LogbusCluster) -> None:
    """A cluster in use holds `__consumer_offsets` (50 partitions, rf=3), and a kill moves
    its leaderships and shrinks its ISRs too: the controller writes each of those states
    to ZooKeeper as well. Made here (a consumer group's FindCoordinator creates it), so
    that F1 measures the same cluster whether L1/L2 ran before it or not."""
    if not cluster.partitions(OFFSETS_TOPIC):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "log_level": 0,
                             "group.id": load_kafka.unique_name("F1")})
        try:
            consumer.subscribe([OFFSETS_TOPIC])
            cluster.wait_for(lambda: consumer.poll(0.1) is None
                             and cluster.partitions(OFFSETS_TOPIC), 60, OFFSETS_TOPIC)
        finally:
            consumer.close()
    cluster.wait_ready(OFFSETS_TOPIC, OFFSETS_PARTITIONS)


def failover_run(ctx: Context) -> Metrics:
    cluster = ctx.cluster()
    kills = ctx.scale.failover_kills
    _ensure_offsets_topic(cluster)
    topic = _replicated_topic(ctx, "F1", F1_PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, **F1_PRODUCER})
    probe_ms: list[float] = []
    client_ms: list[float] = []
    expiry_ms: list[float] = []  # kill -> ZooKeeper deletes the broker's registration
    after_ms: list[float] = []  # that deletion -> the probe's acknowledged produce
    controller_kills = 0
    try:
        for partition in range(F1_PARTITIONS):  # connected, leaders known
            _produce_one(producer, topic, partition, time.perf_counter() + 60)
        ctx.progress.begin(f"F1: {kills} x kill -9 of a leader", kills)
        for _ in range(kills):
            controller = cluster.controller()
            leaders = {p: m.leader for p, m in sorted(cluster.partitions(topic).items())}
            # a leader that is not the controller: the figure is leader failover alone
            others = [p for p, leader in leaders.items() if leader != controller]
            partition = others[0] if others else 0
            controller_kills += not others
            victim = leaders[partition]
            probed, acked, expired = _measure_kill(cluster, producer, topic, partition,
                                                   victim)
            probe_ms.append(probed * 1000)
            client_ms.append(acked * 1000)
            expiry_ms.append(expired * 1000)
            after_ms.append((probed - expired) * 1000)
            ctx.progress.advance(1, 0)
            cluster.restart(victim)
            cluster.wait_ready(topic, F1_PARTITIONS)
    finally:
        ctx.progress.end()
        producer.flush(10)
        # after a failure mid-kill: the scenarios that follow need all three brokers
        for broker in cluster.brokers:
            if not broker.running:
                cluster.restart(broker.broker_id)
        load_kafka.delete_topic(cluster.bootstrap, topic)
    for values in (probe_ms, client_ms, expiry_ms, after_ms):
        values.sort()
    return {"p99_ms": percentile(probe_ms, 99), "p50_ms": percentile(probe_ms, 50),
            "max_ms": probe_ms[-1], "min_ms": probe_ms[0],
            "expiry_p50_ms": percentile(expiry_ms, 50),
            "expiry_max_ms": expiry_ms[-1],
            "after_expiry_p50_ms": percentile(after_ms, 50),
            "after_expiry_max_ms": after_ms[-1],
            "client_p99_ms": percentile(client_ms, 99),
            "client_p50_ms": percentile(client_ms, 50), "kills": float(kills),
            "controller_kills": float(controller_kills),
            "budget_ms": float(cluster.session_timeout_ms + 1000)}


F1_METRICS = {
    "p99_ms": ("p99 ms", False),
    "p50_ms": ("p50 ms", False),
    "max_ms": ("max ms", False),
    "min_ms": ("min ms", False),
    "expiry_p50_ms": ("session expiry p50 ms", False),
    "expiry_max_ms": ("session expiry max ms", False),
    "after_expiry_p50_ms": ("expiry to ack p50 ms", False),
    "after_expiry_max_ms": ("expiry to ack max ms", False),
    "client_p99_ms": ("librdkafka p99 ms", False),
    "client_p50_ms": ("librdkafka p50 ms", False),
    "kills": ("kills", True),
    "controller_kills": ("of them the controller", False),
    "budget_ms": ("session timeout + 1 s, ms", True),
}


def _cases_f1(ctx: Context) -> list[Case]:
    kills = ctx.scale.failover_kills
    return [Case("kill -9 of a leader", SYSTEM, failover_run, requires=("logbus",), runs=1,
                 note=f"one run of {kills} kills (p99 of {kills} is their maximum); "
                 f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, ZooKeeper "
                 f"tickTime={ctx.zookeeper_tick_ms}, rf=3, min.insync.replicas=2, "
                 "acks=all")]


P3 = Scenario("P3", "Produce throughput, 3 brokers, rf=3", _cases_p3, P3_METRICS,
              "as P1 with 1 KiB values, 6 partitions, replication factor 3, acks=all, "
              "min.insync.replicas=2")
L2 = Scenario("L2", "End-to-end latency, 3 brokers, rf=3", _cases_l2, LATENCY,
              "as L1: send to receipt, 1 KiB values, acks=all, replication factor 3")
F1 = Scenario("F1", "Leader failover", _cases_f1, F1_METRICS,
              "kill -9 of a partition leader (not the controller) to the first successful "
              "acks=all produce to its partition: a raw-wire probe to every live broker, "
              "and a librdkafka producer connected before the kill")
