"""Compression codecs: names, round trips, the framings other clients write, corrupt data."""

from __future__ import annotations

import gzip
import importlib.util
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.records.compression import (
    XERIAL_MAGIC,
    CompressionError,
    CompressionType,
    compress,
    decompress,
)

ALL_CODECS = list(CompressionType)
SAMPLES = {
    "empty": b"",
    "one-byte": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 50,
    "random": os.urandom(5000),
    # Larger than snappy's 32 KiB and lz4's 64 KiB blocks, half incompressible.
    "multi-block": os.urandom(150_000) + b"a" * 150_000,
}


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("none", CompressionType.NONE),
        ("gzip", CompressionType.GZIP),
        ("snappy", CompressionType.SNAPPY),
        ("lz4", CompressionType.LZ4),
        ("zstd", CompressionType.ZSTD),
        ("ZSTD", CompressionType.ZSTD),
    ],
)
def test_from_name(name: str, codec: CompressionType) -> None:
    assert CompressionType.from_name(name) is codec
    assert codec.config_name == name.lower()


def test_ids_are_kafkas() -> None:
    assert [int(codec) for codec in ALL_CODECS] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name", ["brotli", "", "producer"])
def test_unknown_name_is_named_in_the_error(name: str) -> None:
    with pytest.raises(ValueError, match=repr(name)):
        CompressionType.from_name(name)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.config_name)
@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_round_trip(codec: CompressionType, sample: str) -> None:
    data = SAMPLES[sample]
    compressed = compress(codec, data)
    assert decompress(codec, compressed) == data
    assert decompress(codec, memoryview(bytearray(compressed))) == data
    assert decompress(int(codec), compressed) == data


@settings(max_examples=50)
@given(st.sampled_from(ALL_CODECS), st.binary(max_size=2000))
def test_round_trip_any_bytes(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
def test_levels(codec: CompressionType) -> None:
    data = SAMPLES["text"]
    assert decompress(codec, compress(codec, data, level=1)) == data
    assert decompress(codec, compress(codec, data, level=9)) == data


def test_unknown_codec_id() -> None:
    with pytest.raises(ValueError, match="codec id 6"):
        compress(6, b"x")
    with pytest.raises(CompressionError, match="codec id 6"):
        decompress(6, b"x")


@pytest.mark.parametrize("codec", ALL_CODECS[1:], ids=lambda c: c.config_name)
def test_corrupt_data_raises_compression_error(codec: CompressionType) -> None:
    compressed = bytearray(compress(codec, SAMPLES["text"]))
    with pytest.raises(CompressionError, match=codec.config_name):
        decompress(codec, bytes(compressed[: len(compressed) // 2]) + b"\xff" * 7)


# gzip


def test_gzip_interoperates_with_the_standard_library() -> None:
    data = SAMPLES["text"]
    assert gzip.decompress(compress(CompressionType.GZIP, data)) == data
    assert decompress(CompressionType.GZIP, gzip.compress(data, mtime=0)) == data


def test_gzip_accepts_several_members() -> None:
    members = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(CompressionType.GZIP, members) == b"abcdef"


# snappy


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    data = SAMPLES["multi-block"]
    compressed = compress(CompressionType.SNAPPY, data)
    assert compressed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(compressed):
        (size,) = struct.unpack_from(">i", compressed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(compressed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(compressed)
    assert [len(block) for block in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes() -> None:
    data = SAMPLES["text"]
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_ignores_the_byte_order_of_xerial_version_fields() -> None:
    data = b"hello snappy" * 10
    block = bytes(cramjam.snappy.compress_raw(data))
    framed = XERIAL_MAGIC + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(CompressionType.SNAPPY, framed) == data


@pytest.mark.parametrize(
    "tail", [b"\x00\x00", b"\x00\x00\x00\x09abc", b"\xff\xff\xff\xffabc"], ids=repr
)
def test_snappy_xerial_block_lengths_are_checked(tail: bytes) -> None:
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + tail
    with pytest.raises(CompressionError, match="xerial"):
        decompress(CompressionType.SNAPPY, framed)


@pytest.mark.skipif(not has_module("snappy"), reason="python-snappy not installed")
def test_snappy_matches_python_snappy() -> None:
    import snappy  # type: ignore[import-not-found]

    data = SAMPLES["text"]
    assert snappy.decompress(compress(CompressionType.SNAPPY, data)[20:]) == data
    assert decompress(CompressionType.SNAPPY, snappy.compress(data)) == data


# lz4


def test_lz4_frame_has_javas_header_and_independent_blocks() -> None:
    data = SAMPLES["multi-block"]
    compressed = compress(CompressionType.LZ4, data)
    # magic, FLG: version 1 + independent blocks, BD: 64 KiB, header checksum
    assert compressed[:7] == bytes.fromhex("04224d18604082")
    pos, chunks = 7, []
    while True:
        (size,) = struct.unpack_from("<I", compressed, pos)
        pos += 4
        if size == 0:
            break
        stored, size = size & 0x80000000, size & 0x7FFFFFFF
        block = compressed[pos : pos + size]
        pos += size
        if stored:
            chunks.append(block)
        else:
            # Each block decodes on its own: no block refers to an earlier one.
            expected = min(64 * 1024, len(data) - sum(map(len, chunks)))
            sized = struct.pack("<I", expected) + block
            chunks.append(bytes(cramjam.lz4.decompress_block(sized)))
    assert pos == len(compressed)
    assert b"".join(chunks) == data
    assert len(chunks) == 5


def test_lz4_reads_frames_with_linked_blocks_and_checksums() -> None:
    data = SAMPLES["multi-block"]
    for frame in (
        bytes(cramjam.lz4.compress(data)),
        bytes(cramjam.lz4.compress(data, level=9)),
    ):
        assert decompress(CompressionType.LZ4, frame) == data


@pytest.mark.skipif(not has_module("lz4"), reason="python lz4 not installed")
def test_lz4_matches_python_lz4() -> None:
    import lz4.frame  # type: ignore[import-not-found]

    data = SAMPLES["multi-block"]
    assert lz4.frame.decompress(compress(CompressionType.LZ4, data)) == data
    assert decompress(CompressionType.LZ4, lz4.frame.compress(data, block_linked=False)) == data


# zstd


def test_zstd_reads_streamed_frames_without_content_size() -> None:
    data = SAMPLES["multi-block"]
    compressor = cramjam.zstd.Compressor()
    compressor.compress(data)
    streamed = bytes(compressor.finish())
    assert decompress(CompressionType.ZSTD, streamed) == data


def test_zstd_reads_several_frames() -> None:
    frames = compress(CompressionType.ZSTD, b"abc") + compress(CompressionType.ZSTD, b"def")
    assert decompress(CompressionType.ZSTD, frames) == b"abcdef"


@pytest.mark.skipif(not has_module("zstandard"), reason="zstandard not installed")
def test_zstd_matches_zstandard() -> None:
    import zstandard  # type: ignore[import-not-found]

    data = SAMPLES["multi-block"]
    assert zstandard.ZstdDecompressor().decompress(compress(CompressionType.ZSTD, data)) == data
    assert decompress(CompressionType.ZSTD, zstandard.ZstdCompressor().compress(data)) == data
