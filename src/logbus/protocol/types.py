"""Primitive types of the Kafka protocol: readers take (buffer, position) and return
(value, new position); writers append to a `Writer`.

Readers raise `ProtocolError` for truncated or impossible input, never IndexError.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from logbus.protocol.errors import ProtocolError

Buffer = memoryview
Reader = Callable[[memoryview, int], tuple[Any, int]]

# A `records` field: decoded as a memoryview of the frame; encoded from bytes-like objects,
# file slices (anything with a `size`, sent as they are) or a sequence of those. Left open
# (Any) because the encoders take all of them and each handler knows which it holds.
Records = Any

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

# A chunk bigger than this is sent as its own piece instead of being copied into the buffer.
ZERO_COPY_THRESHOLD = 4096
# Array elements one request may hold in all (logbus's bound; Kafka has none). The largest
# legitimate requests stay far below it: a broker hosts at most max.broker.partitions
# (20,000) partitions and one CreateTopics creates at most 10,000.
REQUEST_ELEMENT_LIMIT = 200_000


def _fixed(s: struct.Struct) -> Reader:
    size = s.size
    unpack = s.unpack_from

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise ProtocolError("message truncated")
        return unpack(buf, pos)[0], pos + size

    return read


read_int8 = _fixed(INT8)
read_int16 = _fixed(INT16)
read_uint16 = _fixed(UINT16)
read_int32 = _fixed(INT32)
read_uint32 = _fixed(UINT32)
read_int64 = _fixed(INT64)
read_float64 = _fixed(FLOAT64)


def read_bool(buf: memoryview, pos: int) -> tuple[bool, int]:
    if pos >= len(buf):
        raise ProtocolError("message truncated")
    return buf[pos] != 0, pos + 1


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtocolError("message truncated inside a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def read_uuid(buf: memoryview, pos: int) -> tuple[UUID, int]:
    if pos + 16 > len(buf):
        raise ProtocolError("message truncated")
    return UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def _checked_end(buf: memoryview, pos: int, length: int) -> int:
    end = pos + length
    if end > len(buf):
        raise ProtocolError(f"length {length} runs past the end of the message")
    return end


def read_length(buf: memoryview, pos: int, compact: bool, wide: bool = False) -> tuple[int, int]:
    """A length or count prefix, -1 meaning null: a uvarint of n+1 when compact, else an
    int32 (`wide`: bytes, records, arrays) or an int16 (strings)."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    fixed = INT32 if wide else INT16
    if pos + fixed.size > len(buf):
        raise ProtocolError("message truncated")
    return fixed.unpack_from(buf, pos)[0], pos + fixed.size


def make_string_reader(compact: bool, nullable: bool) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[str | None, int]:
        n, pos = read_length(buf, pos, compact)
        if n < 0:
            if nullable:
                return None, pos
            raise ProtocolError("null string in a non-nullable field")
        end = _checked_end(buf, pos, n)
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError as exc:
            raise ProtocolError("string is not valid UTF-8") from exc

    return read


def make_bytes_reader(compact: bool, nullable: bool, as_view: bool) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[bytes | memoryview | None, int]:
        n, pos = read_length(buf, pos, compact, wide=True)
        if n < 0:
            if nullable:
                return None, pos
            raise ProtocolError("null bytes in a non-nullable field")
        end = _checked_end(buf, pos, n)
        return (buf[pos:end] if as_view else bytes(buf[pos:end])), end

    return read


class ElementBudget(threading.local):
    """How many more array elements the request being decoded on this thread may hold
    (None: no limit, as for responses). Set by `codec.decode_request`: one Python object
    per element costs far more than the byte or two it takes on the wire, so a small
    request of huge arrays must not turn into gigabytes and seconds of work."""

    remaining: int | None = None


ELEMENT_BUDGET = ElementBudget()


def make_array_reader(elem: Reader, compact: bool, nullable: bool) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
        n, pos = read_length(buf, pos, compact, wide=True)
        if n < 0:
            if nullable:
                return None, pos
            raise ProtocolError("null array in a non-nullable field")
        if n > len(buf) - pos:
            # every element takes at least one byte: a larger count is a lie
            raise ProtocolError(f"array count {n} exceeds the bytes left")
        budget = ELEMENT_BUDGET.remaining
        if budget is not None:
            if n > budget:
                raise ProtocolError(
                    f"request holds more than {REQUEST_ELEMENT_LIMIT} array elements"
                )
            ELEMENT_BUDGET.remaining = budget - n
        out: list[Any] = []
        append = out.append
        for _ in range(n):
            value, pos = elem(buf, pos)
            append(value)
        return out, pos

    return read


class Writer:
    """An output buffer that can splice in large chunks and file slices without copying.

    `chunks()` returns the pieces in order: bytes-like objects and any other object with a
    `size` attribute (a `FileSlice`), to be written or sent with `sendfile` by the caller.
    """

    __slots__ = ("_buf", "_chunks", "_size")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._chunks: list[Any] = []
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def pack(self, s: struct.Struct, value: Any) -> None:
        self._buf += s.pack(value)

    def uvarint(self, value: int) -> None:
        buf = self._buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def splice(self, piece: Any, size: int) -> None:
        """Append a large bytes-like object or a file slice as its own chunk."""
        if self._buf:
            self._chunks.append(bytes(self._buf))
            self._size += len(self._buf)
            self._buf = bytearray()
        self._chunks.append(piece)
        self._size += size

    def size(self) -> int:
        return self._size + len(self._buf)

    def chunks(self) -> list[Any]:
        if self._buf:
            self._chunks.append(bytes(self._buf))
            self._size += len(self._buf)
            self._buf = bytearray()
        return self._chunks

    def getvalue(self) -> bytes:
        """All the output as one bytes object (file slices are read)."""
        # join takes bytearrays and memoryviews as they are: a record batch is copied
        # once, into the result, not first into a bytes of its own.
        return b"".join([c.read() if hasattr(c, "read") else c for c in self.chunks()])


def write_length(w: Writer, n: int, compact: bool, wide: bool) -> None:
    """A length or count prefix (n=-1 for null): uvarint n+1 if compact, else int16/int32."""
    if compact:
        w.uvarint(n + 1)
    elif wide:
        w.pack(INT32, n)
    else:
        w.pack(INT16, n)


def records_size(value: Any) -> int:
    """Total size of a records value: bytes-like, a file slice, or a sequence of those."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, Sequence):
        return sum(records_size(v) for v in value)
    return int(value.size)


def write_records_body(w: Writer, value: Any) -> None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) > ZERO_COPY_THRESHOLD:
            w.splice(value, len(value))
        else:
            w.write(value)
    elif isinstance(value, Sequence):
        for piece in value:
            write_records_body(w, piece)
    else:
        w.splice(value, int(value.size))
