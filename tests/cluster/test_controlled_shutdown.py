"""Controlled shutdown (Kafka's ControlledShutdown): a broker stopped with SIGTERM first
has the controller move the leaderships it holds to other in-sync replicas and take it
out of every ISR, while it is still registered; with `controlled.shutdown.enable=false`
the controller moves them only once its registration is gone. Under an acks=all
confluent-kafka load, no acknowledged record is lost."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import cluster_processes
import pytest
from checker import History
from cluster_processes import ProcessCluster
from fault_checks import read_and_check, wait_isr
from load import ProducerLoad

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "rolling"
PARTITIONS = 6

CONFLUENT_LOAD: dict[str, Any] = {
    "client": "confluent",
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 120000,
    "log_level": 0,
}


class ShutdownObserver:
    """Whether every partition's leadership and ISR membership left `broker` before its
    registration did, told by ZooKeeper's transaction ids: a partition state znode's
    `mzxid` is the transaction that wrote it, and once the broker's `/brokers/ids/<id>`
    is gone, the `pzxid` of `/brokers/ids` is the transaction that removed it (no other
    broker comes or goes meanwhile). A thread reads the states over and over while the
    broker stops and keeps, per partition, the first state it saw without the broker (a
    later write, such as an ISR change, cannot hide it); `finish()` reads them once more
    after the broker's exit, then the removal's transaction."""

    def __init__(self, zk_connect: str, topic: str, partitions: int, broker: int) -> None:
        from kazoo.client import KazooClient

        hosts, _, chroot = zk_connect.partition("/")
        self.root = f"/{chroot}".rstrip("/")
        self.client = KazooClient(hosts=hosts, timeout=10)
        self.topic, self.partitions, self.broker = topic, partitions, broker
        self.moved_at: dict[int, int] = {}  # partition -> mzxid of a state without it
        self.deregistered_at: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shutdown-observer")

    def __enter__(self) -> ShutdownObserver:
        self.client.start(10)
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.stop()
        self.client.close()

    def _read(self) -> None:
        for p in range(self.partitions):
            path = f"{self.root}/brokers/topics/{self.topic}/partitions/{p}/state"
            data, stat = self.client.get(path)
            state = json.loads(data)
            if state["leader"] not in (self.broker, -1) and self.broker not in state["isr"]:
                self.moved_at.setdefault(p, stat.mzxid)

    def _run(self) -> None:
        while not self._stop.is_set() and len(self.moved_at) < self.partitions:
            self._read()

    def finish(self) -> None:
        """After the broker's exit."""
        self._stop.set()
        self._thread.join(30)
        self._read()
        assert self.client.exists(f"{self.root}/brokers/ids/{self.broker}") is None
        self.deregistered_at = self.client.exists(f"{self.root}/brokers/ids").pzxid

    @property
    def moved_before_deregistration(self) -> bool:
        assert self.deregistered_at is not None, "call finish() first"
        return len(self.moved_at) == self.partitions and all(
            zxid < self.deregistered_at for zxid in self.moved_at.values()
        )


def led_by(cluster: ProcessCluster, broker: int) -> list[int]:
    return [p for p in range(PARTITIONS) if cluster.partition_state(TOPIC, p)["leader"] == broker]


