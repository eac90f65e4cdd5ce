"""Several real brokers in this process, replicating over loopback, for the replication
tests (before a ZooKeeper cluster is involved).

Every broker runs on one event loop (a `LoopThread`), each with its own data directory,
listener and stand-alone store. Broker 0's controller is the cluster's: the other brokers
are registered in its store (`/brokers/ids/<id>`, with their real addresses) and in its
`LocalChannel`, so its LeaderAndIsr, UpdateMetadata and AlterPartition handling reach
every broker; the others' metadata caches name broker 0 as the controller, so their ISR
changes travel to it over the wire as AlterPartition requests.

A stopped broker is not started again: its own stand-alone controller would find the
topic unknown to its store and delete the log as stray. A stalled follower is made by
pausing its replica fetchers instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from logbus.client.connection import Connection
from logbus.client.loop_thread import LoopThread
from logbus.controller.cluster_metadata import PartitionState, TopicMetadata
from logbus.controller.controller import Controller, NewTopic
from logbus.records.batch import split_batches
from logbus.records.builder import NewRecord, build_batch
from logbus.server.broker import Broker
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.controller_link import ControllerLink
from logbus.server.replica.partition import Partition

T = TypeVar("T")


class InProcessCluster:
    def __init__(self, root: Path, size: int = 3, **overrides: str) -> None:
        self.root = root
        self.size = size
        self.overrides = {k.replace("_", "."): v for k, v in overrides.items()}
        self.loop = LoopThread()
        self.brokers: dict[int, Broker] = {}
        self.ports: dict[int, int] = {}
        self.connections: list[Connection] = []

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> InProcessCluster:
        for broker_id in range(self.size):
            self._start_broker(broker_id)
        self.run(self._announce())
        return self

    def _start_broker(self, broker_id: int) -> Broker:
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.ports.get(broker_id, 0)}",
            "log.dirs": str(self.root / f"broker-{broker_id}"),
            "auto.create.topics.enable": "false",
            **self.overrides,
        }
        broker = Broker(BrokerConfig.from_properties(props))
        self.run(broker.start())
        self.brokers[broker_id] = broker
        self.ports[broker_id] = broker.port
        if broker_id != 0:
            self.controller.channel.register(broker_id, self.link(broker_id))  # type: ignore[attr-defined]
            self._register(broker_id)
        broker.metadata_cache.controller_id = 0
        if broker_id != 0:
            # one cluster for clients (each broker's own store made its own id)
            broker.metadata_cache.cluster_id = self.controller.cluster_id
        return broker

    def _register(self, broker_id: int) -> None:
        port = self.ports[broker_id]
        self.controller.store.create_json(
            f"/brokers/ids/{broker_id}",
            {
                "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"],
                "rack": None,
                "jmx_port": -1,
                "port": port,
                "host": "127.0.0.1",
                "version": 5,
                "timestamp": str(int(time.time() * 1000)),
            },
            ephemeral=True,
        )

    async def _announce(self) -> None:
        controller = self.controller
        controller.channel.send_update_metadata(
            controller.live_brokers(), list(controller.topics.values()), []
        )

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker cleanly; the controller sees it leave (`/brokers/ids/<id>`)."""
        broker = self.brokers.pop(broker_id)
        self.run(broker.stop())
        if broker_id != 0:
            self.controller.store.delete(f"/brokers/ids/{broker_id}")

    def pause_fetching(self, broker_id: int) -> None:
        """Stop a follower's replica fetchers (a broker that stalls: the leader stops
        hearing from it). A LeaderAndIsr that moves the leader starts them again."""

        def pause() -> None:
            manager = self.brokers[broker_id].replica_manager
            assert manager is not None and manager.fetchers is not None
            for tp in list(manager.partitions):
                manager.fetchers.remove_partitions([tp])

        self.call(pause)

    def resume_fetching(self, broker_id: int) -> None:
        def resume() -> None:
            manager = self.brokers[broker_id].replica_manager
            assert manager is not None and manager.fetchers is not None
            for part in manager.partitions.values():
                if not part.is_leader and part.leader_id >= 0:
                    manager.fetchers.add_partition(part)

        self.call(resume)

    def close(self) -> None:
        async def close_all() -> None:
            for conn in self.connections:
                await conn.close()
            for broker in list(self.brokers.values()):
                await broker.stop()

        try:
            self.run(close_all())
        finally:
            self.brokers.clear()
            self.loop.close()

    # --- helpers --------------------------------------------------------------------------

    @property
    def controller(self) -> Controller:
        controller = self.brokers[0].controller if 0 in self.brokers else None
        assert controller is not None
        return controller

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return self.loop.run(coro, timeout)  # type: ignore[no-any-return]

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the brokers' event loop (their state is owned by it)."""

        async def call() -> T:
            return fn()

        return self.run(call())

    def connect(self, broker_id: int) -> Connection:
        conn = self.run(Connection.connect("127.0.0.1", self.ports[broker_id]))
        self.connections.append(conn)
        return conn

    def create_topic(
        self, name: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None
    ) -> TopicMetadata:
        """Create a topic through the controller: the first replica of each partition
        leads, every replica is in the ISR."""

        def create() -> TopicMetadata:
            result = self.controller.create_topic(
                NewTopic(name, -1, -1, assignment, configs or {})
            )
            assert result.error == 0, result
            return self.controller.topics[name]

        return self.call(create)

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.call(lambda: self.controller.topics[topic].partitions[partition])

    def elect(
        self,
        topic: str,
        partition: int,
        leader: int,
        isr: tuple[int, ...],
        tell: set[int] | None = None,
    ) -> None:
        """Move leadership as the controller does: bump the leader epoch, write the state
        with its compare-and-set, send LeaderAndIsr to the live replicas (those in
        `tell` only, when given: the others have not heard of it yet)."""

        def elect() -> None:
            controller = self.controller
            meta = controller.topics[topic]
            old = meta.partitions[partition]
            new = PartitionState(
                leader, old.leader_epoch + 1, isr, old.replicas, controller.epoch, old.version
            )
            meta.partitions[partition] = controller._write_state(
                topic, partition, new, create=False
            )
            for replica in old.replicas:
                if replica in self.brokers and (tell is None or replica in tell):
                    self.link(replica).apply_leader_and_isr(meta, [partition])
            controller.channel.send_update_metadata(controller.live_brokers(), [meta], [])

        self.call(elect)

    def link(self, broker_id: int) -> ControllerLink:
        """Where a broker applies the controller's requests (its `ControllerLink`)."""
        return self.brokers[broker_id].services.controller_link

    def tell(self, broker_id: int, topic: str, partition: int) -> None:
        """Deliver the current LeaderAndIsr of a partition to one broker."""
        self.call(
            lambda: self.link(broker_id).apply_leader_and_isr(
                self.controller.topics[topic], [partition]
            )
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def partition(self, broker_id: int, topic: str, index: int) -> Partition:
        manager = self.brokers[broker_id].replica_manager
        assert manager is not None
        part = manager.partition(topic, index)
        assert part is not None
        return part

    def log_bytes(self, broker_id: int, topic: str, index: int) -> bytes:
        """Every stored batch of the partition, as bytes."""

        def read() -> bytes:
            log = self.partition(broker_id, topic, index).log
            out = b""
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                info = log.read(offset, 1 << 20, min_one_message=True)
                if info.records is None:
                    break
                data = info.records.read()
                out += data
                last = split_batches(data)[-1][1]
                offset = last.next_offset
            return out

        return self.call(read)

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.call(condition):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def controller_isr(self, topic: str, partition: int) -> tuple[int, ...]:
        """The ISR in the controller's store (what AlterPartition wrote)."""
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        value = json.loads(self.call(lambda: self.controller.store.get(path)[0]))
        return tuple(value["isr"])


def batch(values: list[bytes], timestamp: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return build_batch([NewRecord(None, v, timestamp=ts) for v in values])
