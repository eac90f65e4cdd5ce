"""F2: a partition leader cut off from ZooKeeper and from its followers while its clients
still reach it (issue 24). Three brokers as F1's (bench/cluster.py), but each reaches
ZooKeeper through a TCP proxy of its own and the other brokers reach it (its inter-broker
listener: follower fetches, the controller's requests) through another; clients connect
to its client listener directly. The proxies are the cluster tests' (tests/cluster/
tcp_proxy.py): cut, they drop every byte and leave connections open.

A confluent-kafka idempotent acks=all producer sends to a one-partition rf=3 topic
(min.insync.replicas=2) throughout; each isolation cuts the leader's two proxies for
`ISOLATION_S`, then heals them and waits for the whole ISR. The headline is the longest
gap between two consecutive acknowledgements from the last one before the cut to the
heal (if none came after the cut, the gap runs to the heal). Target: at most
zookeeper.session.timeout.ms + 3 s at a session timeout of 4000 ms.
"""

from __future__ import annotations

import importlib.util
import itertools
import time
from typing import Any

from confluent_kafka import Producer

from bench import load_kafka
from bench.cluster import ClusterBroker, LogbusCluster
from bench.core import Case, Context, Metrics, Scenario, percentile
from bench.systems import REPO, free_port

SYSTEM = "logbus x3"
SESSION_TIMEOUT_MS = 4000
ISOLATION_S = 15.0
STEADY_S = 2.0
MAX_ISOLATIONS = 3
SEND_INTERVAL_S = 0.002
MAX_PENDING = 50
F2_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "message.timeout.ms": 180_000,
    "log_level": 0,  # the isolated broker's timed-out connections are expected
}


