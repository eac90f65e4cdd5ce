"""The listener: accepts connections on one host and port and serves each one."""

from __future__ import annotations

import asyncio
import logging
import socket

from logbus.server.network.connection import Connection, Handler

log = logging.getLogger(__name__)


class Listener:
    """Owns the server socket and the connection tasks; `stop()` closes them all."""

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
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.host or None, self.port, reuse_address=True, limit=1 << 20
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("listening on %s:%d", self.host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        conn = Connection(reader, writer, self.handler, self.max_request_size)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.serve()
        except asyncio.CancelledError:
            # Broker shutdown. Ending normally keeps asyncio's stream callback (which asks
            # the task for its exception) from logging the cancellation as an error.
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
