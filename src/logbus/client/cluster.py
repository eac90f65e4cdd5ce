"""Connections to a whole cluster: reached through bootstrap servers, then broker by broker
as metadata names them (partition leaders, the controller)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType

from logbus.client import admin_ops
from logbus.client.connection import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    Connection,
    parse_bootstrap,
)
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.metadata import ClusterMetadata
from logbus.protocol import ErrorCode


class Cluster:
    """A bootstrap connection, a connection per broker met since, and the metadata last
    fetched.

    Made by `Cluster.connect("host:port[,host:port]")`; `close()` (or leaving
    `async with`) closes every connection it opened. Shared safely between tasks of one
    event loop.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str | None = "logbus",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self.bootstrap_addresses = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.metadata: ClusterMetadata | None = None
        self._bootstrap: Connection | None = None
        self._nodes: dict[int, Connection] = {}
        self._lock = asyncio.Lock()

    @classmethod
    async def connect(
        cls,
        bootstrap_servers: str,
        *,
        client_id: str | None = "logbus",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> Cluster:
        """Connect to the first bootstrap server that answers (ValueError for a bad list)."""
        cluster = cls(
            bootstrap_servers,
            client_id=client_id,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
        )
        await cluster.bootstrap()
        return cluster

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _open(self, host: str, port: int) -> Connection:
        return await Connection.connect(
            host,
            port,
            client_id=self.client_id,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
        )

    async def bootstrap(self) -> Connection:
        """A live connection to one of the bootstrap servers, tried in order."""
        async with self._lock:
            if self._bootstrap is not None and not self._bootstrap.closed:
                return self._bootstrap
            errors: list[KafkaConnectionError] = []
            for host, port in self.bootstrap_addresses:
                try:
                    self._bootstrap = await self._open(host, port)
                except KafkaConnectionError as exc:
                    errors.append(exc)
                    continue
                return self._bootstrap
            if len(errors) == 1:
                raise errors[0]
            raise KafkaConnectionError(
                "cannot connect to any bootstrap server: " + "; ".join(map(str, errors))
            )

    async def refresh(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Fetch metadata (for `topics`, or all topics) and remember it."""
        conn = await self.bootstrap()
        self.metadata = await admin_ops.metadata(
            conn, topics, allow_auto_topic_creation=allow_auto_topic_creation
        )
        return self.metadata

    async def node(self, node_id: int) -> Connection:
        """A connection to broker `node_id` as the last metadata described it."""
        if self.metadata is None:
            await self.refresh([])
        assert self.metadata is not None
        async with self._lock:
            conn = self._nodes.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise KafkaError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata"
                )
            boot = self._bootstrap
            if (
                boot is not None
                and not boot.closed
                and (boot.host, boot.port) == (broker.host, broker.port)
            ):
                conn = boot
            else:
                conn = await self._open(broker.host, broker.port)
            self._nodes[node_id] = conn
            return conn

    async def leader(self, topic: str, partition: int) -> Connection:
        """A connection to the leader of a partition (from the last metadata of the topic)."""
        if self.metadata is None or topic not in self.metadata.topics:
            await self.refresh([topic])
        assert self.metadata is not None
        return await self.node(self.metadata.leader(topic, partition))

    async def controller(self) -> Connection:
        """A connection to the controller, where topic changes must be sent."""
        md = self.metadata if self.metadata is not None else await self.refresh([])
        if md.controller_id < 0:
            return await self.bootstrap()
        return await self.node(md.controller_id)

    async def close(self) -> None:
        connections = {id(c): c for c in self._nodes.values()}
        if self._bootstrap is not None:
            connections[id(self._bootstrap)] = self._bootstrap
        self._nodes.clear()
        self._bootstrap = None
        for conn in connections.values():
            await conn.close()
