"""`decode_columns` reading runs of equal-sized records through strided numpy views
(`records.columnar_stride`) returns exactly what the per-record decoder
(`records.reader.decode_record_tuples`) returns, over batches that mix runs with
irregular records, and fails with the same `InvalidBatch` message on corrupted bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from columnar_rows import Row, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbus.records import columnar
from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar import decode_columns
from logbus.records.columnar_stride import MIN_RUN, find_runs
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_record_tuples
from logbus.records.record import Record

BASE_TIME = 1_700_000_000_000
# Lengths on both sides of the varint steps (63/64: one to two bytes, 8191/8192: two to
# three) for keys, values, and through them the record length.
LENGTHS = [0, 1, 5, 62, 63, 64, 65, 100, 120, 8191, 8192]
# Timestamp deltas on both sides of the same steps (zigzag: -64 and 63 take one byte).
DELTAS = [0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, 2**35]


def reference(
    raws: list[bytes], start: int, end: int | None, verify_crc: bool = True
) -> list[Row] | str:
    """The rows of `raws` in [start, end) by the per-record decoder, or its error."""
    rows: list[Row] = []
    try:
        for raw in raws:
            header = BatchHeader.parse(raw)
            for r in decode_record_tuples(raw, header, tuple, "", 0, min_offset=start,
                                          verify_crc=verify_crc):
                if end is None or r[2] < end:
                    rows.append(r[2:])
    except InvalidBatch as exc:
        return str(exc)
    return rows


def columns(
    raws: list[bytes], start: int, end: int | None, verify_crc: bool = True
) -> list[Row] | str:
    """The rows `decode_columns` reads, or its error: the same whether runs are looked
    for in batches of any size (as here) or only in long ones (as by default)."""
    results = []
    for min_run_batch in (0, columnar._MIN_RUN_BATCH):
        batches = [(raw, BatchHeader.parse(raw)) for raw in raws]
        default, columnar._MIN_RUN_BATCH = columnar._MIN_RUN_BATCH, min_run_batch
        try:
            results.append(rows_of(decode_columns(batches, min_offset=start, end_offset=end,
                                                  verify_crc=verify_crc)))
        except InvalidBatch as exc:
            results.append(str(exc))
        finally:
            columnar._MIN_RUN_BATCH = default
    assert results[0] == results[1]
    return results[0]


def blob(length: int | None, seed: int) -> bytes | None:
    return None if length is None else bytes((seed + i) % 251 for i in range(length))


# A stretch of records alike: how many, key and value lengths (None: null), the
# timestamp delta of each from the batch's first (constant, or growing by one), and
# whether they carry a header.
stretches = st.tuples(
    st.one_of(st.integers(1, 4), st.integers(5, 200)),
    st.one_of(st.none(), st.sampled_from(LENGTHS[:9])),
    st.one_of(st.none(), st.sampled_from(LENGTHS)),
    st.sampled_from(DELTAS),
    st.booleans(),
    st.integers(0, 20),  # 0: the stretch has a header on its first record
)


def batch_records(
    spec: list[tuple[int, int | None, int | None, int, bool, int]], gap_at: int | None,
    base: int,
) -> list[Any]:
    out: list[Any] = []
    offset = base
    for n, key_length, value_length, delta, growing, header_flag in spec:
        # Large values only in short stretches, so that batches stay small.
        if (value_length or 0) > 1000:
            n = min(n, 3)
        for i in range(n):
            stamp = BASE_TIME + delta + (i if growing else 0)
            if len(out) == 0:
                stamp = BASE_TIME  # the batch's base timestamp
            headers = [("h", b"v")] if header_flag == 0 and i == 0 else []
            key, value = blob(key_length, offset), blob(value_length, 7 * offset)
            if gap_at is not None and len(out) == gap_at:
                offset += 3  # a compacted batch: offset deltas skip
            out.append(Record(offset, stamp, key, value, tuple(headers)))
            offset += 1
    return out


batch_specs = st.tuples(
    st.lists(stretches, min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(0, 300)),  # where offsets jump, if anywhere
    st.sampled_from(list(CompressionType)),
    st.booleans(),  # LogAppendTime
)


def build(specs: list[Any], base: int) -> list[bytes]:
    raws = []
    for stretch_specs, gap_at, codec, log_append in specs:
        new = batch_records(stretch_specs, gap_at, base)
        raws.append(build_batch(new, base_offset=base, compression=codec,
                                log_append_time=log_append,
                                last_offset_delta=new[-1].offset - base))
        base = new[-1].offset + 1
    return raws


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs, min_size=1, max_size=4), st.integers(0, 2**40),
       st.integers(0, 400), st.integers(0, 400))
def test_mixed_batches_read_as_the_per_record_decoder_reads_them(
    specs: list[Any], base: int, skip: int, cut: int
) -> None:
    raws = build(specs, base)
    last = BatchHeader.parse(raws[-1]).last_offset
    assert columns(raws, 0, None) == reference(raws, 0, None)
    # An offset window cutting batches (and runs) part-way.
    start, end = base + skip, last + 1 - cut
    assert columns(raws, start, end) == reference(raws, start, end)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs, min_size=1, max_size=3), st.integers(0, 2**20),
       st.data(), st.booleans())
def test_corrupted_bytes_fail_or_read_as_the_per_record_decoder_says(
    specs: list[Any], base: int, data: st.DataObject, verify_crc: bool
) -> None:
    raws = build(specs, base)
    which = data.draw(st.integers(0, len(raws) - 1))
    raw = bytearray(raws[which])
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(61, len(raw) - 1))
        raw[position] = data.draw(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF,
                                                   raw[position] ^ 0x02]))
    raws[which] = bytes(raw)
    assert columns(raws, 0, None, verify_crc) == reference(raws, 0, None, verify_crc)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(st.integers(0, 8299), max_size=6), st.sampled_from([None, 0, 10]),
       st.sampled_from([50, 100]), st.sampled_from(list(CompressionType)),
       st.integers(0, 8400), st.integers(0, 8400))
def test_long_batches_across_the_offset_delta_steps(
    odd: set[int], key_length: int | None, value_length: int, codec: CompressionType,
    start: int, stop: int,
) -> None:
    # 8300 records: offset deltas take one, two, then three bytes (at 64 and 8192), and
    # the odd records (around any of them) break runs and send records elsewhere.
    if start % 2:
        odd |= {63, 64, 8191, 8192}
    new = [
        NewRecord(blob(key_length, i), blob(value_length + (i in odd), i), (), BASE_TIME)
        for i in range(8300)
    ]
    raws = [build_batch(new, base_offset=1000, compression=codec)]
    end = 1000 + max(start, stop)
    assert columns(raws, 1000 + min(start, stop), end) == reference(
        raws, 1000 + min(start, stop), end
    )


def test_regular_batches_are_read_in_runs() -> None:
    # What producers write (keyless 100-byte values, one timestamp) is all runs: one
    # per offset delta width.
    new = [NewRecord(None, blob(100, i), (), BASE_TIME) for i in range(9000)]
    raw = build_batch(new, base_offset=50)
    runs, done, pos = find_runs(memoryview(raw)[61:], 9000)
    assert [len(run.rows) for run in runs] == [64, 8192 - 64, 9000 - 8192]
    assert (done, pos) == (9000, len(raw) - 61)
    got = decode_columns([(raw, BatchHeader.parse(raw))] * 1, min_offset=60, end_offset=9040)
    assert rows_of(got) == reference([raw], 60, 9040)
    assert got.keys.null_count == len(got) == 8980
    # A longer batch after it: the runs' tables of expected offset deltas grow.
    new = [NewRecord(None, blob(10, i), (), BASE_TIME) for i in range(30_000)]
    raw = build_batch(new)
    runs, done, pos = find_runs(memoryview(raw)[61:], 30_000)
    assert [len(run.rows) for run in runs] == [64, 8192 - 64, 30_000 - 8192]
    assert rows_of(decode_columns([(raw, BatchHeader.parse(raw))])) == reference([raw], 0, None)


def test_runs_need_enough_records() -> None:
    new = [NewRecord(b"k", b"v", (), BASE_TIME) for _ in range(MIN_RUN - 1)]
    new.append(NewRecord(b"key", b"v", (), BASE_TIME))
    raw = build_batch(new)
    assert find_runs(memoryview(raw)[61:], len(new)) == ([], 0, 0)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_runs_joined_with_other_batches_keep_their_order(codec: CompressionType) -> None:
    # Regular and irregular batches in turn: runs, the generic path and the per-record
    # decoder (headers) each take some, and the columns come back in offset order.
    raws, base = [], 0
    for index in range(6):
        n = [300, 20, 500, 7, 100, 80][index]
        new = [
            NewRecord(blob(3, i) if index % 2 else None,
                      blob(40 + (i % 3 if index == 1 else 0), i),
                      [("h", None)] if index == 3 and i == 2 else (), BASE_TIME + i)
            for i in range(n)
        ]
        raws.append(build_batch(new, base_offset=base, compression=codec))
        base += n
    assert columns(raws, 0, None) == reference(raws, 0, None)
    assert columns(raws, 150, 900) == reference(raws, 150, 900)
    got = decode_columns([(raw, BatchHeader.parse(raw)) for raw in raws])
    assert got.offsets.tolist() == list(range(base))
    assert got.headers is not None and got.headers[320 + 500 + 2] == (("h", None),)


def test_values_over_a_whole_fetch_form_one_binary_array() -> None:
    new = [NewRecord(None, blob(100, i), (), BASE_TIME) for i in range(1000)]
    raws = [build_batch(new, base_offset=1000 * b) for b in range(4)]
    got = decode_columns([(raw, BatchHeader.parse(raw)) for raw in raws])
    assert got.values.type == pa.binary() and got.values.null_count == 0
    assert np.frombuffer(got.values.buffers()[1], np.int32)[-1] == 4000 * 100
    assert got.values.to_pylist() == [blob(100, i) for i in range(1000)] * 4


@pytest.mark.parametrize("delta", [1, 100])
@pytest.mark.parametrize("record", [0, 1, 40, 63, 64, 65, 150, 199])
def test_every_byte_of_a_run_corrupted(record: int, delta: int) -> None:
    # Each byte of one record inside a run (timestamp deltas of one or two bytes), set to
    # values that change a varint's width or sign: the run must end before it (or the
    # batch go elsewhere), never misread it.
    new = [NewRecord(b"k", b"value", (), BASE_TIME + delta) for _ in range(200)]
    good = build_batch(new, base_offset=7, base_timestamp=BASE_TIME)
    small = (len(build_batch(new[:64], base_timestamp=BASE_TIME)) - 61) // 64
    large = (len(good) - 61 - 64 * small) // (200 - 64)  # offset deltas of two bytes
    at = 61 + (record * small if record < 64 else 64 * small + (record - 64) * large)
    for position in range(at, at + (small if record < 64 else large)):
        for value in (0x00, 0x01, 0x02, 0x03, 0x7F, 0x80, 0x81, 0xFF, good[position] ^ 1):
            raw = bytearray(good)
            raw[position] = value
            raws = [bytes(raw)]
            assert columns(raws, 0, None, False) == reference(raws, 0, None, False), (
                position, value)
