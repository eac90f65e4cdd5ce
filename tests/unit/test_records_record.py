"""One record body: encoding, decoding, sizes and malformed records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbus.records.batch import InvalidBatch
from logbus.records.record import (
    Record,
    decode_record,
    encode_record,
    size_of_record,
    write_record,
)
from logbus.records.varint import encode_varint

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=5).map(tuple)


def test_known_encoding() -> None:
    encoded = encode_record(1, 2, b"k", None, (("h", b"v"),))
    body = (
        b"\x00"  # attributes
        b"\x04"  # timestampDelta 2
        b"\x02"  # offsetDelta 1
        b"\x02k"  # key
        b"\x01"  # null value
        b"\x02"  # one header
        b"\x02h\x02v"
    )
    assert encoded == bytes([len(body) * 2]) + body


@given(
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**62), 2**62),
    key=nullable_bytes,
    value=nullable_bytes,
    record_headers=headers,
)
def test_round_trip(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    record_headers: tuple[tuple[str, bytes | None], ...],
) -> None:
    out = bytearray(b"prefix")
    write_record(out, offset_delta, timestamp_delta, key, value, record_headers)
    encoded = encode_record(offset_delta, timestamp_delta, key, value, record_headers)
    assert out[6:] == encoded
    assert len(encoded) == size_of_record(offset_delta, timestamp_delta, key, value, record_headers)
    record, end = decode_record(memoryview(bytes(out)), 6, 1000, 2**62)
    assert end == len(out)
    assert record == Record(
        1000 + offset_delta, 2**62 + timestamp_delta, key, value, record_headers
    )


def test_large_record_length_prefix() -> None:
    value = b"v" * 100_000
    encoded = encode_record(0, 0, None, value)
    record, end = decode_record(encoded, 0, 0, 0)
    assert record.value == value
    assert end == len(encoded)


def test_log_append_time_replaces_timestamps() -> None:
    encoded = encode_record(3, 50, b"k", b"v")
    record, _ = decode_record(encoded, 0, 10, 1000, log_append_time=7777)
    assert record.timestamp == 7777
    assert record.offset == 13


def test_header_key_bytes_that_are_not_utf8_survive_a_round_trip() -> None:
    raw_key = b"bad\xff"
    body = bytearray()
    body += b"\x00\x00\x00\x01\x01\x02"  # attributes, deltas, null key and value, 1 header
    body += encode_varint(len(raw_key)) + raw_key + b"\x01"
    encoded = encode_varint(len(body)) + body
    record, _ = decode_record(encoded, 0, 0, 0)
    ((header_key, header_value),) = record.headers
    assert header_value is None
    assert encode_record(0, 0, None, None, record.headers) == encoded
    assert header_key.encode("utf-8", "surrogateescape") == raw_key


def _body(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "cut short"),
        (encode_varint(3) + b"\x00\x00\x00", "impossible length"),
        (encode_varint(50) + b"\x00" * 10, "only 10 remain"),
        (_body(b"\x00\x00\x00", encode_varint(-2), b"\x01\x00"), "invalid key length -2"),
        (_body(b"\x00\x00\x00\x01", encode_varint(-3), b"\x00"), "invalid value length -3"),
        (_body(b"\x00\x00\x00", encode_varint(5), b"ab\x01\x00"), "key runs past"),
        (_body(b"\x00\x00\x00\x01", encode_varint(9), b"ab"), "value runs past"),
        (_body(b"\x00\x00\x00\x01\x01", encode_varint(-1)), "invalid header count -1"),
        (_body(b"\x00\x00\x00\x01\x01\x02", encode_varint(-1), b"\x01"), "header key length"),
        (_body(b"\x00\x00\x00\x01\x01\x02\x02h", encode_varint(-5)), "header value length"),
        (_body(b"\x00\x00\x00\x01\x01\x00", b"extra"), "fields take 6"),
        (_body(b"\x00\x00\x00\x01\x01\x04\x02h\x01"), "cut short|run past|runs past|fields"),
    ],
)
def test_malformed_records(data: bytes, message: str) -> None:
    with pytest.raises(InvalidBatch, match=message):
        decode_record(data, 0, 0, 0)


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_invalid_batch(data: bytes) -> None:
    try:
        _, end = decode_record(data, 0, 0, 0)
    except InvalidBatch:
        return
    assert end <= len(data)
