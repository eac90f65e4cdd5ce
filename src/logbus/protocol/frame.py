"""Size-prefixed framing: every Kafka request and response is an int32 length and a body.

`FrameBuffer` is fed bytes as they arrive and yields complete frames; it never touches a
socket (the shape of h2's frame buffer).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from logbus.protocol.errors import ProtocolError

_SIZE = struct.Struct(">i")


class FrameTooLarge(ProtocolError):
    """A frame announces more bytes than the receiver accepts (socket.request.max.bytes)."""


class FrameBuffer:
    """Accumulates received bytes and splits them into frames (without the size prefix).

    Not safe to share between tasks: one per connection.
    """

    __slots__ = ("_buf", "max_frame_size")

    def __init__(self, max_frame_size: int) -> None:
        self._buf = bytearray()
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        buf = self._buf
        if len(buf) < 4:
            raise StopIteration
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < 0:
            raise ProtocolError(f"negative frame size {size}")
        if size > self.max_frame_size:
            raise FrameTooLarge(
                f"frame of {size} bytes is larger than the maximum of {self.max_frame_size}"
            )
        end = 4 + size
        if len(buf) < end:
            raise StopIteration
        frame = bytes(buf[4:end])
        del buf[:end]
        return frame
