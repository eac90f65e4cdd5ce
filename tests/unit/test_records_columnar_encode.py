"""`encode_batches` writes exactly what `build_batch` writes, whichever way it lays the
records out: a run of equal-shaped records at a time (fixed-size payloads, thousands of
records per batch across the offset deltas where varints widen), or Arrow's gather."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.records import columnar_encode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar_encode import (
    _lay_out_runs,
    _lay_out_take,
    encode_batches,
    lengths_of,
    record_sizes,
)
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_batch
from logbus.records.varint import encode_varint

Pair = tuple[bytes | None, bytes | None]


def built(groups: list[list[Pair]], codec: CompressionType = CompressionType.NONE,
          first_sequence: int = 0) -> list[bytes]:
    out = []
    sequence = first_sequence
    for group in groups:
        out.append(build_batch([NewRecord(k, v, (), 7) for k, v in group], compression=codec,
                               producer_id=3, producer_epoch=2, base_sequence=sequence))
        sequence += len(group)
    return out


Column = pa.Array | pa.ChunkedArray


def encoded(keys: Column, values: Column, groups: list[list[Pair]],
            codec: CompressionType = CompressionType.NONE) -> list[bytes]:
    sequences = np.cumsum([0] + [len(g) for g in groups[:-1]]).tolist()
    return [bytes(b) for b in encode_batches(
        keys, values, [len(g) for g in groups], timestamp=7, producer_id=3, producer_epoch=2,
        base_sequences=sequences, compression=codec,
    )]


def check(groups: list[list[Pair]], codec: CompressionType = CompressionType.NONE) -> None:
    pairs = [pair for group in groups for pair in group]
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())
    got = encoded(keys, values, groups, codec)
    want = built(groups, codec)
    if codec == CompressionType.NONE:
        assert got == want
    else:
        assert [decode_batch(b) for b in got] == [decode_batch(b) for b in want]


def fixed(count: int, key: int | None, value: int | None, seed: int = 0) -> list[Pair]:
    def blob(i: int, size: int | None) -> bytes | None:
        return None if size is None else bytes((i * 7 + seed + j) % 256 for j in range(size))
    return [(blob(i, key), blob(i, value)) for i in range(count)]


@pytest.mark.parametrize(
    "groups",
    [
        # One batch across the offset deltas where the delta's varint widens (64, 8192).
        [fixed(9000, None, 100)],
        [fixed(9000, 16, 100)],
        # Several batches; each restarts its offset deltas.
        [fixed(700, None, 100), fixed(64, None, 100), fixed(65, None, 100), fixed(1, None, 1)],
        # Runs of other lengths, empty values, null values, empty and null keys.
        [fixed(200, 8, 10) + fixed(200, 8, 300) + fixed(100, None, 0) + fixed(100, 0, None)],
        # A record whose length varint is one byte, then two, then three.
        [fixed(100, None, 50) + fixed(100, None, 70) + fixed(100, None, 9000)],
    ],
    ids=["one-batch", "keys", "batches", "runs", "length-varints"],
)
def test_runs_of_equal_records_encode_as_build_batch_does(groups: list[list[Pair]]) -> None:
    check(groups)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_runs_compressed(codec: CompressionType) -> None:
    check([fixed(300, 4, 100), fixed(200, None, 100)], codec)


def test_slices_and_strings_encode_alike() -> None:
    # Spark hands over slices of larger arrays, and strings (written as their UTF-8).
    groups = [fixed(500, 3, 20)]
    pairs = groups[0]
    keys = pa.array([b"zz"] * 7 + [k for k, _ in pairs], pa.binary()).slice(7)
    values = pa.array(
        ["é" * 10] * 3 + [v.decode("latin-1") for _, v in pairs if v is not None], pa.string()
    ).slice(3)
    text_groups = [[(k, v.decode("latin-1").encode()) for k, v in pairs if v is not None]]
    assert encoded(keys, values, text_groups) == built(text_groups)


def test_null_slots_spanning_bytes() -> None:
    # Arrow lets a null slot span bytes of the data buffer; they are not the record's.
    data = b"aaaa" + b"XXXX" + b"bbbb" * 100
    offsets = np.array([0, 4, 8] + [8 + 4 * i for i in range(1, 101)], np.int32)
    validity = np.packbits(np.array([1, 0] + [1] * 100, np.uint8), bitorder="little")
    values = pa.Array.from_buffers(
        pa.binary(), 102, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=1,
    )
    keys = pa.nulls(102, pa.binary())
    groups = [[(None, b"aaaa"), (None, None)] + [(None, b"bbbb")] * 100]
    assert encoded(keys, values, groups) == built(groups)


run_specs = st.lists(
    st.tuples(st.integers(1, 200), st.one_of(st.none(), st.integers(0, 20)),
              st.one_of(st.none(), st.integers(0, 150))),
    min_size=1, max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(run_specs, st.lists(st.integers(1, 400), min_size=1, max_size=4))
def test_both_layouts_give_the_same_bytes(
    specs: list[tuple[int, int | None, int | None]], cuts: list[int]
) -> None:
    pairs = [pair for i, (count, k, v) in enumerate(specs) for pair in fixed(count, k, v, i)]
    counts = []
    left = len(pairs)
    for cut in cuts:
        if left <= cut:
            break
        counts.append(cut)
        left -= cut
    counts.append(left)
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())
    firsts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=firsts[1:])
    key_lengths, value_lengths = lengths_of(keys), lengths_of(values)
    taken, take_starts = _lay_out_take(keys, values, key_lengths, value_lengths, firsts)
    runs = _lay_out_runs(keys, values, key_lengths, value_lengths, firsts)
    if runs is not None:
        assert runs[1] == take_starts
        for start, end in itertools.pairwise(take_starts):
            # The header room before each batch is left for encode_batches to fill.
            assert runs[0][start + 61 : end].tobytes() == taken[start + 61 : end].tobytes()
    groups = []
    at = 0
    for count in counts:
        groups.append(pairs[at : at + count])
        at += count
    check(groups)


def reference_size(key_length: int, value_length: int, delta: int) -> int:
    """A record's bytes counted field by field with the varint encoder."""
    body = (
        2  # attributes, timestamp delta 0
        + len(encode_varint(delta))
        + len(encode_varint(key_length)) + max(key_length, 0)
        + len(encode_varint(value_length)) + max(value_length, 0)
        + 1  # header count 0
    )
    return len(encode_varint(body)) + body


