"""The listener: accepts connections on one host and port and serves each one.

It accepts in its own reader callback rather than with asyncio's `start_server`, so every
accepted socket is ours from the moment `accept()` returns: on Python 3.11 a
connection accepted just before `Server.close()` is leaked half set up, and asyncio's
server never closes the connections it handed out. `stop()` ends them all.

It applies the broker's connection settings: `ConnectionQuotas` (a connection beyond
max.connections or max.connections.per.ip is closed as soon as it is accepted; beyond
max.connection.creation.rate, accepting waits), the broker's `MemoryPool`
(queued.max.request.bytes) and connections.max.idle.ms (a task closes connections
that have had no request under way and received nothing for that long).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl

from logbus.common.network.frame_stream import MemoryPool, accept_frame_stream
from logbus.server.network.connection import QUEUED_REQUEST_BYTES, Connection, Handler
from logbus.server.network.connection_quotas import ConnectionLimits, ConnectionQuotas
from logbus.server.network.sasl_authenticator import SaslAuthenticator, SaslSettings
from logbus.server.security.principal import ANONYMOUS, KafkaPrincipal
from logbus.server.security.ssl_principal import PrincipalMapper

log = logging.getLogger(__name__)

BACKLOG = 1024
# A TLS handshake not finished within this many seconds closes the connection.
SSL_HANDSHAKE_TIMEOUT = 10.0


# How often idle connections are looked for, as a share of connections.max.idle.ms (and
# at most this many seconds apart).
IDLE_CHECKS_PER_TIMEOUT = 10
MAX_IDLE_CHECK_INTERVAL = 10.0


class Listener:
    """Owns the server sockets and the connection tasks; `stop()` closes them all.
    `quotas` and `memory_pool` are the broker's, shared by all its listeners."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        max_request_size: int,
        send_buffer: int = -1,
        receive_buffer: int = -1,
        quotas: ConnectionQuotas | None = None,
        memory_pool: MemoryPool | None = None,
        idle_timeout_ms: int = -1,
        backlog: int = BACKLOG,
        name: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
        principal_mapper: PrincipalMapper | None = None,
        ssl_handshake_timeout: float = SSL_HANDSHAKE_TIMEOUT,
    ) -> None:
        self.name = name
        # TLS (SSL, SASL_SSL): replaced by `reconfigure_ssl`; new connections use the new
        # context, established ones keep theirs (as Kafka's reloaded keystores).
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.principal_mapper = principal_mapper or PrincipalMapper("DEFAULT")
        self.ssl_handshake_timeout = ssl_handshake_timeout
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_size = max_request_size
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.quotas = quotas or ConnectionQuotas(ConnectionLimits(2**31 - 1, 2**31 - 1))
        self.memory_pool = memory_pool
        self.idle_timeout_ms = idle_timeout_ms
        self.backlog = backlog
        self._sockets: list[socket.socket] = []
        self._accepted: dict[socket.socket, str] = {}  # admitted socket -> client address
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections: set[Connection] = set()
        self._accept_paused: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        """Bind every address the host resolves to (all interfaces for an empty host), as
        asyncio's server does; with port 0 the first bind picks the port for the rest."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                try:
                    sock = socket.socket(family, kind, proto)
                except OSError:  # an address family this host lacks (IPv6 turned off)
                    continue
                self._sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], self.port, *address[2:]))
                sock.listen(self.backlog)
                sock.setblocking(False)
                self.port = sock.getsockname()[1]
        except OSError:
            self._close_sockets()
            raise
        if not self._sockets:
            raise OSError(f"no address to listen on for {self.host!r}")
        self._start_accepting()
        if self.idle_timeout_ms >= 0:
            task = asyncio.create_task(self._close_idle_connections())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        log.info("listening on %s:%d", self.host, self.port)

    def _start_accepting(self) -> None:
        self._accept_paused = None
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            loop.add_reader(sock.fileno(), self._accept, sock)

    def _pause_accepting(self, delay: float) -> None:
        """Leave new connections in the backlog for `delay` seconds (the creation rate)."""
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            loop.remove_reader(sock.fileno())
        self._accept_paused = loop.call_later(delay, self._start_accepting)

    def _accept(self, server: socket.socket) -> None:
        """Called by the loop when a server socket is readable: take every waiting
        connection. Synchronous, so no accepted socket can be lost to a cancellation."""
        loop = asyncio.get_running_loop()
        for _ in range(BACKLOG):
            delay = self.quotas.accept_delay(loop.time())
            if delay > 0:
                self._pause_accepting(delay)
                return
            try:
                sock, address = server.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:  # out of file descriptors and the like
                log.warning("accepting a connection failed: %s", exc)
                return
            self.quotas.created()
            client = str(address[0]) if isinstance(address, tuple) else str(address)
            refusal = self.quotas.admit(client)
            if refusal is not None:
                log.info("closing a new connection from %s: %s", client, refusal)
                sock.close()
                continue
            self._accepted[sock] = client
            task = asyncio.create_task(self._serve(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _forget(self, sock: socket.socket) -> None:
        """An admitted socket is done with: it no longer counts against the quotas."""
        client = self._accepted.pop(sock, None)
        if client is not None:
            self.quotas.release(client)

    async def _close_idle_connections(self) -> None:
        """Close connections idle longer than connections.max.idle.ms, as Kafka's
        Selector does."""
        timeout = self.idle_timeout_ms / 1000
        interval = min(max(timeout / IDLE_CHECKS_PER_TIMEOUT, 0.01), MAX_IDLE_CHECK_INTERVAL)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self._connections):
                if connection.idle_for(now) > timeout:
                    log.info(
                        "closing connection from %s: idle for more than connections.max.idle.ms=%d",
                        connection.peer,
                        self.idle_timeout_ms,
                    )
                    connection.stream.abort()

    async def _serve(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            stream = await accept_frame_stream(
                sock,
                # before authentication: sasl.server.max.receive.size, from the first byte
                self.max_request_size if self.sasl is None else self.sasl.max_receive_size,
                max_queued_bytes=QUEUED_REQUEST_BYTES,
                memory_pool=self.memory_pool,
                ssl=self.ssl_context,
                ssl_handshake_timeout=self.ssl_handshake_timeout,
                untrusted=self.sasl is not None,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError and ConnectionError too
            log.info("closing a new connection on %s: %s", self.name, exc or type(exc).__name__)
            self._forget(sock)
            sock.close()
            return
        except BaseException:
            self._forget(sock)
            sock.close()
            raise
        principal = ANONYMOUS
        if self.ssl_context is not None and self.sasl is None:
            try:
                principal = self._tls_principal(stream.get_extra_info("peercert"))
            except ValueError as exc:
                log.info("closing a TLS connection on %s: %s", self.name, exc)
                stream.abort()
                self._forget(sock)
                return
        peer = stream.get_extra_info("peername")
        authenticator = SaslAuthenticator(self.sasl, str(peer)) if self.sasl is not None else None
        connection = Connection(
            stream,
            self.handler,
            authenticator=authenticator,
            principal=principal,
            max_request_size=self.max_request_size,
            tls=self.ssl_context is not None,
        )
        connection.listener_name = self.name
        self._connections.add(connection)
        try:
            await connection.serve()
        except asyncio.CancelledError:
            pass  # broker shutdown; stop() has already dropped the socket
        finally:
            self._connections.discard(connection)
            self._forget(sock)

    def _tls_principal(self, certificate: object) -> KafkaPrincipal:
        """The principal of a TLS client: its certificate's mapped name, or ANONYMOUS
        without one."""
        mapped = self.principal_mapper.principal(
            certificate if isinstance(certificate, dict) else None
        )
        return mapped or ANONYMOUS

    def reconfigure_ssl(
        self, context: ssl.SSLContext, principal_mapper: PrincipalMapper | None = None
    ) -> None:
        """New certificates and TLS settings (a dynamic config change)."""
        self.ssl_context = context
        if principal_mapper is not None:
            self.principal_mapper = principal_mapper

    async def stop(self) -> None:
        """Stop accepting, drop every connection at once (a closing transport would
        otherwise wait for a peer that is not reading to take its unsent bytes) and wait
        for the connection tasks to end."""
        self._close_sockets()
        for connection in list(self._connections):
            connection.stream.abort()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in list(self._accepted):  # connections cancelled before their task began
            self._forget(sock)
            sock.close()
        await asyncio.sleep(0)  # aborted transports close their sockets on the next turn

    def _close_sockets(self) -> None:
        loop = asyncio.get_running_loop()
        if self._accept_paused is not None:
            self._accept_paused.cancel()
            self._accept_paused = None
        for sock in self._sockets:
            with contextlib.suppress(OSError, ValueError):  # never registered / closed
                loop.remove_reader(sock.fileno())
            sock.close()
        self._sockets = []
