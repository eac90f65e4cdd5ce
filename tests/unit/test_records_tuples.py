"""`decode_record_tuples` (the consumer's fast batch decoder) reads exactly what
`decode_batch` reads, for any records, and rejects what it rejects."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_strategies import large_bytes

from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType
from logbus.records.reader import (
    build_record_tuples,
    decode_batch,
    decode_record_columns,
    decode_record_tuples,
    drop_before,
)


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]


def expected(raw: bytes, min_offset: int = 0) -> list[Rec]:
    header, records = decode_batch(raw)
    kind = 1 if header.is_log_append_time else 0
    return [Rec("t", 3, r.offset, r.timestamp, kind, r.key, r.value, r.headers)
            for r in records if r.offset >= min_offset]


def fast(raw: bytes, min_offset: int = 0) -> list[Rec]:
    return decode_record_tuples(raw, BatchHeader.parse(raw), Rec, "t", 3, min_offset=min_offset)


blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=70),
                  large_bytes)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                   max_size=2)
records = st.lists(
    st.builds(NewRecord, blobs, blobs, headers,
              st.one_of(st.none(), st.integers(0, 2**41))),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from(list(CompressionType)), st.booleans(),
       st.integers(0, 300), st.integers(0, 10))
def test_same_records_as_decode_batch(
    new: list[NewRecord], codec: CompressionType, log_append: bool, base: int, skip: int
) -> None:
    raw = build_batch(new, base_offset=base, compression=codec, log_append_time=log_append)
    assert fast(raw) == expected(raw)
    assert fast(raw, base + skip) == expected(raw, base + skip)


def test_offset_gaps_of_a_compacted_batch() -> None:
    from logbus.records.record import Record

    kept = [Record(10, 5, b"a", b"1"), Record(200, 6, None, b"2" * 100)]
    raw = build_batch(kept, base_offset=10, last_offset_delta=300)
    assert [(r.offset, r.value) for r in fast(raw)] == [(10, b"1"), (200, b"2" * 100)]


def test_corrupt_record_data_is_named() -> None:
    raw = bytearray(build_batch([NewRecord(b"k", b"v" * 10), NewRecord(None, b"w")]))
    raw[61] = 0x7E  # the first record's length: far past the batch's end
    with pytest.raises(InvalidBatch, match="record batch at offset 0: record at byte 0"):
        decode_record_tuples(bytes(raw), BatchHeader.parse(raw), Rec, "t", 0,
                             verify_crc=False)
    with pytest.raises(InvalidBatch, match="CRC32C mismatch"):
        decode_record_tuples(bytes(raw), BatchHeader.parse(raw), Rec, "t", 0)


def test_a_batch_of_more_than_8192_records_with_some_headers_between() -> None:
    # Offset deltas past 8191 take three varint bytes; records with headers (or huge
    # values, or empty keys) take the slow path in the middle of fast ones.
    new = []
    for i in range(9000):
        if i % 1000 == 7:
            new.append(NewRecord(b"k%d" % i, b"v", (("h", b"%d" % i),)))
        elif i % 1000 == 9:
            new.append(NewRecord(b"", b"x" * 20_000))
        elif i % 3 == 0:
            new.append(NewRecord(None, None))
        else:
            new.append(NewRecord(None, b"%d" % i))
    for log_append in (False, True):
        raw = build_batch(new, base_offset=40, log_append_time=log_append)
        assert fast(raw) == expected(raw)
        assert fast(raw, 8500) == expected(raw, 8500)


def test_columns_then_tuples_with_deserialized_keys_and_values() -> None:
    raw = build_batch([NewRecord(b"1", b"a"), NewRecord(None, b"b", (("h", None),)),
                       NewRecord(b"3", None)], base_offset=5)
    columns = decode_record_columns(raw, BatchHeader.parse(raw))
    assert columns.offsets == [5, 6, 7]
    assert columns.keys == [b"1", None, b"3"]
    assert columns.values == [b"a", b"b", None]
    assert columns.headers == [(), (("h", None),), ()]
    assert columns.timestamp_type == 0 and len(columns.timestamps) == 3
    out = build_record_tuples(Rec, "t", 3, drop_before(columns, 6),
                              key_deserializer=lambda k: None if k is None else int(k),
                              value_deserializer=lambda v: None if v is None else v.upper())
    assert [(r.offset, r.key, r.value, r.headers) for r in out] == [
        (6, None, b"B", (("h", None),)), (7, 3, None, ())]
    part = build_record_tuples(Rec, "t", 3, columns, start=1, stop=2)
    assert [(r.offset, r.key, r.headers) for r in part] == [(6, None, (("h", None),))]
    assert drop_before(columns, 5) is columns
