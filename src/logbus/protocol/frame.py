"""Size-prefixed framing: every Kafka request and response is an int32 length and a body.

`FrameAssembler` hands out the buffer the next received bytes should go into and returns
the frames they complete; it never touches a socket (the shape of h2's frame buffer, in
the get_buffer / buffer_updated form of `asyncio.BufferedProtocol`, so that a socket's
bytes land where they will stay). `logbus.common.network.frame_stream` drives it from a socket.

Theory of operation: bytes are received into a scratch buffer, where several small frames
arriving together are split off in one go (each copied out, which is cheap for small
frames and costs no extra system call). A frame too large for that gets a buffer of its
own as soon as its size is known: the bytes already received are moved into it and the
rest of the frame is received straight into it, never copied again. Those buffers are
recycled: a buffer is reused for a later frame once nothing refers to it any more (no
frame, no view of one), which spares the allocator and the kernel a fresh megabyte of
zeroed pages per request.

A size prefix is only a promise: memory follows the bytes that actually arrive. A new
buffer holds at most GROWTH_STEP bytes more than have arrived (a frame up to that size,
the common case, is still received straight into a buffer of its full size); a larger
frame's buffer doubles as it fills, its bytes moved along, so a peer that announces
100 MiB and sends nothing costs a megabyte, not 100 MiB. A free recycled buffer large
enough for the whole frame is taken at once: it costs nothing more. Moving a growing
frame along costs about what zeroing a buffer of its full size at once used to; the
buffers stay plain `bytearray`s (heap memory the allocator reuses: fresh anonymous pages
cost far more to fault in on this kind of VM), and `protocol/` needs no numpy.
"""

from __future__ import annotations

import struct
import sys

from logbus.protocol.errors import ProtocolError

_SIZE = struct.Struct(">i")
SIZE_PREFIX = _SIZE.size

# Scratch space for receiving: large enough that a batch of small requests (or a whole
# small response) arrives in one system call, small enough to stay in cache.
SCRATCH_SIZE = 64 * 1024
# Frames up to this size are assembled in the scratch buffer (and copied out of it once);
# larger ones are received into a buffer of their own.
SMALL_FRAME = 16 * 1024
# Buffers kept for reuse per assembler, and the largest kept: an idle connection holds at
# most SPARE_BUFFERS * MAX_SPARE_SIZE bytes.
SPARE_BUFFERS = 2
MAX_SPARE_SIZE = 16 * 1024 * 1024
# A new frame buffer is at most this much larger than the bytes received so far.
GROWTH_STEP = 1024 * 1024

# A frame: its bytes, writable, valid for as long as the caller keeps it (or any slice).
Frame = memoryview

# References to a pooled buffer while nobody else holds it: the pool's list and
# getrefcount's argument. (A frame, or any view of one, holds one more.)
_UNSHARED = 2


class FrameTooLarge(ProtocolError):
    """A frame announces more bytes than the receiver accepts (socket.request.max.bytes)."""


