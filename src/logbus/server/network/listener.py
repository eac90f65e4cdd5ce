"""The listener: accepts connections on one host and port and serves each one.

It accepts in its own reader callback rather than with asyncio's `start_server`, so every
accepted socket is ours from the moment `accept()` returns: on Python 3.11 a
connection accepted just before `Server.close()` is leaked half set up, and asyncio's
server never closes the connections it handed out. `stop()` ends them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from logbus.protocol.frame_stream import FrameStream, accept_frame_stream
from logbus.server.network.connection import QUEUED_REQUEST_BYTES, Connection, Handler

log = logging.getLogger(__name__)

BACKLOG = 1024


class Listener:
    """Owns the server sockets and the connection tasks; `stop()` closes them all."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        max_request_size: int,
        send_buffer: int = -1,
        receive_buffer: int = -1,
    ) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_size = max_request_size
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self._sockets: list[socket.socket] = []
        self._accepted: set[socket.socket] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams: set[FrameStream] = set()

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
                sock.listen(BACKLOG)
                sock.setblocking(False)
                self.port = sock.getsockname()[1]
        except OSError:
            self._close_sockets()
            raise
        if not self._sockets:
            raise OSError(f"no address to listen on for {self.host!r}")
        for sock in self._sockets:
            loop.add_reader(sock.fileno(), self._accept, sock)
        log.info("listening on %s:%d", self.host, self.port)

    def _accept(self, server: socket.socket) -> None:
        """Called by the loop when a server socket is readable: take every waiting
        connection. Synchronous, so no accepted socket can be lost to a cancellation."""
        for _ in range(BACKLOG):
            try:
                sock, _ = server.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:  # out of file descriptors and the like
                log.warning("accepting a connection failed: %s", exc)
                return
            self._accepted.add(sock)
            task = asyncio.create_task(self._serve(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            stream = await accept_frame_stream(
                sock, self.max_request_size, max_queued_bytes=QUEUED_REQUEST_BYTES
            )
        except BaseException:
            self._accepted.discard(sock)
            sock.close()
            raise
        self._streams.add(stream)
        try:
            await Connection(stream, self.handler).serve()
        except asyncio.CancelledError:
            pass  # broker shutdown; stop() has already dropped the socket
        finally:
            self._streams.discard(stream)
            self._accepted.discard(sock)

    async def stop(self) -> None:
        """Stop accepting, drop every connection at once (a closing transport would
        otherwise wait for a peer that is not reading to take its unsent bytes) and wait
        for the connection tasks to end."""
        self._close_sockets()
        for stream in list(self._streams):
            stream.abort()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in self._accepted:  # connections whose task was cancelled before it began
            sock.close()
        self._accepted.clear()
        await asyncio.sleep(0)  # aborted transports close their sockets on the next turn

    def _close_sockets(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self._sockets:
            with contextlib.suppress(OSError, ValueError):  # never registered / closed
                loop.remove_reader(sock.fileno())
            sock.close()
        self._sockets = []
