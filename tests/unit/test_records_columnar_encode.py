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

from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar_encode import (
    _lay_out_runs,
    _lay_out_take,
    encode_batches,
    lengths_of,
)
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_batch

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


def encoded(keys: pa.Array, values: pa.Array, groups: list[list[Pair]],
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