@pytest.mark.parametrize("whom", ["controller", "not-controller"])
def test_sigterm_moves_leaderships_and_isr_membership_before_the_broker_leaves(
    zk_connect: str, tmp_path: Path, whom: str
) -> None:
    """The controller's own shutdown goes through the same request (to itself)."""
    with ProcessCluster(
        zk_connect, 3, tmp_path, min_insync_replicas="2", auto_leader_rebalance_enable="false"
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        controller = cluster.controller()
        assert controller is not None
        victim = controller if whom == "controller" else (controller + 1) % 3
        assert led_by(cluster, victim), "the victim leads partitions"
        history = History()
        with ProducerLoad(cluster.bootstrap, history, TOPIC, producers=2, **CONFLUENT_LOAD) as load:
            load.wait_acknowledged(200)
            with ShutdownObserver(zk_connect, TOPIC, PARTITIONS, victim) as observer:
                assert cluster.terminate(victim) == 0
                observer.finish()
            assert observer.moved_before_deregistration, (
                f"broker {victim} deregistered (zxid {observer.deregistered_at}) before "
                f"the moves: {observer.moved_at}"
            )
            for p in range(PARTITIONS):
                state = cluster.partition_state(TOPIC, p)
                assert state["leader"] != victim and victim not in state["isr"], state
            load.wait_acknowledged(load.acknowledged() + 200)
        log = (tmp_path / f"broker-{victim}.log").read_text()
        assert log.index("controlled shutdown succeeded") < log.index(f"broker {victim} stopped")
        result = read_and_check(cluster, history, TOPIC, PARTITIONS)
        assert result.ok, result
        # Back: it catches up, rejoins every ISR, and leads nothing until a rebalance.
        cluster.start_broker(victim)
        wait_isr(cluster, TOPIC, PARTITIONS)
        assert led_by(cluster, victim) == []


def test_controlled_shutdown_disabled_leaves_the_moves_to_the_broker_loss(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        controlled_shutdown_enable="false",
        auto_leader_rebalance_enable="false",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        victim = cluster.partition_state(TOPIC, 0)["leader"]
        with ShutdownObserver(zk_connect, TOPIC, PARTITIONS, victim) as observer:
            assert cluster.terminate(victim) == 0
            cluster.wait_for(
                lambda: all(
                    victim not in (state := cluster.partition_state(TOPIC, p))["isr"]
                    and state["leader"] != victim
                    for p in range(PARTITIONS)
                ),
                60,
                f"leaders and ISRs without broker {victim}",
            )
            observer.finish()
        assert len(observer.moved_at) == PARTITIONS
        assert not observer.moved_before_deregistration, observer.moved_at
        assert "controlled shutdown" not in (tmp_path / f"broker-{victim}.log").read_text()


def test_controlled_shutdown_request_errors(zk_connect: str, tmp_path: Path) -> None:
    """Only the controller serves it (NOT_CONTROLLER, at every version; ElectLeaders too,
    per partition); an unregistered broker is BROKER_NOT_AVAILABLE, an old incarnation
    STALE_BROKER_EPOCH; nothing moves."""
    from kazoo.client import KazooClient

    from logbus.client.connection import Connection
    from logbus.client.requests.leader_elections import controlled_shutdown
    from logbus.protocol import ApiKey, ErrorCode

    with ProcessCluster(zk_connect, 3, tmp_path, auto_leader_rebalance_enable="false") as cluster:
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
        controller = cluster.controller()
        assert controller is not None
        other = (controller + 1) % 3
        hosts, _, chroot = zk_connect.partition("/")
        zk = KazooClient(hosts=hosts, timeout=10)
        zk.start(10)
        try:
            epoch = zk.exists(f"/{chroot}/brokers/ids/{other}").czxid
        finally:
            zk.stop()
            zk.close()
        before = [cluster.partition_state(TOPIC, p) for p in range(3)]

        async def ask() -> None:
            conns = {}
            for broker in (controller, other):
                host, port = cluster.bootstrap_of(broker).split(":")
                conns[broker] = await Connection.connect(host, int(port))
            try:
                for version in range(4):
                    body = {"broker_id": other, "broker_epoch": epoch}
                    answer = await conns[other].request(ApiKey.CONTROLLED_SHUTDOWN, body, version)
                    assert answer["error_code"] == ErrorCode.NOT_CONTROLLER, version
                for version in range(3):  # ElectLeaders: per partition, as Kafka's
                    body = {
                        "election_type": 0,
                        "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
                        "timeout_ms": 1000,
                    }
                    answer = await conns[other].request(ApiKey.ELECT_LEADERS, body, version)
                    [result] = answer["replica_election_results"]
                    assert result["partition_result"][0]["error_code"] == (ErrorCode.NOT_CONTROLLER)
                at = conns[controller]
                assert (await controlled_shutdown(at, 7, -1)).error == (
                    ErrorCode.BROKER_NOT_AVAILABLE
                )
                stale = await controlled_shutdown(at, other, epoch - 1)
                assert (stale.error, stale.remaining) == (ErrorCode.STALE_BROKER_EPOCH, [])
            finally:
                for conn in conns.values():
                    await conn.close()

        asyncio.run(asyncio.wait_for(ask(), 60))
        after = [cluster.partition_state(TOPIC, p) for p in range(3)]
        assert after == before


def test_a_leadership_that_cannot_move_is_retried_then_the_broker_stops_anyway(
    zk_connect: str, tmp_path: Path
) -> None:
    """The followers paused and out of the ISR: nobody can take over, the controller
    names the partition each time, and after controlled.shutdown.max.retries attempts
    the broker stops as before."""
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        replica_lag_time_max_ms="2000",
        controlled_shutdown_max_retries="2",
        controlled_shutdown_retry_backoff_ms="300",
        auto_leader_rebalance_enable="false",
    ) as cluster:
        controller = cluster.controller()
        assert controller is not None
        others = [b for b in range(3) if b != controller]
        from logbus.aio import Admin, NewTopic

        async def led_by_the_controller() -> None:
            async with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
                await admin.create_topics(
                    [NewTopic(TOPIC, replica_assignment={0: [controller, *others]})]
                )

        asyncio.run(asyncio.wait_for(led_by_the_controller(), 60))
        cluster.wait_for(
            lambda: (
                cluster.partition_state(TOPIC, 0)["leader"] == controller
                and sorted(cluster.partition_state(TOPIC, 0)["isr"]) == [0, 1, 2]
            ),
            60,
            "the controller leading a whole ISR",
        )
        for broker in others:
            cluster.pause(broker)
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["isr"] == [controller],
            60,
            "an ISR of the leader alone",
        )
        assert cluster.terminate(controller) == 0
        log = (tmp_path / f"broker-{controller}.log").read_text()
        assert f"attempt 1 of 2: 1 partitions still led here ({TOPIC}-0)" in log
        assert f"attempt 2 of 2: 1 partitions still led here ({TOPIC}-0)" in log
        assert "controlled shutdown failed; shutting down anyway" in log
        for broker in others:
            cluster.resume(broker)


