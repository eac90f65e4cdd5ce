"""Record batch compression codecs: gzip, snappy, lz4 and zstd through `cramjam`.

`cramjam` is C/Rust-backed and releases the GIL, so callers may compress in a thread
pool. Framings follow what Kafka clients exchange:

- gzip: a standard gzip stream (several members are accepted when decompressing).
- snappy: the Java client writes xerial's block framing (a 16-byte header, then blocks of
  a big-endian int32 length and a raw snappy block); librdkafka may write one raw snappy
  block. `decompress` accepts both; `compress` writes xerial framing, which every client
  reads.
- lz4: the LZ4 frame format with independent 64 KiB blocks and no checksums, as the Java
  client writes it (Kafka's readers do not support linked blocks).
- zstd: a standard zstd frame.
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import Final

import cramjam

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """Kafka's codec ids, as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec for a `compression.type` value: none, gzip, snappy, lz4 or zstd."""
        try:
            return _BY_NAME[name.strip().lower()]
        except KeyError:
            known = ", ".join(_BY_NAME)
            raise ValueError(f"unknown compression type {name!r} (known: {known})") from None

    @property
    def config_name(self) -> str:
        """The name Kafka's `compression.type` setting uses for this codec."""
        return self.name.lower()


_BY_NAME: Final = {codec.name.lower(): codec for codec in CompressionType}
_DECOMPRESS_INTO: Final[dict[int, Callable[[Buffer, memoryview], int]]] = {
    CompressionType.GZIP: cramjam.gzip.decompress_into,
    CompressionType.LZ4: cramjam.lz4.decompress_into,
    CompressionType.ZSTD: cramjam.zstd.decompress_into,
}


class CompressionError(ValueError):
    """Data that does not decompress with the codec its batch names (the peer's fault)."""


# Defaults as in Kafka's producer (KIP-390): gzip 6 (java.util.zip's default), zstd 3.
GZIP_DEFAULT_LEVEL: Final = 6
ZSTD_DEFAULT_LEVEL: Final = 3

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE: Final = 32 * 1024
_INT32_BE: Final = struct.Struct(">i")

# LZ4 frame: magic, FLG (version 01, independent blocks, no block checksum, no content
# size, no content checksum), BD (64 KiB maximum block size), header checksum (second
# byte of xxh32 over FLG and BD).
_LZ4_FRAME_HEADER: Final = bytes.fromhex("04224d18604082")
_LZ4_BLOCK_SIZE: Final = 64 * 1024
_LZ4_UNCOMPRESSED_BIT: Final = 0x80000000
_LZ4_END_MARK: Final = b"\x00\x00\x00\x00"
_UINT32_LE: Final = struct.Struct("<I")


