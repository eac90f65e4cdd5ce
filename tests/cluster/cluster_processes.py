"""Real multi-broker clusters for the cluster and fault tests: N `logbus server start`
processes sharing one ZooKeeper, with process-level faults (SIGKILL, SIGTERM,
SIGSTOP/SIGCONT, restart) and questions answered by a real client's metadata.

    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        leader = cluster.leader_of("orders", 0)
        cluster.kill(leader)
        cluster.wait_for(lambda: cluster.leader_of("orders", 0) not in (-1, leader))

A helper module, not a conftest (tests/cluster has none: a second conftest would shadow
`from conftest import ...` elsewhere). Import the fixtures below into a test module to use
them: `from cluster_processes import cluster_zookeeper, zk_connect`. ZooKeeper comes from
Debian's `zookeeper` package; the tests fail (not skip) without it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest
from checker import ReplicaLogs, replica_batches

from logbus.cli.zookeeper_process import ZooKeeperProcess, die_with_parent
from ports import free_port

T = TypeVar("T")

# Brokers of a test cluster lose their ZooKeeper session this long after they stop
# answering (Kafka's default is 18 s; tests that need a dead broker noticed wait for it).
TEST_SESSION_TIMEOUT_MS = "6000"


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


# --- ZooKeeper -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cluster_zookeeper(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The test session's real ZooKeeper server (each test uses a chroot of its own
    through `zk_connect`): tests/conftest.py's `zookeeper` fixture where it exists, so a
    session runs one server, otherwise one started here. Either has `.connect`
    ("127.0.0.1:<port>")."""
    try:
        yield request.getfixturevalue("zookeeper")
        return
    except pytest.FixtureLookupError:
        pass
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


_CHROOTS = itertools.count()


