"""A socket speaking size-prefixed frames, for the broker's and the client's connections.

`FrameStream` is an `asyncio.BufferedProtocol`: the event loop receives each frame straight
into a buffer made for it (`logbus.protocol.frame.FrameAssembler`), with none of the
copies a StreamReader makes. The owner reads frames with `read_frame()` and writes with
`write()` / `drain()`. Reading pauses while `max_queued_bytes` of frames wait to be read,
so a peer that pipelines requests is held back by TCP, not buffered without bound.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from collections.abc import Iterable
from typing import Any, cast

from logbus.protocol.frame import Frame, FrameAssembler

# Chunks smaller than this are joined with their neighbours into one write: a system call
# costs more than copying them.
COALESCE_BELOW = 64 * 1024


class FrameStream(asyncio.BufferedProtocol):
    """One connection's frames in and bytes out.

    Made by `open_frame_stream` (a client) or `accept_frame_stream` (a broker's accepted
    socket); lives until `close()`/`abort()` or the peer goes.
    `read_frame()` is for one task at a time; `write()` and `drain()` may be called from
    any task of the loop. A bad size prefix stops reading: `read_frame()` returns the
    frames that came before it, then raises the ProtocolError.
    """

    def __init__(
        self, max_frame_size: int, *, max_queued_bytes: int = 1, min_frame_size: int = 0
    ) -> None:
        self._assembler = FrameAssembler(max_frame_size, min_frame_size=min_frame_size)
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0
        self.max_queued_bytes = max_queued_bytes
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._reading_paused = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None  # raised once the queued frames are read
        self._eof = False
        self._lost = False
        self._write_paused = False
        self._drain_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        # asyncio's own transports copy whatever the socket did not take at once, so a
        # caller may change a buffer it wrote; other loops' (uvloop) may keep a reference.
        self._write_copies = isinstance(self._loop, asyncio.SelectorEventLoop)

    # --- asyncio.BufferedProtocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._assembler.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        assembler = self._assembler
        frames = assembler.buffer_updated(nbytes)
        if frames:
            for frame in frames:
                self._queued_bytes += len(frame)
            self._frames.extend(frames)
            if self._queued_bytes >= self.max_queued_bytes:
                self._pause_reading()
            self._wake_reader()
        if assembler.error is not None and self._error is None:
            self._error = assembler.error  # raised once the frames before it are read
            self._pause_reading()
            self._wake_reader()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        return True  # keep the socket open for writing: the peer may await answers

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake_reader()
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)
        self._drain_waiters.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # --- reading ------------------------------------------------------------------------

    @property
    def queued_bytes(self) -> int:
        """Bytes of complete frames waiting for `read_frame()`."""
        return self._queued_bytes

    async def read_frame(self) -> Frame | None:
        """The next frame (without its size prefix); None once the peer has closed its
        side at a frame boundary. Raises ProtocolError for a bad size prefix,
        IncompleteReadError if the peer closed in the middle of a frame, and the socket's
        error if the connection failed."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            if self._eof or self._lost:
                if self._assembler.pending:
                    raise asyncio.IncompleteReadError(b"", None)
                return None
            self._read_waiter = self._loop.create_future()
            try:
                await self._read_waiter
            finally:
                self._read_waiter = None
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        if self._reading_paused and self._queued_bytes < self.max_queued_bytes:
            self._reading_paused = False
            if self._transport is not None and self._error is None and not self._lost:
                self._transport.resume_reading()
        return frame

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and not self._lost:
            self._reading_paused = True
            self._transport.pause_reading()

    def _wake_reader(self) -> None:
        waiter = self._read_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- writing ------------------------------------------------------------------------

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None, "not connected yet"
        return self._transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.transport.write(data)

    def write_chunks(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        """Write chunks in order: small ones joined into one write, large ones written as
        they are (a Produce's batches, a Fetch's records) unless the transport could keep
        a reference to a buffer the caller may change, which is copied then."""
        write = self.transport.write
        pending: list[bytes | bytearray | memoryview] = []
        for chunk in chunks:
            if len(chunk) >= COALESCE_BELOW and (
                self._write_copies
                or type(chunk) is bytes
                or (isinstance(chunk, memoryview) and chunk.readonly)
            ):
                if pending:
                    write(b"".join(pending))
                    pending = []
                write(chunk)
            else:
                pending.append(chunk)
        if pending:
            write(b"".join(pending))

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark; raises
        ConnectionResetError if the connection is gone."""
        if self._lost:
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    # --- closing ------------------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def close(self) -> None:
        """Close once the queued bytes are sent."""
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection now, unsent bytes and all."""
        if self._transport is not None:
            self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)


async def open_frame_stream(
    host: str, port: int, max_frame_size: int, *, min_frame_size: int = 0,
    max_queued_bytes: int = 1,
) -> FrameStream:
    """Connect to host:port (every resolved address in turn, as `open_connection`)."""
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(
        lambda: FrameStream(
            max_frame_size, min_frame_size=min_frame_size, max_queued_bytes=max_queued_bytes
        ),
        host,
        port,
    )
    return stream


async def accept_frame_stream(
    sock: socket.socket, max_frame_size: int, *, max_queued_bytes: int = 1
) -> FrameStream:
    """Serve an accepted socket."""
    loop = asyncio.get_running_loop()
    _, stream = await loop.connect_accepted_socket(
        lambda: FrameStream(max_frame_size, max_queued_bytes=max_queued_bytes), sock
    )
    return stream
