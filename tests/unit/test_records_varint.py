"""Zigzag and unsigned varints: known vectors, round trips, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from logbus.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    VarintError,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)

int32 = st.integers(INT32_MIN, INT32_MAX)
int64 = st.integers(INT64_MIN, INT64_MAX)
uint32 = st.integers(0, UINT32_MAX)

SIGNED_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), SIGNED_VECTORS)
def test_signed_vectors(value: int, hex_bytes: str) -> None:
    encoded = bytes.fromhex(hex_bytes)
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varlong(encoded) == (value, len(encoded))


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX) == bytes.fromhex("feffffffffffffffff01")
    assert encode_varlong(INT64_MIN) == bytes.fromhex("ffffffffffffffffff01")
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01")) == (INT64_MIN, 10)


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (UINT32_MAX, "ffffffff0f")],
)
def test_unsigned_vectors(value: int, hex_bytes: str) -> None:
    encoded = bytes.fromhex(hex_bytes)
    assert encode_unsigned_varint(value) == encoded
    assert decode_unsigned_varint(encoded) == (value, len(encoded))


@given(int32, st.binary(max_size=8))
def test_varint_round_trip(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    out = bytearray(prefix)
    write_varint(out, value)
    assert out == prefix + encoded
    assert decode_varint(memoryview(out + b"tail"), len(prefix)) == (value, len(out))


@given(int64)
def test_varlong_round_trip_and_matches_kafka_python(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value)
    out = bytearray()
    write_varlong(out, value)
    assert out == encoded
    assert decode_varlong(encoded) == (value, len(encoded))
    theirs = bytearray()
    kafka_util.encode_varint(value, theirs.append)
    assert bytes(theirs) == encoded
    assert kafka_util.decode_varint(encoded, 0) == (value, len(encoded))


@given(uint32)
def test_unsigned_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value)
    out = bytearray(b"x")
    write_unsigned_varint(out, value)
    assert out == b"x" + encoded
    assert decode_unsigned_varint(bytes(out), 1) == (value, len(out))


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_varint_rejects_values_outside_int32(value: int) -> None:
    with pytest.raises(ValueError, match="32-bit"):
        encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_varlong_rejects_values_outside_int64(value: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        encode_varlong(value)


@pytest.mark.parametrize("value", [-1, UINT32_MAX + 1])
def test_unsigned_varint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="cannot hold"):
        encode_unsigned_varint(value)


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_varint, b"", "cut short"),
        (decode_varint, b"\x80\x80", "cut short"),
        (decode_varint, b"\x80\x80\x80\x80\x80\x00", "longer than 5 bytes"),
        (decode_varint, b"\xff\xff\xff\xff\x1f", "overflows 32 bits"),
        (decode_unsigned_varint, b"\xff\xff\xff\xff\x7f", "overflows 32 bits"),
        (decode_unsigned_varint, b"", "cut short"),
        (decode_varlong, b"\x80" * 10 + b"\x00", "longer than 10 bytes"),
        (decode_varlong, b"\xff" * 9 + b"\x03", "overflows 64 bits"),
        (decode_varlong, b"\xff", "cut short"),
    ],
)
def test_malformed_input(decode: object, data: bytes, message: str) -> None:
    assert callable(decode)
    with pytest.raises(VarintError, match=message):
        decode(data, 0)


@given(st.binary(max_size=12), st.integers(0, 12))
def test_arbitrary_bytes_decode_or_raise_varint_error(data: bytes, pos: int) -> None:
    for decode in (decode_varint, decode_varlong, decode_unsigned_varint):
        try:
            value, end = decode(data, pos)
        except VarintError:
            continue
        assert pos < end <= len(data)
        assert isinstance(value, int)