def compress(codec: CompressionType | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress `data` with `codec` in the framing Kafka clients expect.

    `level` is the codec's compression level (ignored by snappy and lz4); None means
    Kafka's producer default. CompressionType.NONE returns the data unchanged.
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        gzip_level = GZIP_DEFAULT_LEVEL if level is None else level
        return bytes(cramjam.gzip.compress(data, level=gzip_level))
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        return _lz4_frame_compress(data)
    if codec == CompressionType.ZSTD:
        zstd_level = ZSTD_DEFAULT_LEVEL if level is None else level
        return bytes(cramjam.zstd.compress(data, level=zstd_level))
    raise ValueError(f"unknown compression codec id {int(codec)}")


def decompress(codec: CompressionType | int, data: Buffer) -> bytes:
    """Decompress `data` written with `codec`; raise CompressionError if it is corrupt."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        if codec == CompressionType.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CompressionType.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        name = CompressionType(codec).config_name
        raise CompressionError(f"corrupt {name} data: {exc}") from None
    raise CompressionError(f"unknown compression codec id {int(codec)}")


def decompress_bounded(codec: CompressionType | int, data: Buffer, limit: int) -> memoryview:
    """Decompress `data` written with `codec` into at most `limit` bytes.

    The codec writes straight into a buffer that grows (the thread's last buffer, at
    least 1 MiB or four times the input, first; four times larger on each retry) up to
    `limit`, so a batch that would grow beyond it (a decompression bomb) costs `limit`
    bytes at most and raises CompressionError, as does corrupt data. The result is a
    view of a buffer this thread reuses: it is valid until the thread's next call.
    """
    if codec == CompressionType.NONE:
        if len(data) > limit:
            raise CompressionError(f"{len(data)} bytes exceed the limit of {limit}")
        return memoryview(data)
    into = _DECOMPRESS_INTO.get(codec)
    if into is None and codec != CompressionType.SNAPPY:
        raise CompressionError(f"unknown compression codec id {int(codec)}")
    kept: memoryview | None = getattr(_scratch_buffers, "buffer", None)
    size = min(max(_FIRST_OUTPUT, 4 * len(data), 0 if kept is None else len(kept)), limit)
    while True:
        out = kept[:size] if kept is not None and len(kept) >= size else _scratch(size)
        try:
            if into is None:
                return out[: _snappy_decompress_into(memoryview(data), out)]
            return out[: into(data, out)]
        except (cramjam.DecompressionError, CompressionError) as exc:
            if size >= limit:
                name = CompressionType(codec).config_name
                raise CompressionError(
                    f"corrupt {name} data, or more than {limit} bytes once decompressed: {exc}"
                ) from None
        size = min(4 * size, limit)


_FIRST_OUTPUT: Final = 1 << 20
# A buffer up to this size is kept for the thread's next batch (its pages stay mapped:
# a fresh buffer costs a page fault per 4 KiB written).
_KEPT_SCRATCH: Final = 8 << 20
_scratch_buffers = threading.local()


def _scratch(size: int) -> memoryview:
    """A writable buffer of exactly `size` bytes, reused by the thread when it can be."""
    kept: memoryview | None = getattr(_scratch_buffers, "buffer", None)
    if kept is not None and len(kept) >= size:
        return kept[:size]
    # Anonymous memory: its pages are mapped as they are written, nothing is zeroed ahead.
    fresh = memoryview(mmap.mmap(-1, max(size, _FIRST_OUTPUT)))
    if len(fresh) <= _KEPT_SCRATCH:
        _scratch_buffers.buffer = fresh
    return fresh[:size]


def _snappy_decompress_into(view: memoryview, out: memoryview) -> int:
    at = 0
    for block in _snappy_blocks(view):
        at += _snappy_block_into(block, out, at)
    return at


def _snappy_block_into(block: memoryview, out: memoryview, at: int) -> int:
    """Decompress one raw snappy block into `out` from `at` on; its size."""
    size = int(cramjam.snappy.decompress_raw_len(block))
    if at + size > len(out):
        raise CompressionError(f"snappy data grows past the limit of {len(out)} bytes")
    if size == 0:
        return 0
    return int(cramjam.snappy.decompress_raw_into(block, out[at : at + size]))


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        out += _INT32_BE.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    out = bytearray()
    for block in _snappy_blocks(memoryview(data)):
        out += cramjam.snappy.decompress_raw(block)
    return bytes(out)


def _snappy_blocks(view: memoryview) -> Iterator[memoryview]:
    """The raw snappy blocks of xerial framing, or the whole data if it is one raw block."""
    # Only the magic is checked: some writers get the version fields' byte order wrong.
    if len(view) < len(_XERIAL_HEADER) or view[: len(XERIAL_MAGIC)].tobytes() != XERIAL_MAGIC:
        yield view
        return
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if pos + 4 > len(view):
            raise CompressionError("snappy (xerial) block length cut short")
        (size,) = _INT32_BE.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CompressionError(f"snappy (xerial) block of {size} bytes runs past the data")
        yield view[pos : pos + size]
        pos += size


def _lz4_frame_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_LZ4_FRAME_HEADER)
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)
