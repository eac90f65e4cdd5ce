"""A local logbus cluster for the replicated scenarios (P3, L2, F1): a real ZooKeeper
(Debian's `zookeeper` package, started by `logbus.cli.zookeeper_process`, as `logbus
cluster up` does) and three `logbus server start` processes with `zookeeper.connect`,
each on its own loopback port and data dir. Faults for F1: kill -9 of one broker and its
restart once ZooKeeper has dropped its registration. Questions (leader, ISR, controller)
are answered by librdkafka's metadata, as the load generator sees them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.systems import (
    REPO,
    ResourceSampler,
    ResourceUsage,
    Unavailable,
    free_port,
    wait_listening,
)

T = TypeVar("T")

BROKERS = 3
# Kafka's default is 18000: a kill then costs 18 s before the controller moves leadership.
# F1's target is relative to this figure (<= session timeout + 1 s).
SESSION_TIMEOUT_MS = 6000
CHROOT = "/logbus-bench"
# ZooKeeper's tickTime, as `logbus cluster up` writes it. ZooKeeper expires sessions in
# buckets of one tick: a session ends at the first tick boundary after its last heartbeat
# plus the timeout (`--zookeeper-tick-ms` changes it, to see that part of F1's figure).
TICK_MS = 500


@dataclass
class ClusterBroker:
    broker_id: int
    port: int
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


class ClusterSampler:
    """CPU seconds summed over the cluster's brokers (every copy of a byte costs CPU on
    some broker) and the largest broker's peak RSS."""

    def __init__(self, pids: list[int]) -> None:
        self.samplers = [ResourceSampler(pid) for pid in pids]

    def __enter__(self) -> ClusterSampler:
        for sampler in self.samplers:
            sampler.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for sampler in self.samplers:
            sampler.__exit__(*exc)
        self.usage = ResourceUsage(sum(s.usage.cpu_seconds for s in self.samplers),
                                   max(s.usage.peak_rss_bytes for s in self.samplers))