# Lengths where a length field or (with the bytes around it) a record's length field
# widens, nulls, empties, and anything small.
some_lengths = st.one_of(
    st.sampled_from([-1, 0, 1, 55, 56, 57, 58, 59, 60, 63, 64, 65, 8180, 8186, 8187,
                     8191, 8192, 8193, (1 << 20) - 1, 1 << 20]),
    st.integers(-1, 300),
)


@st.composite
def length_columns(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Key and value lengths of as many records: any, or all equal (as a column of
    fixed-size payloads, or of null keys)."""
    n = draw(st.integers(1, 300))
    columns = []
    for _ in range(2):
        if draw(st.booleans()):
            columns.append([draw(some_lengths)] * n)
        else:
            columns.append(draw(st.lists(some_lengths, min_size=n, max_size=n)))
    return columns[0], columns[1]


@settings(max_examples=300, deadline=None)
@given(length_columns(),
       st.one_of(st.sampled_from([0, 1, 62, 63, 64, 8000, 8190, 8191, 8192, (1 << 20) - 7,
                                  (1 << 27) - 150]),
                 st.integers(0, 20000)))
def test_record_sizes_count_every_field(columns: tuple[list[int], list[int]],
                                        first_delta: int) -> None:
    key_lengths, value_lengths = columns
    sizes = record_sizes(np.array(key_lengths, np.int64), np.array(value_lengths, np.int64),
                         first_delta=first_delta)
    assert sizes.dtype == np.int64
    assert sizes.tolist() == [
        reference_size(k, v, first_delta + i)
        for i, (k, v) in enumerate(zip(key_lengths, value_lengths, strict=True))
    ]


def chunked(array: pa.Array, cuts: list[int]) -> pa.ChunkedArray:
    """`array` cut into chunks at `cuts` (empty chunks too, as Arrow allows)."""
    bounds = [0, *sorted(min(c, len(array)) for c in cuts), len(array)]
    return pa.chunked_array([array.slice(a, b - a) for a, b in itertools.pairwise(bounds)],
                            pa.binary())


@settings(max_examples=80, deadline=None)
@given(run_specs, st.lists(st.integers(1, 400), min_size=1, max_size=4),
       st.lists(st.integers(0, 800), max_size=4), st.lists(st.integers(0, 800), max_size=4))
def test_chunked_columns_encode_as_build_batch_does(
    specs: list[tuple[int, int | None, int | None]], cuts: list[int], key_cuts: list[int],
    value_cuts: list[int],
) -> None:
    # The producer hands over the pieces of many batches as chunks, cut apart from each
    # other and from the batches.
    pairs = [pair for i, (count, k, v) in enumerate(specs) for pair in fixed(count, k, v, i)]
    groups = []
    at = 0
    for cut in cuts:
        if len(pairs) - at <= cut:
            break
        groups.append(pairs[at : at + cut])
        at += cut
    groups.append(pairs[at:])
    keys = chunked(pa.array([k for k, _ in pairs], pa.binary()), key_cuts)
    values = chunked(pa.array([v for _, v in pairs], pa.binary()), value_cuts)
    assert encoded(keys, values, groups) == built(groups)


def test_single_record_batches_encode_as_build_batch_does() -> None:
    check([fixed(1, None, 100), fixed(1, 3, 0), fixed(1, None, None), fixed(1, 0, 64)] * 30)


@pytest.mark.parametrize(
    "groups",
    [
        # Lengths at the edges of their fields' widths.
        [fixed(130, None, 63) + fixed(130, None, 64) + fixed(70, 63, 8191)
         + fixed(70, 64, 8192)],
        # Records whose length field widens with their offset delta's, at delta 64.
        [fixed(150, None, v) for v in range(55, 61)],
        [fixed(150, 4, v) for v in range(50, 56)],
    ],
    ids=["length-edges", "record-length-widens", "keyed-record-length"],
)
def test_edges_in_runs_encode_as_build_batch_does(groups: list[list[Pair]]) -> None:
    pairs = [pair for group in groups for pair in group]
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())
    firsts = np.cumsum([0] + [len(group) for group in groups])
    assert _lay_out_runs(keys, values, lengths_of(keys), lengths_of(values), firsts)
    check(groups)


def test_gap_tables_grow_and_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tables of the bytes between records are kept per shape, grown as batches need more
    # rows, computed per run beyond _GAP_ROWS, and the oldest dropped beyond _GAP_BYTES.
    monkeypatch.setattr(columnar_encode, "_GAP_TABLES", {})
    monkeypatch.setattr(columnar_encode, "_GAP_ROWS", 150)
    monkeypatch.setattr(columnar_encode, "_GAP_BYTES", 3000)
    for count in (50, 100, 130, 400):
        check([fixed(count, None, 20), fixed(count, 5, 20, 1)])
    for value in range(30):
        check([fixed(100, None, value)])
    tables = columnar_encode._GAP_TABLES
    assert 0 < sum(t.nbytes for t in tables.values()) <= 3000
    assert len(tables) < 30  # one shape (width 1 and 2 tables) per value length
    assert all(len(t) <= 150 and not t.flags.writeable for t in tables.values())


@pytest.mark.parametrize("column", ["keys", "values"])
def test_null_slots_spanning_bytes_in_runs(column: str) -> None:
    # Runs of records copy their keys and values by the lengths, not the offsets: a
    # null slot spanning bytes of the data buffer (Arrow allows it) adds none.
    data = b"XXXX" * 60 + b"abcd" * 100
    offsets = np.array([4 * i for i in range(161)], np.int32)
    validity = np.packbits(np.array([0] * 60 + [1] * 100, np.uint8), bitorder="little")
    spanning = pa.Array.from_buffers(
        pa.binary(), 160, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=60,
    )
    other = pa.array([b"v"] * 160, pa.binary())
    pairs: list[Pair] = [(None, b"v")] * 60 + [(b"abcd", b"v")] * 100
    if column == "values":
        pairs = [(v, k) for k, v in pairs]
        keys, values = other, spanning
    else:
        keys, values = spanning, other
    groups = [pairs]
    assert _lay_out_runs(keys, values, lengths_of(keys), lengths_of(values), np.array([0, 160]))
    assert encoded(keys, values, groups) == built(groups)
