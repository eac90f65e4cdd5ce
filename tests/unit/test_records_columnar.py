"""`decode_columns` (the column-wise decoder behind the Spark source) reads exactly what
`decode_batch` reads, for any records and any mix of batches, and rejects what it rejects."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from columnar_rows import Row, rows_of
from hypothesis import given, settings
from hypothesis import strategies as st
from record_strategies import large_bytes

from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar import decode_columns
from logbus.records.columnar_encode import (
    encode_batches,
    encode_columns,
    lengths_of,
    record_sizes,
)
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_batch


def expected(raws: list[bytes], start: int = 0, end: int | None = None) -> list[Row]:
    rows: list[Row] = []
    for raw in raws:
        header, records = decode_batch(raw)
        kind = 1 if header.is_log_append_time else 0
        rows.extend(
            (r.offset, r.timestamp, kind, r.key, r.value, r.headers)
            for r in records
            if r.offset >= start and (end is None or r.offset < end)
        )
    return rows




def columnar(raws: list[bytes], start: int = 0, end: int | None = None) -> list[Row]:
    batches = [(raw, BatchHeader.parse(raw)) for raw in raws]
    return rows_of(decode_columns(batches, min_offset=start, end_offset=end))


blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=70),
                  large_bytes)
some_headers = st.lists(
    st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
)
records = st.lists(
    st.builds(NewRecord, blobs, blobs,
              st.one_of(st.just(()), some_headers),
              st.one_of(st.none(), st.integers(0, 2**41))),
    min_size=0, max_size=8,
)
batch_specs = st.lists(
    st.tuples(records, st.sampled_from(list(CompressionType)), st.booleans()),
    min_size=1, max_size=4,
)


def build(specs: list[tuple[list[NewRecord], CompressionType, bool]], base: int) -> list[bytes]:
    raws = []
    for new, codec, log_append in specs:
        if not new:
            continue
        raws.append(build_batch(new, base_offset=base, compression=codec,
                                log_append_time=log_append))
        base += len(new)
    return raws


@settings(max_examples=200, deadline=None)
@given(batch_specs, st.integers(0, 300), st.integers(0, 12), st.integers(0, 12))
def test_same_records_as_decode_batch(
    specs: list[tuple[list[NewRecord], CompressionType, bool]], base: int, skip: int, cut: int
) -> None:
    raws = build(specs, base)
    assert columnar(raws) == expected(raws)
    total = sum(len(s[0]) for s in specs)
    start, end = base + skip, base + total - cut
    assert columnar(raws, start, end) == expected(raws, start, end)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)),
                          st.one_of(st.none(), st.binary(max_size=300))),
                min_size=1, max_size=200),
       st.sampled_from(list(CompressionType)))
def test_many_headerless_records_take_the_column_path(
    pairs: list[tuple[bytes | None, bytes | None]], codec: CompressionType
) -> None:
    # Offset and timestamp deltas past 63 take two varint bytes; keys and values mix nulls,
    # empties and lengths on both sides of the one-byte varint limit.
    new = [NewRecord(k, v, (), 1_700_000_000_000 + 97 * i) for i, (k, v) in enumerate(pairs)]
    raws = [build_batch(new, base_offset=1000, compression=codec)]
    result = decode_columns([(raws[0], BatchHeader.parse(raws[0]))])
    assert result.headers is None
    assert rows_of(result) == expected(raws)


def test_an_empty_record_set_gives_empty_columns() -> None:
    empty = build_batch([], base_offset=5, last_offset_delta=0)
    result = decode_columns([(empty, BatchHeader.parse(empty))])
    assert len(result) == 0 and rows_of(result) == []
    assert len(decode_columns([])) == 0


def test_large_records_across_many_batches() -> None:
    rng = random.Random(7)
    raws, base = [], 0
    for _ in range(20):
        new = [NewRecord(rng.randbytes(rng.randint(0, 20)) if rng.random() < 0.5 else None,
                         rng.randbytes(rng.randint(0, 20_000)))
               for _ in range(rng.randint(1, 30))]
        raws.append(build_batch(new, base_offset=base))
        base += len(new)
    assert columnar(raws) == expected(raws)
    assert columnar(raws, 17, base - 9) == expected(raws, 17, base - 9)


def corruptions() -> list[Any]:
    """One corrupted copy of a batch per (position, value), its id naming the change only:
    the batch holds the clock's time, and test ids must be the same in every collection
    (parallel workers collect separately and compare)."""
    good = build_batch([NewRecord(b"k", b"value"), NewRecord(None, b"v2")], base_offset=3)
    out = []
    for position in range(61, len(good)):
        for value in (0x00, 0x7F, 0x80, 0xFF, 0x01):
            raw = bytearray(good)
            raw[position] = value
            what = f"byte {position} = {value:#x}"
            out.append(pytest.param(what, bytes(raw), id=what))
    return out


@pytest.mark.parametrize(("what", "raw"), corruptions())
def test_rejects_what_decode_batch_rejects(what: str, raw: bytes) -> None:
    header = BatchHeader.parse(raw)
    try:
        want: list[Row] | str = expected([raw])
    except InvalidBatch as exc:
        want = str(exc)
    try:
        got: list[Row] | str = rows_of(decode_columns([(raw, header)], verify_crc=True))
    except InvalidBatch as exc:
        got = str(exc)
    assert got == want, what


@pytest.mark.parametrize("position", range(61, 80))
def test_rejects_malformed_records_with_the_crc_unchecked(position: int) -> None:
    # With the CRC unchecked the record bytes themselves are validated: whatever the
    # column path makes of them must be what the exact decoder makes of them.
    good = build_batch([NewRecord(b"k", b"value"), NewRecord(None, b"v2")], base_offset=3)
    for value in range(256):
        raw = bytearray(good)
        raw[position] = value
        header = BatchHeader.parse(raw)
        try:
            _, records = decode_batch(bytes(raw), verify_crc=False)
            want: list[Row] | str = [
                (r.offset, r.timestamp, 0, r.key, r.value, r.headers) for r in records
            ]
        except InvalidBatch as exc:
            want = str(exc)
        try:
            got: list[Row] | str = rows_of(
                decode_columns([(bytes(raw), header)], verify_crc=False, min_offset=-(2**63))
            )
        except InvalidBatch as exc:
            got = str(exc)
        assert got == want, (position, value)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(blobs, blobs), min_size=1, max_size=150),
       st.sampled_from(list(CompressionType)), st.integers(0, 2**41),
       st.sampled_from([(-1, -1, -1), (7, 0, 0), (2**40, 3, 2**31 - 5)]),
       st.integers(0, 3))
def test_encode_columns_writes_what_build_batch_writes(
    pairs: list[tuple[bytes | None, bytes | None]], codec: CompressionType, timestamp: int,
    producer: tuple[int, int, int], sliced: int,
) -> None:
    producer_id, epoch, sequence = producer
    want = build_batch([NewRecord(k, v, (), timestamp) for k, v in pairs],
                       compression=codec, producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=sequence)
    # Arrow arrays that are slices of larger ones (as Spark hands them over) encode alike.
    keys = pa.array([b"x"] * sliced + [k for k, _ in pairs], pa.binary()).slice(sliced)
    values = pa.array([None] * sliced + [v for _, v in pairs], pa.binary()).slice(sliced)
    got = encode_columns(keys, values, timestamp=timestamp, producer_id=producer_id,
                         producer_epoch=epoch, base_sequence=sequence, compression=codec)
    if codec == CompressionType.NONE:
        assert got == want
    assert decode_batch(got) == decode_batch(want)
    sizes = record_sizes(lengths_of(keys), lengths_of(values))
    if codec == CompressionType.NONE:
        assert 61 + int(sizes.sum()) == len(got)


def test_encode_columns_needs_records() -> None:
    with pytest.raises(ValueError, match="at least one"):
        encode_columns(pa.array([], pa.binary()), pa.array([], pa.binary()), timestamp=0)


@pytest.mark.parametrize("shape", ["equal", "alternating", "runs", "random"])
def test_record_starts_with_equal_and_unequal_sizes(shape: str) -> None:
    # Runs of equal-sized records (guessed and checked with numpy) mixed with records of
    # other sizes (stepped over one by one), across the 64 and 8192 offset delta steps.
    rng = random.Random(shape)
    sizes = {
        "equal": [100] * 9000,
        "alternating": [100, 101] * 300,
        "runs": [s for n in range(40) for s in [rng.randint(0, 200)] * rng.randint(1, 300)],
        "random": [rng.randint(0, 300) for _ in range(3000)],
    }[shape]
    new = [NewRecord(None, b"v" * size) for size in sizes]
    raws = [build_batch(new[i:i + 5000], base_offset=i) for i in range(0, len(new), 5000)]
    assert columnar(raws) == expected(raws)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(blobs, blobs), min_size=1, max_size=80), min_size=1,
                max_size=5),
       st.sampled_from(list(CompressionType)))
def test_encode_batches_writes_each_batch_as_build_batch_does(
    groups: list[list[tuple[bytes | None, bytes | None]]], codec: CompressionType
) -> None:
    pairs = [pair for group in groups for pair in group]
    got = encode_batches(pa.array([k for k, _ in pairs], pa.binary()),
                         pa.array([v for _, v in pairs], pa.binary()),
                         [len(group) for group in groups], timestamp=99, producer_id=5,
                         producer_epoch=1, base_sequences=[10 * i for i in range(len(groups))],
                         compression=codec)
    assert len(got) == len(groups)
    for index, (group, batch) in enumerate(zip(groups, got, strict=True)):
        want = build_batch([NewRecord(k, v, (), 99) for k, v in group], compression=codec,
                           producer_id=5, producer_epoch=1, base_sequence=10 * index)
        assert decode_batch(batch) == decode_batch(want)
