"""A KRaft cluster of `logbus server start` processes, formatted with `logbus storage
format`: brokers serving clients from the metadata log, beside a quorum of controllers
(each node combined, `process.roles=broker,controller`, or controller-only nodes with
broker-only ones). No ZooKeeper.

    with KRaftProcessCluster(tmp_path, brokers=[1, 2, 3], controllers=[1, 2, 3]) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3)
        cluster.kill(cluster.leader_of("orders", 0))

`KRaftProcessCluster` is a `ProcessCluster` (cluster_processes.py): the same faults,
metadata look-ups and checker inputs, with the partition state read from the brokers'
metadata (the image) instead of ZooKeeper. `nodes` are the broker-role nodes; the
controller-only ones are in `controllers_only`. A helper module, not a conftest.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cluster_processes import BrokerNode, ProcessCluster

from logbus.cli.main import main as logbus_main
from logbus.cli.metadata_quorum import describe_quorum
from ports import free_port

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
KRAFT_SETTINGS = {
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1500",
    "metadata.max.idle.interval.ms": "100",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


class KRaftProcessCluster(ProcessCluster):
    """Broker-role nodes `brokers` and voters `controllers` (node ids; a node in both is
    combined), formatted for one cluster and started; waits until every broker's
    metadata lists every broker (each registered and unfenced). `close()` (or leaving the
    `with` block) kills every process."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        brokers: list[int],
        controllers: list[int],
        start_timeout: float = 120.0,
        **overrides: str,
    ) -> None:
        self.zk_connect = ""
        self.tmp_path = tmp_path
        self.start_timeout = start_timeout
        ids = sorted(set(brokers) | set(controllers))
        client_ports = {n: free_port() for n in brokers}
        controller_ports = {n: free_port() for n in controllers}
        voters = ",".join(f"{n}@127.0.0.1:{controller_ports[n]}" for n in controllers)
        common = {
            **KRAFT_SETTINGS,
            "controller.quorum.voters": voters,
            "offsets.topic.replication.factor": str(min(3, len(brokers))),
            **{k.replace("_", "."): v for k, v in overrides.items()},
        }
        self.controller_ports = controller_ports
        self.nodes: dict[int, BrokerNode] = {}
        self.controllers_only: dict[int, BrokerNode] = {}
        for node in ids:
            roles = [
                role for role, ids_ in (("broker", brokers), ("controller", controllers))
                if node in ids_
            ]  # fmt: skip
            listeners = [f"PLAINTEXT://127.0.0.1:{client_ports[node]}"] if node in brokers else []
            if node in controllers:
                listeners.append(f"CONTROLLER://127.0.0.1:{controller_ports[node]}")
            data_dir = tmp_path / f"broker-{node}"
            props = {
                "process.roles": ",".join(roles),
                "node.id": str(node),
                "listeners": ",".join(listeners),
                "log.dirs": str(data_dir),
                **common,
            }
            properties = tmp_path / f"node-{node}.properties"
            properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            assert logbus_main(["storage", "format", "-t", CLUSTER_ID, "-c", str(properties)]) == 0
            port = client_ports[node] if node in brokers else controller_ports[node]
            process = BrokerNode(node, port, data_dir, tmp_path / f"broker-{node}.log", props)
            (self.nodes if node in brokers else self.controllers_only)[node] = process
        try:
            for process in self.controllers_only.values():
                process.spawn()
            self.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        super().close()
        for process in self.controllers_only.values():
            if process.proc is not None:
                if process.running:
                    process.proc.kill()
                process.proc.wait(30)

    def start_broker(self, broker_id: int) -> None:
        """Start a broker that was killed or terminated (the controller takes its new
        registration once its old session has ended)."""
        node = self.nodes[broker_id]
        assert not node.running, f"broker {broker_id} is running"
        node.spawn()
        node.wait_listening(self.start_timeout)

    def registered(self, broker_id: int) -> bool:
        """Whether a live broker's metadata lists `broker_id` (registered, unfenced)."""
        return broker_id in self.broker_ids()

    def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        """The partition's leader and ISR as its leader's metadata (its image) has them."""
        leader = self.leader_of(topic, partition)
        via = leader if leader in self.live_ids() else None
        part = self.metadata(topic, via).partitions[partition]
        return {"leader": int(part.leader), "isr": list(part.isr)}

    def quorum(self) -> dict[str, Any]:
        """The active controller's DescribeQuorum answer (`leader_id`, `leader_epoch`,
        `high_watermark`, ...), asking the running controllers."""
        running = [
            n for n, port in self.controller_ports.items()
            if (self.nodes.get(n) or self.controllers_only[n]).running
        ]  # fmt: skip
        bootstrap = ",".join(f"127.0.0.1:{self.controller_ports[n]}" for n in running)
        return asyncio.run(describe_quorum(bootstrap))[1]

    def active_controller(self) -> int:
        """The node id of the active controller (the quorum's leader)."""
        return int(self.quorum()["leader_id"])

    def controller_epoch(self) -> int:
        """The quorum's epoch (KRaft's counterpart of the ZooKeeper controller epoch)."""
        return int(self.quorum()["leader_epoch"])
