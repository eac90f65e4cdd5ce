"""The numpy walker of the record validator (`records.validation`): what checks the
records when the compiled walker (`records._validate`) is not built.

- runs of identically laid-out records (what producers write) are checked a whole run at
  a time on strided slices (`records.stride.find_run`, the run detector every fast path
  shares; their timestamp deltas read by `records.columnar_stride.timestamp_deltas`);
- the other records are found by following their length varints (`record_starts`:
  equal sizes guessed and checked with numpy) and every field of all of them is decoded
  at once with numpy by the column decoder's walk (`records.varint_arrays.record_fields`):
  lengths, timestamp and offset deltas, key and value lengths, header counts; then each
  header, one header index at a
  time for all records that have that many (a few records with very many headers are left
  to the reference decoder);
- fewer than 128 records left over are read by the reference decoder.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import numpy as np

from logbus.records.batch import InvalidBatch
from logbus.records.columnar_stride import timestamp_deltas
from logbus.records.record import decode_record
from logbus.records.stride import MIN_RUN, RunExtent, find_run
from logbus.records.validation import InvalidRecords, Walked, name_fault
from logbus.records.varint import ZIGZAG_1
from logbus.records.varint_arrays import (
    VARINT_BYTES,
    BoolArray,
    Bytes,
    Int64Array,
    record_fields,
    record_starts,
    varints,
)

# Fewer records than this, left over by the runs, are read by the reference decoder: a
# numpy pass costs a fixed ~100 us, about what it spends on so many records.
_MIN_NUMPY_RECORDS: Final = 128
# Headers are decoded one header index at a time for all records that have that many
# while at least this many records remain; the rest go to the reference decoder.
_MIN_HEADER_ROWS: Final = 32
_SMALL_BATCH: Final = 1 << 16
_KEY_SIZE: Final = 7  # where a run's layout holds its key size (-1: null keys)
# One-byte varints translated to their value + 64 (bytes that sort as the values do).
_ZIGZAG_ORDER: Final = bytes(v + 64 for v in ZIGZAG_1) + bytes(0x80)
_SMALL_RUN: Final = 512


def walk(view: memoryview, count: int, want_keyless: bool) -> Walked:
    """The records section `view` of `count` records (at least one, and no more than its
    bytes can hold), checked with numpy. Raises InvalidRecords, naming the first bad
    record."""
    lows: list[int] = []  # the smallest and largest timestamp delta of each part
    highs: list[int] = []
    keyless: list[Int64Array] = []
    done = pos = 0
    if count >= MIN_RUN:
        # Strided slices of bytes cost less than numpy's gathers on small batches.
        source: bytes | memoryview = bytes(view) if len(view) <= _SMALL_BATCH else view
        while done < count:
            run = find_run(source, pos, done, count - done)
            if run is None:
                break
            low, high = _timestamp_range(run)
            lows.append(low)
            highs.append(high)
            if want_keyless and run.layout[_KEY_SIZE] < 0:
                keyless.append(np.arange(done, done + run.length))
            done += run.length
            pos = run.stop
    if done < count:
        if count - done < _MIN_NUMPY_RECORDS:
            rest = _check_each(view, pos, done, count)
        else:
            rest = _check_generic(view, pos, done, count)
        lows.append(rest.min_delta)
        highs.append(rest.max_delta)
        if want_keyless:
            keyless.append(rest.keyless)
    elif pos != len(view):
        raise InvalidRecords(f"{len(view) - pos} bytes follow the {count} records")
    found: list[int] = np.concatenate(keyless).tolist() if keyless else []
    return Walked(min(lows), max(highs), found)


def _timestamp_range(run: RunExtent) -> tuple[int, int]:
    """The smallest and largest timestamp delta of a run's records."""
    last = run.last
    if run.first is None:
        if last.count(last[:1]) == len(last):  # what producers mostly write
            delta = ZIGZAG_1[last[0]]
            return delta, delta
        if len(last) <= _SMALL_RUN:
            # bytes whose order is the deltas' order, compared in C
            ordered = last.translate(_ZIGZAG_ORDER)
            return min(ordered) - 64, max(ordered) - 64
    deltas = timestamp_deltas(run)
    return int(deltas.min()), int(deltas.max())


class _Generic(NamedTuple):
    min_delta: int
    max_delta: int
    keyless: Int64Array


def _check_generic(view: memoryview, pos: int, first: int, count: int) -> _Generic:
    """Records `first` to `count - 1`, from byte `pos` to the end of `view`, all at once."""
    buf = np.frombuffer(view, np.uint8)
    n = count - first
    starts = record_starts(view, buf, [(pos, len(view), n)])
    if starts is None:
        raise name_fault(view, pos, first, count)
    fields = record_fields(buf, starts)
    p, end, header_count = fields.after, fields.end, fields.header_count
    ok = fields.ok & (fields.offset_delta == np.arange(first, count, dtype=np.int64))
    with_headers = np.flatnonzero(ok & (header_count > 0))
    if len(with_headers):
        _check_headers(view, buf, with_headers, p, end, header_count, ok, starts)
    ok &= p == end
    if not ok.all():
        bad = int(np.argmin(ok))
        raise name_fault(view, int(starts[bad]), first + bad, count)
    return _Generic(
        int(fields.timestamp_delta.min()),
        int(fields.timestamp_delta.max()),
        np.flatnonzero(fields.key_length < 0) + first,
    )


def _check_each(view: memoryview, pos: int, first: int, count: int) -> _Generic:
    """Records `first` to `count - 1`, a few, read one by one by the reference decoder."""
    stamps: list[int] = []
    keyless: list[int] = []
    end = len(view)
    for index in range(first, count):
        if pos >= end:
            raise name_fault(view, pos, index, count)
        try:
            record, pos = decode_record(view, pos, 0, 0)
        except InvalidBatch:
            raise name_fault(view, pos, index, count) from None
        if record.offset != index:
            raise name_fault(view, pos, index, count)
        stamps.append(record.timestamp)
        if record.key is None:
            keyless.append(index)
    if pos != end:
        raise InvalidRecords(f"{end - pos} bytes follow the {count} records")
    return _Generic(min(stamps), max(stamps), np.array(keyless, np.int64))


def _check_headers(
    view: memoryview,
    buf: Bytes,
    rows: Int64Array,
    p: Int64Array,
    end: Int64Array,
    header_count: Int64Array,
    ok: BoolArray,
    starts: Int64Array,
) -> None:
    """Walk the headers of the records `rows` (all at once, one header index at a time),
    clearing `ok` for a malformed record and moving `p` past the headers of good ones."""
    at = p[rows]
    stop = end[rows]
    left = header_count[rows]
    while len(rows) >= _MIN_HEADER_ROWS:
        key_length, at, good = varints(buf, at, VARINT_BYTES)
        good &= key_length >= 0
        at = at + np.maximum(key_length, 0)
        value_length, at, fine = varints(buf, at, VARINT_BYTES)
        good &= fine & (value_length >= -1)
        at = at + np.maximum(value_length, 0)
        good &= at <= stop
        left = left - 1
        ok[rows[~good]] = False
        finished = good & (left == 0)
        p[rows[finished]] = at[finished]
        more = good & (left > 0)
        rows, at, stop, left = rows[more], at[more], stop[more], left[more]
    # The few records left with many headers: the reference decoder reads them.
    for row in rows.tolist():
        try:
            _, after = decode_record(view, int(starts[row]), 0, 0)
        except InvalidBatch:
            ok[row] = False
        else:
            p[row] = after
