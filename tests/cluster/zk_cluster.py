"""A few `logbus server start` processes joined through a real ZooKeeper (the session's
server, a chroot per test), for the controller tests; `cluster_factory` is their fixture.

Imported by the test modules of tests/cluster (there is no conftest.py there).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import AdminClient, ClusterMetadata

from logbus.controller.metadata_store import NoNode
from logbus.controller.zookeeper_store import ZooKeeperStore
from ports import free_port

SESSION_TIMEOUT_MS = 3000
# How long a broker process may take to listen, register and agree on the controller: a
# bound on a hang only (a loaded machine, parallel workers), never a timed assertion
START_TIMEOUT = 90.0
T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll `condition` until it returns something truthy (never a timed assertion: the
    timeout only bounds a hang)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except RuntimeError:  # a broker died: no point waiting
            raise
        except Exception as exc:  # a broker not answering yet
            last_error = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


@dataclass
class ClusterBroker:
    broker_id: int
    data_dir: Path
    zk_connect: str
    port: int = field(default_factory=free_port)
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"broker-{self.broker_id}-{self.port}.log"

    def args(self) -> list[str]:
        settings = [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            f"log.dirs={self.data_dir}",
            f"broker.id={self.broker_id}",
            f"zookeeper.connect={self.zk_connect}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            *self.extra,
        ]
        out = [sys.executable, "-m", "logbus.cli.main", "server", "start"]
        for setting in settings:
            out += ["--override", setting]
        return out

    def launch(self) -> ClusterBroker:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log, env={**os.environ})
        return self

    def start(self, timeout: float = START_TIMEOUT) -> ClusterBroker:
        self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker {self.broker_id} exited: {self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"broker {self.broker_id} did not start listening")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def exit_code(self, timeout: float = 60) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM: a clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(60)

    def metadata(self, topic: str | None = None) -> ClusterMetadata:
        """Metadata from this broker alone (no other broker is contacted)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        return admin.list_topics(topic, timeout=10)


@dataclass
class ZkCluster:
    zk_connect: str
    root: Path
    store: ZooKeeperStore
    brokers: dict[int, ClusterBroker] = field(default_factory=dict)

    def add(self, broker_id: int, *extra: str, start: bool = True) -> ClusterBroker:
        broker = ClusterBroker(broker_id, self.root / f"data-{broker_id}", self.zk_connect)
        broker.extra = list(extra)
        self.brokers[broker_id] = broker
        return broker.start() if start else broker

    @property
    def bootstrap(self) -> str:
        return ",".join(
            b.bootstrap for b in self.brokers.values() if b.proc and b.proc.poll() is None
        )

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    # --- ZooKeeper's view ---

    def registered(self) -> set[int]:
        return {int(c) for c in self.store.children("/brokers/ids")}

    def controller(self) -> tuple[int, int]:
        """(active controller id, controller epoch); (-1, epoch) when none. `/controller`
        is read first: a controller bumps the epoch in the transaction creating it."""
        try:
            controller = int(json.loads(self.store.get("/controller")[0])["brokerid"])
        except NoNode:
            controller = -1
        return controller, int(self.store.get("/controller_epoch")[0])

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        data, version = self.store.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        value: dict[str, Any] = json.loads(data)
        value["partition_epoch"] = version
        return value

    def wait_registered(self, ids: set[int], timeout: float = START_TIMEOUT) -> None:
        wait_for(lambda: self.registered() == ids, timeout, f"brokers {ids} registered")

    def wait_controller(self, timeout: float = START_TIMEOUT) -> tuple[int, int]:
        """The controller once every live broker's Metadata reports it."""

        def agreed() -> tuple[int, int] | None:
            controller, epoch = self.controller()
            if controller < 0:
                return None
            for broker in self.brokers.values():
                if broker.proc is None or broker.proc.poll() is not None:
                    continue
                if broker.metadata().controller_id != controller:
                    return None
            return controller, epoch

        return wait_for(agreed, timeout, "every broker to agree on the controller")

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.kill()
        self.store.close()


@pytest.fixture
def cluster_factory(zk_connect: str, tmp_path: Path) -> Iterator[Callable[..., ZkCluster]]:
    """`make(n, *extra)`: n brokers (ids 1..n) in this test's ZooKeeper chroot."""
    clusters: list[ZkCluster] = []

    def make(n: int, *extra: str) -> ZkCluster:
        store = ZooKeeperStore(zk_connect, 10_000, 10_000)
        cluster = ZkCluster(zk_connect, tmp_path, store)
        clusters.append(cluster)
        for broker_id in range(1, n + 1):
            cluster.add(broker_id, *extra, start=False).launch()
        for broker in cluster.brokers.values():
            assert broker.proc is not None
            wait_for(
                lambda b=broker: _listening(b),  # type: ignore[misc]
                START_TIMEOUT,
                f"broker {broker.broker_id} to listen",
            )
        if n:
            cluster.wait_registered(set(range(1, n + 1)))
        return cluster

    yield make
    for cluster in clusters:
        cluster.close()


def _listening(broker: ClusterBroker) -> bool:
    assert broker.proc is not None
    if broker.proc.poll() is not None:
        raise RuntimeError(f"broker {broker.broker_id} exited: {broker.output()}")
    try:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=0.5):
            return True
    except OSError:
        return False
