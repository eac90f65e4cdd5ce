"""One client connection: frames in, responses out, in order.

Requests on a connection are handled one at a time, as Kafka's socket server does (it
mutes a channel until its response is sent), so a pipelining client sees its produce
requests appended in the order it sent them. Frames beyond `socket.request.max.bytes`,
garbage headers and unknown API versions close the connection or get the protocol's error;
the broker and every other connection keep going.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from logbus.common.network.frame_stream import FrameStream
from logbus.protocol.frame import Frame
from logbus.server.network.sasl_authenticator import CloseAfter, SaslAuthenticator
from logbus.server.security.principal import ANONYMOUS, KafkaPrincipal
from logbus.storage.file_slice import FileSlice

log = logging.getLogger(__name__)

# Slices smaller than this are read and written with the rest of the response: one write
# costs less than the machinery of sendfile for them.
SENDFILE_THRESHOLD = 64 * 1024
READ_SIZE = 256 * 1024
CLOSE_TIMEOUT = 5.0
# TLS: file slices are read and encrypted in pieces of this size (see _send_through_tls).
TLS_WRITE_SIZE = 64 * 1024
# Reading pauses while this many bytes of requests wait to be handled (at least one
# request always waits: Kafka mutes a channel while it handles a request from it).
QUEUED_REQUEST_BYTES = 1 << 20

Handler = Callable[["Connection", Frame], Awaitable[list[Any] | None]]


class CompletedRequest(Protocol):
    """Timing of the request under way (the broker's metrics or request log), set by the
    handler; told when its response has been written."""

    def complete(self, conn: Any, send_started: float, chunks: list[Any] | None) -> None: ...


class CloseConnection(Exception):
    """Raised by a handler to close the connection without answering (Kafka's way for
    malformed requests and unsupported versions of most APIs)."""


class Connection:
    """Owns one client socket. Created by the listener; lives until the peer closes, a
    protocol error closes it, or the broker shuts down."""

    def __init__(
        self,
        stream: FrameStream,
        handler: Handler,
        *,
        authenticator: SaslAuthenticator | None = None,
        principal: KafkaPrincipal = ANONYMOUS,
        max_request_size: int = 0,
        tls: bool = False,
    ) -> None:
        self.stream = stream
        self.handler = handler
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._busy = False  # a request is being handled or answered
        self._answered_at = stream.last_received
        # Who authenticated on this connection (SSL client certificate, SASL); anonymous
        # until then, and on PLAINTEXT listeners.
        self.principal: KafkaPrincipal = principal
        # SASL listeners: the exchange before any other request; frames are bounded by
        # sasl.server.max.receive.size until it completes, then by max_request_size.
        self.authenticator = authenticator
        self.max_request_size = max_request_size
        if authenticator is not None:
            stream.set_max_frame_size(authenticator.settings.max_receive_size)
        self.listener_name = ""  # set by the listener
        self.tls = tls  # no sendfile: file slices are read and written through TLS
        # Seconds this connection is not read after its current response (client quotas,
        # KIP-219: the response is sent at once, then the channel stays muted).
        self.throttle_s = 0.0
        # Set by the handler when requests are timed (metrics.listener, the request log).
        self.timing: CompletedRequest | None = None

    def throttle(self, seconds: float) -> None:
        self.throttle_s = max(self.throttle_s, seconds)

    def idle_for(self, now: float) -> float:
        """Seconds since this connection last did anything (0 while a request is under
        way, or waiting to be read for the broker's memory pool): connections.max.idle.ms
        is measured with it."""
        if self._busy or self.stream.waiting_for_memory:
            return 0.0
        return now - max(self.stream.last_received, self._answered_at)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (frame := await self.stream.read_frame()) is not None:
                self._busy = True
                chunks = await self._handle(frame)
                del frame  # a produce request's records may be large: let them go
                timing = self.timing
                if timing is not None:
                    send_started = time.perf_counter()
                if chunks is not None:
                    await self.send(chunks)
                if timing is not None:
                    self.timing = None
                    timing.complete(self, send_started, chunks)
                if self.throttle_s > 0:  # muted: the socket is not read meanwhile
                    self.stream.mute(True)
                    await asyncio.sleep(self.throttle_s)
                    self.throttle_s = 0.0
                    self.stream.mute(False)
                self._busy = False
                self._answered_at = loop.time()
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except ValueError as exc:  # ProtocolError and FrameTooLarge: the peer's bytes
            log.warning("closing connection from %s: %s", self.peer, exc)
        finally:
            await self.close()

    async def _handle(self, frame: Frame) -> list[Any] | None:
        auth = self.authenticator
        if auth is None:
            return await self.handler(self, frame)
        if not auth.wants(frame):
            if auth.expired():
                raise CloseConnection("the SASL session expired (connections.max.reauth.ms)")
            return await self.handler(self, frame)
        try:
            chunks = auth.handle(frame)
        except CloseAfter as exc:
            if exc.chunks is not None:
                await self.send(exc.chunks)
            if exc.delay > 0:  # connection.failed.authentication.delay.ms
                await asyncio.sleep(exc.delay)
            raise CloseConnection(str(exc)) from None
        if chunks is None:  # ApiVersions before authentication
            return await self.handler(self, frame)
        if auth.complete and auth.principal is not None and self.principal != auth.principal:
            self.principal = auth.principal
            self.stream.trust(self.max_request_size)
        return chunks

    async def close(self) -> None:
        """Flush what is queued and close; a peer that does not take its bytes within
        CLOSE_TIMEOUT seconds has the socket dropped."""
        self.stream.close()
        try:
            await asyncio.wait_for(self.stream.wait_closed(), CLOSE_TIMEOUT)
        except OSError:  # ConnectionError and TimeoutError too
            self.stream.abort()

    async def send(self, chunks: list[Any]) -> None:
        stream = self.stream
        if self.tls:
            await _send_through_tls(stream, chunks)
            return
        run: list[Any] = []  # chunks written together
        for chunk in chunks:
            if not isinstance(chunk, FileSlice):
                run.append(chunk)
            elif chunk.size < SENDFILE_THRESHOLD:
                run.append(os.pread(chunk.file.fileno(), chunk.size, chunk.position))
            else:
                stream.write_chunks(run)
                run = []
                await stream.drain()
                await _send_slice(stream, chunk)
        stream.write_chunks(run)
        await stream.drain()


async def _send_through_tls(stream: FrameStream, chunks: list[Any]) -> None:
    """TLS has no sendfile: file slices are read in pieces of TLS_WRITE_SIZE with one
    `pread` each (a bytes object: nothing zero-fills it and nobody changes it after) and
    every piece goes to the transport in one `writelines` with the small chunks queued
    before it, joined (one TLS record for them, not one each): TLS encrypts them into its
    outgoing buffer and the loop sends that with one system call. Small pieces keep the
    plaintext, the records and the outgoing buffer in the CPU's caches: encrypting and
    sending 4 MiB at a time ran at half the rate of 64 KiB pieces (bench/README.md,
    "Security")."""
    transport = stream.transport
    run: list[Any] = []  # small chunks waiting for the next write
    queued = 0
    for chunk in chunks:
        if not isinstance(chunk, FileSlice):
            run.append(chunk)
            queued += len(chunk)
            if queued >= TLS_WRITE_SIZE:  # large in-memory chunks: written in pieces
                stream.write_chunks(run)
                run, queued = [], 0
                await stream.drain()
            continue
        fd = chunk.file.fileno()
        position, end = chunk.position, chunk.position + chunk.size
        while position < end:
            piece = os.pread(fd, min(TLS_WRITE_SIZE - queued, end - position), position)
            if not piece:
                raise ConnectionError("segment file shorter than the slice being sent")
            position += len(piece)
            if run:
                transport.writelines([b"".join(run), piece])
                run, queued = [], 0
            else:
                transport.write(piece)
            await stream.drain()
    if run:
        transport.write(b"".join(run))
    await stream.drain()


_sendfile_supported = True


async def _send_slice(writer: FrameStream, chunk: FileSlice) -> None:
    """Send a file slice with sendfile(2): through the event loop where it can (the
    standard loop), else straight to the socket whenever the transport has nothing queued
    (uvloop has no loop.sendfile; with its buffer empty, nothing of ours is in flight, so
    bytes written to the socket directly keep their order). What the socket does not take
    at once is read in pieces and written through the transport."""
    global _sendfile_supported
    if _sendfile_supported:
        try:
            loop = asyncio.get_running_loop()
            await loop.sendfile(writer.transport, chunk.file, chunk.position, chunk.size)
            return
        except NotImplementedError:
            _sendfile_supported = False
    fd = chunk.file.fileno()
    socket_fd = _socket_fd(writer)
    position, end = chunk.position, chunk.position + chunk.size
    while position < end:
        if socket_fd is not None and not writer.transport.get_write_buffer_size():
            try:
                sent = os.sendfile(socket_fd, fd, position, end - position)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                socket_fd = None  # (not a socket sendfile serves): pieces from now on
                sent = 0
            if sent:
                position += sent
                continue
        data = os.pread(fd, min(READ_SIZE, end - position), position)
        if not data:
            raise ConnectionError("segment file shorter than the slice being sent")
        writer.write(data)
        position += len(data)
        await writer.drain()


def _socket_fd(writer: FrameStream) -> int | None:
    sock = writer.get_extra_info("socket")
    try:
        return None if sock is None else int(sock.fileno())
    except (OSError, ValueError):
        return None