class FrameAssembler:
    """Turns received bytes into frames (without their size prefix), each a memoryview of
    memory that nothing else uses while the frame (or a view of it) is alive.

    Call `get_buffer()`, receive at most its length of bytes into it, then call
    `buffer_updated(nbytes)`, which returns the frames completed so far. A bad size prefix
    sets `error` to a ProtocolError (FrameTooLarge above `max_frame_size`): the frames
    before it are still returned, and no frame after it. Not safe to share between tasks:
    one per connection.
    """

    __slots__ = (
        "_end",
        "_filled",
        "_frame",
        "_frame_size",
        "_growth_step",
        "_scratch",
        "_scratch_view",
        "_small_frame",
        "_spares",
        "_start",
        "error",
        "max_frame_size",
        "min_frame_size",
    )

    def __init__(
        self,
        max_frame_size: int,
        *,
        min_frame_size: int = 0,
        scratch_size: int = SCRATCH_SIZE,
        growth_step: int = GROWTH_STEP,
    ) -> None:
        if scratch_size < 2 * SIZE_PREFIX:
            raise ValueError(f"scratch_size {scratch_size} is too small")
        self.max_frame_size = max_frame_size
        self.min_frame_size = min_frame_size
        # A large frame's buffer starts at most this much larger than what has arrived
        # (small for untrusted peers: memory follows the bytes they send, not the sizes
        # they announce).
        self._growth_step = growth_step
        self._scratch = bytearray(scratch_size)
        self._scratch_view = memoryview(self._scratch)
        # A small frame and its size prefix always fit in the scratch buffer.
        self._small_frame = min(SMALL_FRAME, scratch_size - SIZE_PREFIX)
        # Received bytes not yet split into frames are scratch[_start:_end].
        self._start = 0
        self._end = 0
        # A large frame being received into its own buffer (which may hold only the first
        # part of it so far), its full size, and how much of it has arrived.
        self._frame: memoryview | None = None
        self._frame_size = 0
        self._filled = 0
        self._spares: list[bytearray] = []
        self.error: ProtocolError | None = None

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a complete frame (0 at a frame boundary)."""
        if self._frame is not None:
            return SIZE_PREFIX + self._filled
        return self._end - self._start

    @property
    def announced(self) -> int:
        """Size (prefix included) of the incomplete frame whose size prefix has arrived;
        0 when no such frame is under way."""
        if self._frame is not None:
            return SIZE_PREFIX + self._frame_size
        if self._end - self._start < SIZE_PREFIX or self.error is not None:
            return 0
        size: int = _SIZE.unpack_from(self._scratch, self._start)[0]
        return SIZE_PREFIX + size

    @property
    def allocated(self) -> int:
        """Bytes of the buffer the frame under way is received into (0 for the scratch)."""
        return 0 if self._frame is None else len(self._frame)

    def enlarge(self, scratch_size: int = SCRATCH_SIZE, growth_step: int = GROWTH_STEP) -> None:
        """Take the usual buffer sizes (a peer that authenticated): the growth step at
        once, the scratch buffer if nothing is pending in it."""
        self._growth_step = growth_step
        if self._frame is None and self._start == self._end and len(self._scratch) < scratch_size:
            self._scratch = bytearray(scratch_size)
            self._scratch_view = memoryview(self._scratch)
            self._small_frame = min(SMALL_FRAME, scratch_size - SIZE_PREFIX)
            self._start = self._end = 0

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._frame is not None:
            return self._frame[self._filled :]
        return self._scratch_view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """`nbytes` were written at the start of the last `get_buffer()`: the frames they
        complete, oldest first."""
        frame = self._frame
        if self.error is not None:
            return []
        if frame is not None:
            self._filled += nbytes
            if self._filled < self._frame_size:
                if self._filled == len(frame):
                    self._grow()
                return []
            self._frame = None
            return [frame]
        self._end += nbytes
        return self._split()

    def _split(self) -> list[Frame]:
        scratch = self._scratch
        start, end = self._start, self._end
        frames: list[Frame] = []
        need = SIZE_PREFIX  # bytes from `start` that the next step waits for
        while end - start >= SIZE_PREFIX:
            (size,) = _SIZE.unpack_from(scratch, start)
            self.error = self._check(size)
            if self.error is not None:
                start = end = 0
                break
            body = start + SIZE_PREFIX
            if end - body >= size:
                frames.append(memoryview(scratch[body : body + size]))
                start = body + size
                continue
            if size > self._small_frame:
                got = end - body
                frame = self._buffer(size, got + self._growth_step)
                frame[:got] = self._scratch_view[body:end]
                self._frame, self._frame_size, self._filled = frame, size, got
                start = end
            else:
                need = SIZE_PREFIX + size
            break
        if start == end:
            start = end = 0
        elif start + need > len(scratch):
            # The rest of a small frame would run past the scratch buffer: move what we
            # have of it (at most a small frame) to the front.
            scratch[: end - start] = self._scratch_view[start:end]
            start, end = 0, end - start
        self._start, self._end = start, end
        return frames

    def _grow(self) -> None:
        """The frame's buffer is full but the frame is not: move it to one twice as large
        (or to a free spare that holds the whole frame)."""
        old = self._frame
        assert old is not None
        frame = self._buffer(self._frame_size, 2 * len(old))
        frame[: self._filled] = old[: self._filled]
        self._frame = frame

    def _buffer(self, size: int, limit: int) -> memoryview:
        """Memory for (the start of) a large frame of `size` bytes: a spare buffer nobody
        holds any more, or a new one of at most `limit` bytes."""
        spares = self._spares
        for i in range(len(spares)):
            if len(spares[i]) >= size and sys.getrefcount(spares[i]) == _UNSHARED:
                return memoryview(spares[i])[:size]
        if size > limit:
            return memoryview(bytearray(limit))  # a step of a frame still arriving
        buf = bytearray(size + (size >> 3))  # room for the next, slightly larger frame
        if len(buf) <= MAX_SPARE_SIZE:
            for i in range(len(spares)):
                if sys.getrefcount(spares[i]) == _UNSHARED:
                    spares[i] = buf
                    break
            else:
                if len(spares) < SPARE_BUFFERS:
                    spares.append(buf)
        return memoryview(buf)[:size]

    def _check(self, size: int) -> ProtocolError | None:
        if size < 0:
            return ProtocolError(f"negative frame size {size}")
        if size > self.max_frame_size:
            return FrameTooLarge(
                f"frame of {size} bytes is larger than the maximum of {self.max_frame_size}"
            )
        if size < self.min_frame_size:
            return ProtocolError(
                f"frame of {size} bytes is shorter than the minimum of {self.min_frame_size}"
            )
        return None
