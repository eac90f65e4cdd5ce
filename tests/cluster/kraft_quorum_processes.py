"""A KRaft quorum of controller-only `logbus server start` processes
(`process.roles=controller`), formatted with `logbus storage format`, for the quorum's
process-level tests. Each controller reaches each other one through a `TcpProxy` of its
own (one per directed link), so `isolate` cuts a controller off from the quorum while a
test still reaches its listener directly; `kill` is a SIGKILL.

    with ControllerQuorum(tmp_path, 3) as quorum:
        leader = quorum.wait_for_leader()
        quorum.kill(leader["leader_id"])

A helper module, not a conftest. `BrokerNode` (cluster_processes) runs each process.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from cluster_processes import BrokerNode, free_port
from tcp_proxy import TcpProxy

from logbus.cli.common import CommandError
from logbus.cli.main import main as logbus_main
from logbus.cli.metadata_quorum import describe_quorum
from logbus.records.batch import split_batches

CLUSTER_ID = "q1Yl9sGSSLCuOUJ6dqbGdA"
WAIT = 60.0


class ControllerQuorum:
    """`size` controllers with node ids 1..size, formatted and started."""

    def __init__(self, root: Path, size: int = 3, **settings: str) -> None:
        self.root = root
        self.ids = list(range(1, size + 1))
        ports = {node: free_port() for node in self.ids}
        self.proxies = {(a, b): TcpProxy(ports[b]) for a in self.ids for b in self.ids if a != b}
        self.nodes: dict[int, BrokerNode] = {}
        for node in self.ids:
            voters = ",".join(
                f"{other}@127.0.0.1:"
                f"{ports[node] if other == node else self.proxies[(node, other)].port}"
                for other in self.ids
            )
            data = root / f"controller-{node}"
            properties = {
                "process.roles": "controller",
                "node.id": str(node),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": f"CONTROLLER://127.0.0.1:{ports[node]}",
                "log.dirs": str(data),
                "controller.quorum.election.timeout.ms": "500",
                "controller.quorum.fetch.timeout.ms": "1500",
                "metadata.max.idle.interval.ms": "100",
                **settings,
            }
            config = root / f"controller-{node}.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
            assert logbus_main(["storage", "format", "-t", CLUSTER_ID, "-c", str(config)]) == 0
            self.nodes[node] = BrokerNode(
                node, ports[node], data, root / f"controller-{node}.log", properties
            )

    def start(self) -> None:
        for node in self.nodes.values():
            node.spawn()
        for node in self.nodes.values():
            node.wait_listening(WAIT)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes.values() if n.running)

    def describe(self, *nodes: int) -> dict[str, Any] | None:
        """The leader's DescribeQuorum answer, asking `nodes` (default: every running
        controller); None when none of them is the leader."""
        addresses = ",".join(self.nodes[n].address for n in nodes) if nodes else self.bootstrap
        try:
            return asyncio.run(describe_quorum(addresses))[1]
        except CommandError:
            return None

    def wait_for(self, predicate: Any, what: str, timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- controller {n}:\n{node.log_tail(8)}" for n, node in self.nodes.items()
                )
                raise AssertionError(f"{what} not met within {timeout}s\n{tails}")
            time.sleep(0.1)
        return value

    def wait_for_leader(
        self, *nodes: int, above_epoch: int = -1, high_watermark_above: int = 0
    ) -> dict[str, Any]:
        def settled() -> dict[str, Any] | None:
            part = self.describe(*nodes)
            if part is None or part["leader_epoch"] <= above_epoch:
                return None
            return part if part["high_watermark"] > high_watermark_above else None

        found: dict[str, Any] = self.wait_for(settled, "a leader that commits")
        return found

    def kill(self, node: int) -> None:
        self.nodes[node].send(signal.SIGKILL)
        self.nodes[node].wait(30)

    def stop(self, node: int) -> None:
        self.nodes[node].send(signal.SIGTERM)
        self.nodes[node].wait(30)

    def isolate(self, node: int) -> None:
        for (a, b), proxy in self.proxies.items():
            if node in (a, b):
                proxy.cut()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            if proxy.is_cut:
                proxy.heal()

    def batches(self, node: int, below: int) -> list[bytes]:
        """The metadata log's batches below offset `below`, as stored (a torn last batch
        of a killed process left out)."""
        found = []
        directory = self.nodes[node].data_dir / "__cluster_metadata-0"
        for path in sorted(directory.glob("*.log")):
            data = path.read_bytes()
            for position, header in split_batches(data):
                if header.last_offset < below:
                    found.append(data[position : position + header.size])
        return found

    def __enter__(self) -> ControllerQuorum:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for node in self.nodes.values():
            if node.running:
                node.send(signal.SIGKILL)
                node.wait(30)
        for proxy in self.proxies.values():
            proxy.close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.close()