def test_no_controlled_shutdown_while_zookeeper_is_unreachable(
    zookeeper_factory: Callable[[], Any], tmp_path: Path
) -> None:
    """The controller cannot write a leadership without ZooKeeper: a broker stopped while
    its ZooKeeper connection is down does not wait for it, it stops at once."""
    import signal

    from confluent_kafka.admin import NewTopic as ConfluentTopic
    from zk_cluster import ZkCluster, wait_for

    from logbus.controller.zookeeper_store import ZooKeeperStore

    server = zookeeper_factory()
    connect = f"{server.connect}/stopping"
    cluster = ZkCluster(connect, tmp_path, ZooKeeperStore(connect, 30_000, 10_000))
    try:
        for broker_id in (1, 2):
            cluster.add(broker_id)
        cluster.wait_registered({1, 2})
        controller_id, _ = cluster.wait_controller()
        admin = cluster.admin()
        admin.create_topics([ConfluentTopic("held", 2, 2)])["held"].result(30)
        wait_for(lambda: len(cluster.state("held", 0)["isr"]) == 2, 30, "the full ISR")
        cluster.store.close()
        server.stop()
        victim = cluster.brokers[controller_id]
        victim.signal(signal.SIGTERM)
        assert victim.exit_code(60) == 0
        output = victim.output()
        assert "ZooKeeper is unreachable, so the controller cannot move leaderships" in output
        assert "controlled shutdown attempt" not in output
    finally:
        cluster.close()
