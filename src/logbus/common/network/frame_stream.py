"""A socket speaking size-prefixed frames, for the broker's and the client's connections.

`FrameStream` is an `asyncio.BufferedProtocol`: the event loop receives each frame straight
into a buffer made for it (`logbus.protocol.frame.FrameAssembler`), with none of the
copies a StreamReader makes. The owner reads frames with `read_frame()` and writes with
`write()` / `drain()`. Reading pauses while `max_queued_bytes` of frames wait to be read,
so a peer that pipelines requests is held back by TCP, not buffered without bound.
Streams may also share a `MemoryPool` (the broker's `queued.max.request.bytes`): a frame
counts against it from the moment its size is known until the next frame is asked for,
and a stream that needs memory while the pool is used up stops reading until it has room.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
from collections.abc import Iterable
from typing import Any, cast

from logbus.protocol.frame import SIZE_PREFIX, Frame, FrameAssembler

# Buffers of a peer that has not authenticated (FrameStream(untrusted=True)).
UNTRUSTED_SCRATCH = 4096
UNTRUSTED_GROWTH = 16 * 1024

# Chunks smaller than this are joined with their neighbours into one write: a system call
# costs more than copying them.
COALESCE_BELOW = 64 * 1024
# On a TLS connection larger chunks are handed to the transport in pieces of this size: TLS
# encrypts each into its outgoing buffer and the loop sends it while the bytes are still in
# the CPU's caches (a 1 MB produce request encrypted and sent as one write ran slower).
TLS_PIECE = 64 * 1024


class MemoryPool:
    """Bytes of received frames shared by many streams, as Kafka's MemoryPool for
    `queued.max.request.bytes`: a frame may take memory while any is left (so one frame
    larger than the pool still gets through, alone), and streams that find none stop
    reading until frames are released, first come first served. Owned by one event loop.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"a memory pool needs a positive capacity, not {capacity}")
        self.capacity = capacity
        self.used = 0
        self._waiting: collections.deque[FrameStream] = collections.deque()

    @property
    def has_room(self) -> bool:
        return self.used < self.capacity

    @property
    def waiting(self) -> int:
        """Streams not reading until memory is released."""
        return len(self._waiting)

    def take(self, nbytes: int) -> None:
        self.used += nbytes

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        while self._waiting and self.has_room:
            self._waiting.popleft()._memory_available()

    def wait(self, stream: FrameStream) -> None:
        self._waiting.append(stream)

    def forget(self, stream: FrameStream) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(stream)


