"""A quorum of in-process Raft voters (logbus.raft) over real loopback sockets, for the
Raft tests: every voter reaches every other through its own `TcpProxy` (one per directed
link), so a test can cut a voter off (`isolate`) and heal it, kill a voter (no
EndQuorumEpoch, as a crash) and start it again on the same directory. Given
`controller=ControllerSettings(...)`, each voter also runs the `QuorumController` on its
log and serves the controller's APIs (`controllers[id]`; `port(id)` reaches a voter
directly, as a broker would). `start_observer(id)` runs a node outside the voters (as a
broker is) that follows the quorum and replays the log with a `MetadataLoader`.

    async with RaftQuorum(tmp_path, size=3) as quorum:
        leader = await quorum.wait_for_leader()
        offset = leader.append([b"x"]); await leader.wait_committed(offset, 10)

Runs on the test's event loop (the proxies have their own threads).
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from tcp_proxy import TcpProxy

from logbus.raft.quorum_config import QuorumConfig, VoterAddress
from logbus.raft.raft_client import RaftClient
from logbus.raft.raft_server import RaftServer
from logbus.server.kraft.metadata_loader import MetadataLoader
from logbus.server.kraft.quorum_controller import ControllerSettings, QuorumController

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
WAIT = 30.0


class RaftQuorum:
    """`size` voters with ids 1..size; `nodes[id]` is the running client (absent when
    killed)."""

    def __init__(
        self, root: Path, size: int = 3, *, election_timeout_ms: int = 300,
        fetch_timeout_ms: int = 1000, controller: ControllerSettings | None = None,
    ) -> None:  # fmt: skip
        self.root = root
        self.controller_settings = controller
        self.controllers: dict[int, QuorumController] = {}
        self.ids = list(range(1, size + 1))
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.sockets: dict[int, socket.socket] = {}
        self.ports: dict[int, int] = {}
        for node in self.ids:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
            self.ports[node] = sock.getsockname()[1]
            self.sockets[node] = sock
        # proxies[(a, b)]: what a uses to reach b
        self.proxies = {
            (a, b): TcpProxy(self.ports[b]) for a in self.ids for b in self.ids if a != b
        }
        self.nodes: dict[int, RaftClient] = {}
        self.servers: dict[int, RaftServer] = {}
        self.observers: dict[int, MetadataLoader] = {}

    def config(self, node: int) -> QuorumConfig:
        voters = {
            other: VoterAddress(
                other, "127.0.0.1",
                self.ports[node] if other == node else self.proxies[(node, other)].port,
            )
            for other in self.ids
        }  # fmt: skip
        return QuorumConfig(
            node_id=node,
            voters=voters,
            metadata_log_dir=self.root / f"node-{node}",
            cluster_id=CLUSTER_ID,
            election_timeout_ms=self.election_timeout_ms,
            election_backoff_max_ms=self.election_timeout_ms,
            fetch_timeout_ms=self.fetch_timeout_ms,
            request_timeout_ms=self.fetch_timeout_ms,
            fetch_max_wait_ms=200,
        )

    async def start(self, node: int) -> RaftClient:
        client = RaftClient(self.config(node))
        await client.start()
        apis = None
        if self.controller_settings is not None:
            controller = QuorumController(client, self.controller_settings)
            await controller.start()
            self.controllers[node] = controller
            apis = controller.apis()
        sock = self.sockets.pop(node, None)
        server = RaftServer(client, "127.0.0.1", self.ports[node], sock=sock, apis=apis)
        await server.start()
        self.nodes[node], self.servers[node] = client, server
        return client

    async def start_observer(self, node: int) -> MetadataLoader:
        """A node outside the voters, each link to a voter through its own proxy."""
        for voter in self.ids:
            if (node, voter) not in self.proxies:
                self.proxies[(node, voter)] = TcpProxy(self.ports[voter])
        voters = {
            v: VoterAddress(v, "127.0.0.1", self.proxies[(node, v)].port) for v in self.ids
        }
        config = replace(self.config(self.ids[0]), node_id=node, voters=voters,
                         metadata_log_dir=self.root / f"observer-{node}")  # fmt: skip
        client = RaftClient(config)
        await client.start()
        loader = MetadataLoader(client)
        await loader.start()
        self.observers[node] = loader
        return loader

    async def stop_observer(self, node: int) -> None:
        loader = self.observers.pop(node)
        await loader.close()
        await loader.client.close()

    def port(self, node: int) -> int:
        return self.ports[node]

    async def kill(self, node: int) -> None:
        """Stop a voter as a crash would: no EndQuorumEpoch."""
        controller = self.controllers.pop(node, None)
        if controller is not None:
            await controller.close()
        await self.servers.pop(node).close()
        await self.nodes.pop(node).close(graceful=False)

    def isolate(self, node: int) -> None:
        for (a, b), proxy in self.proxies.items():
            if node in (a, b):
                proxy.cut()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            if proxy.is_cut:
                proxy.heal()

    async def wait_for(self, predicate: object, what: str, timeout: float = WAIT) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while not predicate():  # type: ignore[operator]
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not met within {timeout}s: {self.describe()}")
            await asyncio.sleep(0.02)

    def describe(self) -> str:
        return ", ".join(
            f"{n}:{c.state.role.value}@{c.epoch} leader={c.leader_id} "
            f"end={c.metadata_log.end_offset} hw={c.high_watermark}"
            for n, c in sorted(self.nodes.items())
        )

    def leaders(self, among: list[int] | None = None) -> list[RaftClient]:
        return [c for n, c in self.nodes.items() if c.is_leader and (among is None or n in among)]

    async def wait_for_leader(
        self, among: list[int] | None = None, *, above_epoch: int = -1
    ) -> RaftClient:
        """The one leader among `among` (default: the running voters) that the others
        running there follow, in an epoch above `above_epoch`."""
        group = among or list(self.nodes)

        def settled() -> bool:
            leaders = self.leaders(group)
            if len(leaders) != 1 or leaders[0].epoch <= above_epoch:
                return False
            leader = leaders[0]
            return all(
                self.nodes[n].leader_id == leader.node_id and self.nodes[n].epoch == leader.epoch
                for n in group
            )

        await self.wait_for(settled, f"one leader among {group}")
        return self.leaders(group)[0]

    async def commit(self, leader: RaftClient, values: list[bytes]) -> int:
        offset = leader.append(values)
        await leader.wait_committed(offset, WAIT)
        return offset

    async def wait_caught_up(self, values: list[bytes], nodes: list[int] | None = None) -> None:
        """Every running voter (or `nodes`) has exactly `values` committed."""
        group = nodes or list(self.nodes)
        await self.wait_for(
            lambda: all(self.nodes[n].committed_values() == values for n in group),
            f"voters {group} caught up to {len(values)} values",
        )

    async def __aenter__(self) -> RaftQuorum:
        for node in self.ids:
            await self.start(node)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        for node in list(self.observers):
            await self.stop_observer(node)
        for node in list(self.nodes):
            await self.kill(node)
        for proxy in self.proxies.values():
            proxy.close()
        for sock in self.sockets.values():
            sock.close()