@pytest.fixture
def zk_connect(cluster_zookeeper: Any, request: pytest.FixtureRequest) -> str:
    """`host:port/chroot` of a fresh chroot for this test (the brokers create it, as
    Kafka's do)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    return f"{cluster_zookeeper.connect}/logbus-{next(_CHROOTS)}-{name}"


# --- brokers ---------------------------------------------------------------------------------


@dataclass
class BrokerNode:
    """One broker process of a `ProcessCluster`; keeps its id, port and data across
    restarts."""

    broker_id: int
    port: int
    data_dir: Path
    log_file: Path
    properties: dict[str, str]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        overrides = [arg for k, v in self.properties.items() for arg in ("--override", f"{k}={v}")]
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logbus.cli.main", "server", "start", *overrides],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ},
                preexec_fn=die_with_parent,  # no broker outlives a killed test run
            )
        self.paused = False

    def wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(
                    f"broker {self.broker_id} exited with {self.returncode}; see {self.log_file}:\n"
                    + self.log_tail()
                )
            if listening(self.port):
                return
            time.sleep(0.1)
        raise RuntimeError(f"broker {self.broker_id} did not listen within {timeout:g}s")

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def send(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def state(self) -> str:
        """The process's state letter from /proc (R, S, T when stopped, ...; "" if gone)."""
        if self.proc is None:
            return ""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return ""
        return stat.rsplit(")", 1)[1].split()[0]

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ProcessCluster:
    """`n` real brokers (ids 0..n-1) on free loopback ports with `zookeeper.connect`,
    data in `tmp_path/broker-<id>`, output in `tmp_path/broker-<id>.log`.

    `broker_overrides` are server.properties settings for every broker (underscores stand
    for dots: `min_insync_replicas="2"`); `per_broker` adds settings for single brokers
    (`{0: {"broker.rack": "a"}}`). Used from one test thread; `close()` (or leaving the
    `with` block) always kills whatever is still running, paused brokers included."""

    def __init__(
        self,
        zk_connect: str,
        n: int,
        tmp_path: Path,
        *,
        per_broker: Mapping[int, Mapping[str, str]] | None = None,
        start: bool = True,
        await_registration: bool = True,
        start_timeout: float = 120.0,
        **broker_overrides: str,
    ) -> None:
        self.zk_connect = zk_connect
        self.tmp_path = tmp_path
        self.start_timeout = start_timeout
        common = {
            "zookeeper.connect": zk_connect,
            "zookeeper.session.timeout.ms": TEST_SESSION_TIMEOUT_MS,
            "offsets.topic.replication.factor": str(min(3, n)),
            "log.flush.offset.checkpoint.interval.ms": "1000",
            **{k.replace("_", "."): v for k, v in broker_overrides.items()},
        }
        self.nodes: dict[int, BrokerNode] = {}
        for broker_id in range(n):
            port = free_port()
            data_dir = tmp_path / f"broker-{broker_id}"
            props = {
                "broker.id": str(broker_id),
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(data_dir),
                **common,
                **dict((per_broker or {}).get(broker_id, {})),
            }
            log_file = tmp_path / f"broker-{broker_id}.log"
            self.nodes[broker_id] = BrokerNode(broker_id, port, data_dir, log_file, props)
        if start:
            try:
                self.start(await_registration=await_registration)
            except BaseException:
                self.close()
                raise

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, *, await_registration: bool = True) -> None:
        """Start every broker that is not running; wait until each listens and (with
        `await_registration`) until every broker's metadata lists all of them."""
        for node in self.nodes.values():
            if not node.running:
                node.spawn()
        for node in self.nodes.values():
            node.wait_listening(self.start_timeout)
        if await_registration:
            self.wait_registered()

    def wait_registered(self, timeout: float = 120.0) -> None:
        """Until every live broker's metadata lists every live broker."""
        live = set(self.live_ids())

        def all_registered() -> bool:
            return all(set(self.broker_ids(via=i)) >= live for i in live)

        self.wait_for(all_registered, timeout, f"brokers {sorted(live)} to register")

    def close(self) -> None:
        for node in self.nodes.values():
            if node.proc is None:
                continue
            if node.running:
                node.send(signal.SIGCONT)  # a stopped process must run to die of SIGKILL
                node.proc.kill()
            node.proc.wait(30)

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc is not None:
            self.print_log_tails()

    def print_log_tails(self, lines: int = 80) -> None:
        """The end of every broker's log, on stdout (pytest shows it with a failure)."""
        for node in self.nodes.values():
            try:
                tail = node.log_file.read_text(errors="replace").splitlines()[-lines:]
            except OSError as exc:
                tail = [f"(unreadable: {exc})"]
            print(f"----- broker {node.broker_id}: last {len(tail)} lines of {node.log_file}")
            print("\n".join(tail))

    # -- faults ---------------------------------------------------------------------------

    def kill(self, broker_id: int) -> None:
        """kill -9: no clean shutdown, no controlled shutdown."""
        node = self.nodes[broker_id]
        node.send(signal.SIGCONT)
        node.send(signal.SIGKILL)
        node.wait(30)
        node.paused = False

    def terminate(self, broker_id: int, timeout: float = 60.0) -> int:
        """SIGTERM and wait for the broker's clean shutdown; its exit status."""
        node = self.nodes[broker_id]
        node.send(signal.SIGCONT)
        node.send(signal.SIGTERM)
        node.paused = False
        return node.wait(timeout)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process keeps its sockets and ZooKeeper session until the session
        times out, and answers nothing (a GC pause or a hung machine). Returns once the
        kernel shows it stopped."""
        node = self.nodes[broker_id]
        node.send(signal.SIGSTOP)
        node.paused = True
        self.wait_for(lambda: node.state() in ("T", "t", ""), 10, f"broker {broker_id} to stop")

    def resume(self, broker_id: int) -> None:
        """SIGCONT; returns once the kernel shows the process running again."""
        node = self.nodes[broker_id]
        node.send(signal.SIGCONT)
        node.paused = False
        self.wait_for(lambda: node.state() not in ("T", "t"), 10, f"broker {broker_id} to run")

    def restart(self, broker_id: int, *, clean: bool = True) -> None:
        """Stop the broker if it runs (SIGTERM, or SIGKILL with clean=False), start it
        again with the same id, port and data, and wait until it listens."""
        node = self.nodes[broker_id]
        if node.running:
            if clean:
                self.terminate(broker_id)
            else:
                self.kill(broker_id)
        self.start_broker(broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Start a broker that was killed or terminated, once ZooKeeper has dropped its
        old registration (after a kill, when its session expires: a broker id still
        registered by a live session is refused at start-up, as Kafka does)."""
        node = self.nodes[broker_id]
        assert not node.running, f"broker {broker_id} is running"
        timeout = 3 * int(node.properties["zookeeper.session.timeout.ms"]) / 1000 + 10
        self.wait_for(
            lambda: not self.registered(broker_id),
            timeout,
            f"the session of the stopped broker {broker_id} to expire",
        )
        node.spawn()
        node.wait_listening(self.start_timeout)

    def registered(self, broker_id: int) -> bool:
        """Whether /brokers/ids/<id> exists in ZooKeeper (read with kazoo)."""
        return self._zk_read(f"/brokers/ids/{broker_id}") is not None

    def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        """The partition's state znode as ZooKeeper has it (leader, leader_epoch, isr,
        controller_epoch), with its znode version as "partition_epoch"."""
        found = self._zk_read(f"/brokers/topics/{topic}/partitions/{partition}/state")
        assert found is not None, f"no state znode for {topic}-{partition}"
        value: dict[str, Any] = json.loads(found[0])
        value["partition_epoch"] = found[1]
        return value

    def controller_epoch(self) -> int:
        """`/controller_epoch` as ZooKeeper has it."""
        found = self._zk_read("/controller_epoch")
        assert found is not None, "no /controller_epoch"
        return int(found[0])

    def dynamic_config(self, kind: str, name: str) -> dict[str, str]:
        """The dynamic configs ZooKeeper holds for a broker ("brokers", "0") or a topic
        ("topics", "orders"): `/config/<kind>/<name>`, {} when none."""
        import json

        found = self._zk_read(f"/config/{kind}/{name}")
        return {} if found is None else dict(json.loads(found[0]).get("config", {}))

    def _zk_read(self, path: str) -> tuple[bytes, int] | None:
        """A znode's (data, version) under the chroot, None when absent (read with kazoo)."""
        from kazoo.client import KazooClient

        hosts, slash, chroot = self.zk_connect.partition("/")
        # without the chroot in the connect string: kazoo warns when it does not exist yet
        client = KazooClient(hosts=hosts, timeout=10)
        client.start(10)
        try:
            full = f"{slash}{chroot.rstrip('/')}{path}".replace("//", "/")
            if client.exists(full) is None:
                return None
            data, stat = client.get(full)
            return bytes(data), int(stat.version)
        finally:
            client.stop()
            client.close()

    # -- where things are -----------------------------------------------------------------

    def live_ids(self) -> list[int]:
        """Brokers running and not paused."""
        return [i for i, n in self.nodes.items() if n.running and not n.paused]

    @property
    def bootstrap(self) -> str:
        """The addresses of the live brokers (running, not paused)."""
        return ",".join(self.nodes[i].address for i in self.live_ids())

    def bootstrap_of(self, broker_id: int) -> str:
        return self.nodes[broker_id].address

    def data_dir(self, broker_id: int) -> Path:
        return self.nodes[broker_id].data_dir

    def _admin(self, via: int | None) -> Any:
        import logbus

        servers = self.bootstrap_of(via) if via is not None else self.bootstrap
        return logbus.Admin(bootstrap_servers=servers, request_timeout_ms=5000)

    def metadata(self, topic: str, via: int | None = None) -> Any:
        """The topic's `TopicInfo` (partitions with leader, replicas, isr) as a live
        broker (or broker `via`) answers Metadata."""
        with self._admin(via) as admin:
            return admin.describe_topics([topic])[topic]

    def leader_of(self, topic: str, partition: int, via: int | None = None) -> int:
        """The partition's leader by the metadata (-1 when it has none)."""
        return int(self.metadata(topic, via).partitions[partition].leader)

    def isr_of(self, topic: str, partition: int, via: int | None = None) -> tuple[int, ...]:
        return tuple(self.metadata(topic, via).partitions[partition].isr)

    def controller(self, via: int | None = None) -> int | None:
        """The controller's broker id by DescribeCluster (None when there is none)."""
        with self._admin(via) as admin:
            found = admin.describe_cluster().controller
        return None if found is None else int(found.node_id)

    def broker_ids(self, via: int | None = None) -> list[int]:
        """The brokers the metadata lists (the registered, live ones)."""
        with self._admin(via) as admin:
            return sorted(int(node.node_id) for node in admin.describe_cluster().nodes)

    def create_topic(
        self, topic: str, partitions: int = 1, replication_factor: int = 3, **configs: str
    ) -> None:
        """Create the topic and wait until every partition has a leader."""
        import logbus

        with self._admin(None) as admin:
            admin.create_topics(
                [
                    logbus.NewTopic(
                        topic,
                        partitions,
                        replication_factor,
                        {k.replace("_", "."): v for k, v in configs.items()},
                    )
                ]
            )

        def has_leaders() -> bool:
            parts = self.metadata(topic).partitions
            return len(parts) == partitions and all(p.leader >= 0 for p in parts.values())

        self.wait_for(has_leaders, 60, f"leaders for {topic}")

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark, by ListOffsets "latest" to its leader."""
        import logbus

        tp = logbus.TopicPartition(topic, partition)
        with self._admin(None) as admin:
            return int(admin.list_offsets({tp: "latest"})[tp].offset)

    def replica_logs(self, topic: str, partitions: Iterable[int]) -> dict[Any, ReplicaLogs]:
        """The checker's view of each partition's replicas now: the high watermark and ISR
        from the leader, and every replica's batches read from its segment files. Quiesce
        the load first (followers may still be fetching the last batches)."""
        info = self.metadata(topic)
        out = {}
        for partition in partitions:
            part = info.partitions[partition]
            # The ISR as ZooKeeper has it: a broker's Metadata answer may be stale (a
            # follower just resumed from SIGSTOP still reports the ISR it had before)
            isr = tuple(self.partition_state(topic, partition)["isr"])
            out[(topic, partition)] = ReplicaLogs(
                high_watermark=self.high_watermark(topic, partition),
                isr=isr,
                logs={
                    b: replica_batches(self.data_dir(b), topic, partition) for b in part.replicas
                },
            )
        return out

    @staticmethod
    def wait_for(
        predicate: Callable[[], T], timeout: float = 60.0, what: str = "the condition"
    ) -> T:
        """Call `predicate` until it returns something truthy (returned); errors it
        raises count as "not yet". AssertionError naming `what` (and the last error)
        after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except Exception as exc:  # a broker that is not ready yet
                last_error = exc
            if time.monotonic() > deadline:
                detail = f" (last error: {last_error!r})" if last_error else ""
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{detail}")
            time.sleep(0.2)