def _tcp_proxy_class() -> Any:
    """The cluster tests' TcpProxy, loaded from its file (tests/ is no package)."""
    path = REPO / "tests" / "cluster" / "tcp_proxy.py"
    spec = importlib.util.spec_from_file_location("bench_tcp_proxy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TcpProxy


class PartitionableCluster(LogbusCluster):
    """`LogbusCluster` with a ZooKeeper proxy and an inter-broker proxy per broker;
    `isolate(id)` cuts both, `heal()` restores every path."""

    name = "logbus cluster (proxied)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.proxies: dict[int, tuple[Any, Any]] = {}  # broker -> (ZooKeeper, inter-broker)
        self._internal_ports: dict[int, int] = {}

    def broker_properties(self, broker: ClusterBroker) -> dict[str, str]:
        props = super().broker_properties(broker)
        if broker.broker_id not in self.proxies:
            proxy = _tcp_proxy_class()
            host, _, port = self.zookeeper.connect.partition(":")
            internal = free_port()
            self.proxies[broker.broker_id] = (proxy(int(port), host), proxy(internal))
            self._internal_ports[broker.broker_id] = internal
        zk, repl = self.proxies[broker.broker_id]
        internal = self._internal_ports[broker.broker_id]
        client = f"127.0.0.1:{broker.port}"
        chroot = props["zookeeper.connect"].partition("/")[2]
        props.update({
            "zookeeper.connect": f"{zk.address}/{chroot}",
            "listeners": f"CLIENT://{client},REPLICATION://127.0.0.1:{internal}",
            "advertised.listeners": f"CLIENT://{client},REPLICATION://{repl.address}",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
            "inter.broker.listener.name": "REPLICATION",
        })
        return props

    def isolate(self, broker_id: int) -> float:
        """Cut the broker off from ZooKeeper and the other brokers; the perf_counter time."""
        for proxy in self.proxies[broker_id]:
            proxy.cut()
        return time.perf_counter()

    def heal(self) -> None:
        for pair in self.proxies.values():
            for proxy in pair:
                if proxy.is_cut:
                    proxy.heal()

    def stop(self) -> None:
        super().stop()
        for pair in self.proxies.values():
            for proxy in pair:
                proxy.close()
        self.proxies.clear()


class AckStream:
    """One idempotent acks=all librdkafka producer sending small records to `topic`
    (at most `max_pending` unacknowledged), one every `interval` seconds (catching up
    after a stall), with the perf_counter time of every acknowledgement and the count of
    failed deliveries."""

    max_pending = MAX_PENDING
    interval = SEND_INTERVAL_S

    def __init__(self, bootstrap: str, topic: str,
                 settings: dict[str, Any] | None = None) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap,
                                  **(F2_PRODUCER if settings is None else settings)})
        self.topic = topic
        self.acks: list[float] = []
        self.failed = 0
        self.pending = 0
        self.sent = 0

    def _produce(self) -> None:
        self.producer.produce(self.topic, b"f2-%d" % self.sent, on_delivery=self._delivered)

    def _delivered(self, err: Any, msg: Any) -> None:
        self.pending -= 1
        if err is None:
            self._acked(msg, time.perf_counter())
        else:
            self.failed += 1

    def _acked(self, _msg: Any, at: float) -> None:
        self.acks.append(at)

    def flowing(self) -> bool:
        """Whether the last acknowledgement came within the last 100 ms."""
        return bool(self.acks) and time.perf_counter() - self.acks[-1] < 0.1

    def run_for(self, seconds: float) -> None:
        self.run_until(lambda: False, seconds)

    def run_until(self, done: Any, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        next_send = time.perf_counter()
        while time.perf_counter() < deadline:
            if done():
                return True
            now = time.perf_counter()
            while self.pending < self.max_pending and now >= next_send:
                self._produce()
                self.sent += 1
                self.pending += 1
                next_send += self.interval
            next_send = max(next_send, now - self.interval)  # no burst past one interval
            self.producer.poll(0.001)
        return bool(done())

    def close(self) -> None:
        self.producer.flush(60)


def load_until_ready(stream: AckStream, cluster: LogbusCluster, topic: str, partitions: int,
                     after: str, timeout: float = 120.0, step: float = 1.0) -> None:
    """Keep `stream` sending while a broker catches up, until every partition of `topic`
    has its whole ISR again; RuntimeError after `timeout` seconds."""
    ready_by = time.perf_counter() + timeout
    while time.perf_counter() < ready_by:
        stream.run_for(step)
        try:
            cluster.wait_ready(topic, partitions, timeout=0.1)
            return
        except RuntimeError:
            continue
    raise RuntimeError(f"{topic}: the ISR is not whole {timeout:g} s after {after}")


def longest_gap(acks: list[float], cut_at: float, healed_at: float) -> tuple[float, float]:
    """The longest time between consecutive acknowledgements from the last one before
    `cut_at` up to `healed_at` (the time from the last one to `healed_at` counts too: a
    producer that stops being acknowledged has a gap that runs to the heal), and the time
    that gap ended."""
    before = [t for t in acks if t <= cut_at]
    during = [t for t in acks if cut_at < t <= healed_at]
    points = [*(before[-1:] or [cut_at]), *during, healed_at]
    gap, end = max((b - a, b) for a, b in itertools.pairwise(points))
    return gap, end


def isolation_run(ctx: Context) -> Metrics:
    isolations = max(1, min(MAX_ISOLATIONS, ctx.scale.failover_kills))
    cluster = PartitionableCluster(ctx.workdir / "isolation", ctx.event_loop,
                                   session_timeout_ms=SESSION_TIMEOUT_MS,
                                   tick_ms=ctx.zookeeper_tick_ms)
    ctx.progress.note("starting ZooKeeper and 3 logbus brokers behind proxies")
    cluster.start()
    gaps_ms: list[float] = []
    resume_ms: list[float] = []
    stream: AckStream | None = None
    try:
        topic = load_kafka.unique_name("F2")
        load_kafka.create_topic(cluster.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
        cluster.wait_ready(topic, 1)
        stream = AckStream(cluster.bootstrap, topic)
        ctx.progress.begin(f"F2: {isolations} x an isolated leader", isolations)
        for _ in range(isolations):
            stream.run_for(STEADY_S)
            # acknowledgements flowing (a producer still starting would hide the gap)
            if not stream.run_until(stream.flowing, 60):
                raise RuntimeError(f"{topic}: no steady acknowledgements before the cut")
            leader = cluster.partitions(topic)[0].leader
            cut_at = cluster.isolate(leader)
            stream.run_for(ISOLATION_S)
            healed_at = time.perf_counter()
            cluster.heal()
            gap, resumed_at = longest_gap(stream.acks, cut_at, healed_at)
            gaps_ms.append(gap * 1000)
            resume_ms.append((resumed_at - cut_at) * 1000)
            ctx.progress.advance(1, 0)
            load_until_ready(stream, cluster, topic, 1, "the heal")
    finally:
        ctx.progress.end()
        if stream is not None:
            stream.close()
        cluster.stop()
    gaps_ms.sort()
    resume_ms.sort()
    return {"max_gap_ms": gaps_ms[-1], "gap_p50_ms": percentile(gaps_ms, 50),
            "resume_p50_ms": percentile(resume_ms, 50), "resume_max_ms": resume_ms[-1],
            "failed": float(stream.failed if stream is not None else 0),
            "isolations": float(isolations),
            "budget_ms": float(SESSION_TIMEOUT_MS + 3000)}


F2_METRICS = {
    "max_gap_ms": ("longest gap between acks, max ms", False),
    "gap_p50_ms": ("longest gap p50 ms", False),
    "resume_p50_ms": ("cut to the gap's end p50 ms", False),
    "resume_max_ms": ("cut to the gap's end max ms", False),
    "failed": ("failed deliveries", False),
    "isolations": ("isolations", True),
    "budget_ms": ("session timeout + 3 s, ms", True),
}


def _cases_f2(ctx: Context) -> list[Case]:
    isolations = max(1, min(MAX_ISOLATIONS, ctx.scale.failover_kills))
    return [Case("isolated leader", SYSTEM, isolation_run, requires=("logbus",), runs=1,
                 note=f"one run of {isolations} isolations of {ISOLATION_S:g} s; "
                 f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, ZooKeeper "
                 f"tickTime={ctx.zookeeper_tick_ms}, rf=3, min.insync.replicas=2, "
                 "confluent-kafka idempotent acks=all")]


F2 = Scenario("F2", "Isolated leader", _cases_f2, F2_METRICS,
              "a partition leader cut off from ZooKeeper and its followers by proxies "
              "that drop bytes, its clients still reaching it: the longest gap between "
              "acknowledgements of an idempotent acks=all librdkafka producer")