class LogbusCluster:
    """ZooKeeper plus `BROKERS` brokers (ids 0..n-1). `start()` returns once every broker
    listens and every broker's metadata lists all of them; `stop()` ends everything."""

    name = "logbus cluster"

    def __init__(self, workdir: Path, event_loop: str = "uvloop", brokers: int = BROKERS,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS,
                 tick_ms: int = TICK_MS) -> None:
        self.workdir = workdir
        self.event_loop = event_loop
        self.session_timeout_ms = session_timeout_ms
        self.tick_ms = tick_ms
        self.zookeeper: Any = None
        self._kazoo: Any = None
        self.brokers = [
            ClusterBroker(i, free_port(), workdir / f"broker-{i}", workdir / f"broker-{i}.log")
            for i in range(brokers)
        ]

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        from logbus.cli.zookeeper_process import ZooKeeperError, ZooKeeperProcess

        self.workdir.mkdir(parents=True, exist_ok=True)
        zookeeper = ZooKeeperProcess(self.workdir / "zookeeper", free_port())
        write_config = zookeeper.write_config

        def with_tick() -> Path:  # the same zoo.cfg as `logbus cluster up`, but tickTime
            path = write_config()
            text = re.sub(r"(?m)^tickTime=\d+$", f"tickTime={self.tick_ms}", path.read_text())
            path.write_text(text)
            return path

        zookeeper.write_config = with_tick  # type: ignore[method-assign]
        try:
            zookeeper.start()
        except ZooKeeperError as exc:
            raise Unavailable(str(exc)) from exc
        self.zookeeper = zookeeper
        try:
            for broker in self.brokers:
                self._spawn(broker)
            for broker in self.brokers:
                assert broker.proc is not None
                wait_listening(broker.proc, broker.port, f"broker {broker.broker_id}",
                               broker.log, timeout=60)
            self.wait_for(self._all_registered, 60, "every broker to see all brokers")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, broker: ClusterBroker) -> None:
        self._start_broker_process(broker, self.broker_properties(broker))

    def broker_properties(self, broker: ClusterBroker) -> dict[str, str]:
        """The broker's server.properties overrides (a subclass adds its own)."""
        return {
            "broker.id": str(broker.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "log.dirs": str(broker.data_dir),
            "zookeeper.connect": self.zk_connect,
            "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
            "offsets.topic.replication.factor": str(min(3, len(self.brokers))),
            "default.replication.factor": str(min(3, len(self.brokers))),
            "min.insync.replicas": "2",
            "num.partitions": "6",
            "log.segment.delete.delay.ms": "0",
        }

    def _start_broker_process(self, broker: ClusterBroker, props: dict[str, str]) -> None:
        env = dict(os.environ)
        src = str(REPO / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        env["LOGBUS_EVENT_LOOP"] = self.event_loop
        overrides = [arg for k, v in props.items() for arg in ("--override", f"{k}={v}")]
        with open(broker.log, "ab") as log:
            broker.proc = subprocess.Popen(
                [sys.executable, "-m", "logbus.cli.main", "server", "start", *overrides],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=self.workdir)

    def stop(self) -> None:
        """SIGTERM to every broker at once (SIGKILL after 30 s), then ZooKeeper."""
        running = [b for b in self.brokers if b.running]
        for broker in running:
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for broker in running:
            assert broker.proc is not None
            try:
                broker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                broker.proc.kill()
                broker.proc.wait(10)
        if self._kazoo is not None:
            self._kazoo.stop()
            self._kazoo.close()
            self._kazoo = None
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None

    # -- where things are -------------------------------------------------------------------

    @property
    def zk_connect(self) -> str:
        assert self.zookeeper is not None
        return f"{self.zookeeper.connect}{CHROOT}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers if b.running)

    @property
    def pids(self) -> list[int]:
        return [b.pid for b in self.brokers if b.running]

    def sampler(self) -> ClusterSampler:
        return ClusterSampler(self.pids)

    def metadata(self, via: str | None = None) -> Any:
        """librdkafka's ClusterMetadata as a live broker (or `via`) answers it."""
        from confluent_kafka.admin import AdminClient

        # log_level 0: connections refused by a killed broker are expected here
        admin = AdminClient({"bootstrap.servers": via or self.bootstrap, "log_level": 0})
        return admin.list_topics(timeout=5)

    def _all_registered(self) -> bool:
        live = {b.broker_id for b in self.brokers if b.running}
        return all(set(self.metadata(b.address).brokers) >= live
                   for b in self.brokers if b.running)

    def partitions(self, topic: str) -> dict[int, Any]:
        """partition -> librdkafka's PartitionMetadata (leader, replicas, isrs)."""
        found = self.metadata().topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return dict(found.partitions)

    def controller(self) -> int:
        return int(self.metadata().controller_id)

    def wait_ready(self, topic: str, partitions: int, timeout: float = 120) -> None:
        """Until every partition of `topic` has a live leader and its whole ISR."""
        live = {b.broker_id for b in self.brokers if b.running}

        def ready() -> bool:
            parts = self.partitions(topic)
            return len(parts) == partitions and all(
                p.leader in live and set(p.isrs) == set(p.replicas) == live
                for p in parts.values())

        self.wait_for(ready, timeout, f"{topic}: leaders and the whole ISR on every partition")

    # -- faults -----------------------------------------------------------------------------

    def kill(self, broker_id: int) -> float:
        """kill -9; the perf_counter time of the signal."""
        broker = self.brokers[broker_id]
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGKILL)
        killed_at = time.perf_counter()
        broker.proc.wait(30)
        return killed_at

    def restart(self, broker_id: int) -> None:
        """Start a killed broker again once ZooKeeper has dropped its registration (its
        session expired: a broker id still registered is refused at start-up)."""
        broker = self.brokers[broker_id]
        assert not broker.running
        self.wait_for(lambda: not self.registered(broker_id),
                      3 * self.session_timeout_ms / 1000 + 10,
                      f"the session of the killed broker {broker_id} to expire")
        self._spawn(broker)
        assert broker.proc is not None
        wait_listening(broker.proc, broker.port, f"broker {broker_id}", broker.log, timeout=60)
        self.wait_for(self._all_registered, 60, f"broker {broker_id} to register")

    def kazoo(self) -> Any:
        """The bench's own ZooKeeper session (kazoo), opened on first use."""
        if self._kazoo is None:
            from kazoo.client import KazooClient

            assert self.zookeeper is not None
            client = KazooClient(hosts=self.zookeeper.connect, timeout=10)
            client.start(10)
            self._kazoo = client
        return self._kazoo

    def registered(self, broker_id: int) -> bool:
        return self.kazoo().exists(f"{CHROOT}/brokers/ids/{broker_id}") is not None

    def watch_unregistered(self, broker_id: int) -> Callable[[], float | None]:
        """Watch /brokers/ids/<id>; the returned function gives the perf_counter time at
        which ZooKeeper reported its deletion (the broker's session expired), or None."""
        gone: list[float] = []

        def fired(event: Any) -> None:
            if event.type == "DELETED":
                gone.append(time.perf_counter())

        if self.kazoo().exists(f"{CHROOT}/brokers/ids/{broker_id}", watch=fired) is None:
            raise RuntimeError(f"broker {broker_id} is not registered")
        return lambda: gone[0] if gone else None

    @staticmethod
    def wait_for(predicate: Callable[[], T], timeout: float, what: str) -> T:
        """`predicate()` until truthy (errors count as "not yet"); RuntimeError naming
        `what` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as exc:
                last = exc
            if time.monotonic() > deadline:
                detail = f" (last error: {last!r})" if last else ""
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}{detail}")
            time.sleep(0.1)
