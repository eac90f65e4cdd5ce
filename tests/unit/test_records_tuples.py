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
from logbus.records.reader import decode_batch, decode_record_tuples


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
