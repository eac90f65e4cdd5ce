"""Connections to a whole cluster: reached through bootstrap servers, then broker by broker
as metadata names them (partition leaders, the controller)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from logbus.client.connection import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    Connection,
    format_address,
    parse_bootstrap,
)
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.lifecycle import AsyncCloseable
from logbus.client.metadata import ClusterMetadata
from logbus.client.requests.metadata import metadata
from logbus.client.security import PLAINTEXT, ClientSecurity, security_from_config
from logbus.protocol import ErrorCode

DEFAULT_RECONNECT_BACKOFF = 0.05
DEFAULT_RECONNECT_BACKOFF_MAX = 1.0


class Cluster(AsyncCloseable):
    """A bootstrap connection, a connection per broker met since, and the metadata last
    fetched.

    Made by `Cluster.connect("host:port[,host:port]")`; `close()` (or leaving
    `async with`) closes every connection it opened. Shared safely between tasks of one
    event loop.

    Resilience, as Kafka's NetworkClient: a broker that could not be reached is not tried
    again before its reconnect backoff has passed (`reconnect_backoff`, doubling up to
    `reconnect_backoff_max`, with 20% jitter); a closed connection is reopened on next
    use; metadata comes from the bootstrap servers or, when none answers, from any other
    broker the last metadata named.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str | None = "logbus",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        reconnect_backoff: float = DEFAULT_RECONNECT_BACKOFF,
        reconnect_backoff_max: float = DEFAULT_RECONNECT_BACKOFF_MAX,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap_addresses = parse_bootstrap(bootstrap_servers)
        self.security = security  # TLS and SASL of every connection
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.reconnect_backoff = reconnect_backoff
        self.reconnect_backoff_max = max(reconnect_backoff, reconnect_backoff_max)
        self.metadata: ClusterMetadata | None = None
        self.metadata_at = 0.0  # time.monotonic() of the last metadata fetched
        # (host, port) -> (no new attempt before, the backoff that was applied)
        self._backoff: dict[tuple[str, int], tuple[float, float]] = {}
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
        reconnect_backoff: float = DEFAULT_RECONNECT_BACKOFF,
        reconnect_backoff_max: float = DEFAULT_RECONNECT_BACKOFF_MAX,
        security: ClientSecurity = PLAINTEXT,
    ) -> Cluster:
        """Connect to the first bootstrap server that answers (ValueError for a bad list);
        if none does, close what was opened and raise."""
        cluster = cls(
            bootstrap_servers,
            client_id=client_id,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            reconnect_backoff=reconnect_backoff,
            reconnect_backoff_max=reconnect_backoff_max,
            security=security,
        )
        try:
            await cluster.bootstrap()
        except BaseException:
            await cluster.close()
            raise
        return cluster

    @classmethod
    async def from_config(cls, config: Mapping[str, Any]) -> Cluster:
        """`connect()` with a client's parsed settings: bootstrap.servers, client.id,
        socket.connection.setup.timeout.ms, request.timeout.ms and
        reconnect.backoff(.max).ms (every client's schema has them), and the security
        settings (security.protocol, ssl.*, sasl.*)."""
        return await cls.connect(
            ",".join(config["bootstrap.servers"]),
            client_id=config["client.id"],
            connect_timeout=config["socket.connection.setup.timeout.ms"] / 1000,
            request_timeout=config["request.timeout.ms"] / 1000,
            reconnect_backoff=config["reconnect.backoff.ms"] / 1000,
            reconnect_backoff_max=config["reconnect.backoff.max.ms"] / 1000,
            security=security_from_config(config),
        )

    async def _open(self, host: str, port: int) -> Connection:
        address = (host, port)
        backoff = self._backoff.get(address)
        if backoff is not None and backoff[0] > time.monotonic():
            raise KafkaConnectionError(
                f"cannot connect to {format_address(host, port)}: waiting "
                f"{backoff[0] - time.monotonic():.3f}s before reconnecting"
            )
        try:
            conn = await Connection.connect(
                host,
                port,
                client_id=self.client_id,
                connect_timeout=self.connect_timeout,
                request_timeout=self.request_timeout,
                security=self.security,
            )
        except KafkaConnectionError:
            delay = (
                self.reconnect_backoff
                if backoff is None
                else min(backoff[1] * 2, self.reconnect_backoff_max)
            )
            jittered = delay * random.uniform(0.8, 1.2)
            self._backoff[address] = (time.monotonic() + jittered, delay)
            raise
        self._backoff.pop(address, None)
        return conn

    def backoff_remaining(self, node_id: int) -> float:
        """Seconds before broker `node_id` may be dialled again (0 when it may be now)."""
        if self.metadata is None:
            return 0.0
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            return 0.0
        conn = self._nodes.get(node_id)
        if conn is not None and not conn.closed:
            return 0.0
        backoff = self._backoff.get((broker.host, broker.port))
        if backoff is None:
            return 0.0
        return max(0.0, backoff[0] - time.monotonic())

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
        """Fetch metadata (for `topics`, or all topics) and remember it. Asks a bootstrap
        server, or, when none can be reached, each other broker the last metadata named."""
        try:
            conn = await self.bootstrap()
            return await self._refresh_from(conn, topics, allow_auto_topic_creation)
        except KafkaConnectionError as exc:
            if self.metadata is None:
                raise
            error = exc
        bootstrap = set(self.bootstrap_addresses)
        for node_id, broker in self.metadata.brokers.items():
            if (broker.host, broker.port) in bootstrap:
                continue
            try:
                conn = await self.node(node_id)
                return await self._refresh_from(conn, topics, allow_auto_topic_creation)
            except KafkaConnectionError as exc:
                error = exc
        raise error

    async def _refresh_from(
        self, conn: Connection, topics: Sequence[str] | None, allow_auto_topic_creation: bool
    ) -> ClusterMetadata:
        self.metadata = await metadata(
            conn, topics, allow_auto_topic_creation=allow_auto_topic_creation
        )
        self.metadata_at = time.monotonic()
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