class FrameStream(asyncio.BufferedProtocol):
    """One connection's frames in and bytes out.

    Made by `open_frame_stream` (a client) or `accept_frame_stream` (a broker's accepted
    socket); lives until `close()`/`abort()` or the peer goes.
    `read_frame()` is for one task at a time; `write()` and `drain()` may be called from
    any task of the loop. A bad size prefix stops reading: `read_frame()` returns the
    frames that came before it, then raises the ProtocolError. With a `memory_pool`, the
    frame `read_frame()` returned is released to it by the next call (or the connection's
    end): one frame is handled at a time.
    """

    def __init__(
        self,
        max_frame_size: int,
        *,
        max_queued_bytes: int = 1,
        min_frame_size: int = 0,
        memory_pool: MemoryPool | None = None,
        untrusted: bool = False,
    ) -> None:
        # `untrusted` (a peer not authenticated yet): small buffers that grow with the
        # bytes received, until `trust()`.
        self._assembler = (
            FrameAssembler(
                max_frame_size,
                min_frame_size=min_frame_size,
                scratch_size=UNTRUSTED_SCRATCH,
                growth_step=UNTRUSTED_GROWTH,
            )
            if untrusted
            else FrameAssembler(max_frame_size, min_frame_size=min_frame_size)
        )
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0
        self.max_queued_bytes = max_queued_bytes
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.last_received = self._loop.time()  # loop time of the last bytes received
        self._pool = memory_pool
        self._pool_held = 0  # bytes this stream holds in the pool
        self._reserved = 0  # of which the frame being received (its size prefix included)
        self._handed_out = 0  # of which the frame read_frame() returned last
        self._unpaid: list[Frame] = []  # complete frames that found the pool used up
        self._queue_full = False
        self._waiting_for_memory = False
        self._reading_paused = False
        self._muted = False  # a throttled connection (client quotas, KIP-219)
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
        self._tls = False  # large chunks are written in TLS_PIECE pieces

    # --- asyncio.BufferedProtocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        self._tls = transport.get_extra_info("ssl_object") is not None

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._assembler.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_received = self._loop.time()
        assembler = self._assembler
        frames = assembler.buffer_updated(nbytes)
        if frames:
            if self._pool is None:
                self._deliver(frames)
            else:
                self._pay(frames)
        if assembler.error is not None and self._error is None:
            self._error = assembler.error  # raised once the frames before it are read
            self._sync_reading()
            self._wake_reader()
        if self._pool is not None:
            self._reserve_memory()

    def _deliver(self, frames: Iterable[Frame]) -> None:
        """Queue frames for read_frame()."""
        for frame in frames:
            self._queued_bytes += len(frame)
            self._frames.append(frame)
        if self._queued_bytes >= self.max_queued_bytes:
            self._queue_full = True
            self._sync_reading()
        self._wake_reader()

    # --- the memory pool: every frame takes memory from it before it is read ------------

    def _pay(self, frames: list[Frame]) -> None:
        """Take the pool's memory for complete frames and deliver them; frames that find
        the pool used up wait, unread, until it has room."""
        pool = self._pool
        assert pool is not None
        paid: list[Frame] = []
        for frame in frames:
            size = SIZE_PREFIX + len(frame)
            if self._reserved:  # the frame under way had memory reserved for it
                self._take(size - self._reserved)
                self._reserved = 0
                paid.append(frame)
            elif pool.has_room and not self._unpaid:
                self._take(size)
                paid.append(frame)
            else:
                self._unpaid.append(frame)
        if paid:
            self._deliver(paid)

    def _take(self, nbytes: int) -> None:
        assert self._pool is not None
        self._pool.take(nbytes)
        self._pool_held += nbytes

    def _reserve_memory(self) -> None:
        """Reserve the pool's memory for the frame under way; without it (the pool used
        up, with no frame under way or one that has no memory yet, or frames waiting to
        be paid for) stop reading until the pool has room."""
        pool = self._pool
        assert pool is not None
        if self._reserved or self._waiting_for_memory or self._lost:
            return
        if pool.has_room and not self._unpaid:
            announced = self._assembler.announced
            if announced:
                self._take(announced)
                self._reserved = announced
            return
        self._waiting_for_memory = True
        pool.wait(self)
        self._sync_reading()

    def _memory_available(self) -> None:
        """Called by the pool once it has room again for this waiting stream."""
        self._waiting_for_memory = False
        if self._lost:
            return
        unpaid, self._unpaid = self._unpaid, []
        if unpaid:
            self._pay(unpaid)
        self._reserve_memory()
        self._sync_reading()

    def _release_memory(self, nbytes: int) -> None:
        if self._pool is not None and nbytes:
            self._pool_held -= nbytes
            self._pool.release(nbytes)

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        # Keep the socket open for writing: the peer may await answers (TLS cannot be
        # half-closed: asyncio closes it whatever is returned, and warns if True).
        transport = self._transport
        return transport is None or transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._pool is not None:
            # What the peer sent is still read (as without a pool), and owes nothing more.
            self._pool.forget(self)
            self._reserved = self._handed_out = 0
            self._release_memory(self._pool_held)
            unpaid, self._unpaid = self._unpaid, []
            self._deliver(unpaid)
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
    def waiting_for_memory(self) -> bool:
        """Whether reading waits for the memory pool (a request is waiting, unread)."""
        return self._waiting_for_memory

    @property
    def queued_bytes(self) -> int:
        """Bytes of complete frames waiting for `read_frame()`."""
        return self._queued_bytes

    async def read_frame(self) -> Frame | None:
        """The next frame (without its size prefix); None once the peer has closed its
        side at a frame boundary. Raises ProtocolError for a bad size prefix,
        IncompleteReadError if the peer closed in the middle of a frame, and the socket's
        error if the connection failed."""
        if self._handed_out:
            handed_out, self._handed_out = self._handed_out, 0
            self._release_memory(handed_out)
        while not self._frames:
            if self._unpaid:  # frames waiting for the memory pool come first
                pass
            elif self._error is not None:
                raise self._error
            elif self._eof or self._lost:
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
        if self._pool is not None and not self._lost:
            self._handed_out = SIZE_PREFIX + len(frame)
        if self._queue_full and self._queued_bytes < self.max_queued_bytes:
            self._queue_full = False
            self._sync_reading()
        return frame

    def _sync_reading(self) -> None:
        """Pause or resume the transport's reading to match why it should be paused."""
        if self._transport is None or self._lost:
            return
        paused = (
            self._queue_full or self._waiting_for_memory or self._muted or self._error is not None
        )
        if paused != self._reading_paused:
            self._reading_paused = paused
            if paused:
                self._transport.pause_reading()
            else:
                self._transport.resume_reading()

    def mute(self, muted: bool) -> None:
        """Stop (or start again) reading the socket, as Kafka mutes a throttled channel."""
        self._muted = muted
        self._sync_reading()

    def _wake_reader(self) -> None:
        waiter = self._read_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- writing ------------------------------------------------------------------------

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None, "not connected yet"
        return self._transport

    def _open_transport(self) -> asyncio.Transport:
        """The transport, or ConnectionResetError once it is closing or lost (uvloop's
        write on a closed transport raises RuntimeError, asyncio's only logs)."""
        transport = self.transport
        if self._lost or transport.is_closing():
            raise ConnectionResetError("connection lost")
        return transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._open_transport().write(data)

    def write_chunks(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        """Write chunks in order: small ones joined into one write, large ones written as
        they are (a Produce's batches, a Fetch's records) unless the transport could keep
        a reference to a buffer the caller may change, which is copied then.
        ConnectionResetError when the connection is closing or gone."""
        write = self._open_transport().write
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
                if self._tls and len(chunk) > TLS_PIECE:
                    self._write_pieces(chunk)
                else:
                    write(chunk)
            else:
                pending.append(chunk)
        if pending:
            write(b"".join(pending))

    def _write_pieces(self, chunk: bytes | bytearray | memoryview) -> None:
        """A large chunk on a TLS connection, handed over TLS_PIECE bytes at a time."""
        write = self.transport.write
        view = memoryview(chunk)
        for start in range(0, len(view), TLS_PIECE):
            write(view[start : start + TLS_PIECE])

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

    def set_max_frame_size(self, max_frame_size: int) -> None:
        """Change the largest frame accepted from now on (a SASL connection's bound before
        and after authentication)."""
        self._assembler.max_frame_size = max_frame_size

    def trust(self, max_frame_size: int) -> None:
        """The peer authenticated: frames up to `max_frame_size`, the usual buffers."""
        self._assembler.max_frame_size = max_frame_size
        self._assembler.enlarge()

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
    max_queued_bytes: int = 1, ssl: Any = None, server_hostname: str | None = None,
) -> FrameStream:
    """Connect to host:port (every resolved address in turn, as `open_connection`); with
    `ssl` (an `ssl.SSLContext`) over TLS."""
    loop = asyncio.get_running_loop()
    made: list[FrameStream] = []  # with TLS, uvloop returns its own SSL protocol: not ours

    def factory() -> FrameStream:
        made.append(
            FrameStream(
                max_frame_size, min_frame_size=min_frame_size, max_queued_bytes=max_queued_bytes
            )
        )
        return made[-1]

    await loop.create_connection(
        factory,
        host,
        port,
        ssl=ssl,
        server_hostname=server_hostname if ssl is not None else None,
    )
    return made[-1]


async def accept_frame_stream(
    sock: socket.socket,
    max_frame_size: int,
    *,
    max_queued_bytes: int = 1,
    memory_pool: MemoryPool | None = None,
    ssl: Any = None,
    ssl_handshake_timeout: float | None = None,
    untrusted: bool = False,
) -> FrameStream:
    """Serve an accepted socket; with `ssl` (an `ssl.SSLContext`) after a TLS handshake,
    which raises when it fails or takes longer than `ssl_handshake_timeout` seconds."""
    loop = asyncio.get_running_loop()
    made: list[FrameStream] = []  # with TLS, uvloop returns its own SSL protocol: not ours

    def factory() -> FrameStream:
        made.append(
            FrameStream(
                max_frame_size,
                max_queued_bytes=max_queued_bytes,
                memory_pool=memory_pool,
                untrusted=untrusted,
            )
        )
        return made[-1]

    await loop.connect_accepted_socket(
        factory,
        sock,
        ssl=ssl,
        ssl_handshake_timeout=ssl_handshake_timeout if ssl is not None else None,
    )
    return made[-1]
