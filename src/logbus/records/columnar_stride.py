"""Runs of identically laid-out records found and decoded with strided numpy views (the
column decoder's fast path; `records.columnar.decode_columns` is the entry point).

This is the numpy counterpart of `records.stride`. In a run of records whose varints
all have the same widths and whose keys and values have one length each, every record
has the same size S, so the run is a (count, S) array laid over the batch's bytes
without copying and each field is a column of it. A run is checked with a few column
comparisons: the bytes every record of the run shares (length, key and value lengths,
header count) equal the first record's, the offset deltas are exactly the records'
indexes in the batch (written minimally) and the timestamp deltas have the first
record's width. The records before the first that fails form the run; the next run
starts there. Such records are read the same way by the per-record decoder
(`records.reader.decode_record_tuples`), which takes whatever no run holds.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from logbus.records.stride import WIDTH_LIMITS, record_layout
from logbus.records.varint import Buffer

Int64Array = npt.NDArray[np.int64]
Bytes2D = npt.NDArray[np.uint8]
# Shorter runs are left to the other decoders: checking a run costs a few numpy calls.
MIN_RUN = 8
# The zigzag value of every one- and two-byte varint's low 15 bits (a timestamp delta).
_ZIGZAG = np.arange(1 << 15, dtype=np.int64)
_ZIGZAG = (_ZIGZAG >> 1) ^ -(_ZIGZAG & 1)


class Run(NamedTuple):
    """`len(rows)` consecutive records of one batch, record `first_index` of it first;
    `rows` is the (count, size) view of their bytes. Keys are `rows[:, key_at:key_at +
    key_size]` (all null when key_size is -1), values likewise."""

    rows: Bytes2D
    first_index: int
    timestamp_deltas: Int64Array
    key_at: int
    key_size: int
    value_at: int
    value_size: int


def find_runs(data: Buffer, count: int) -> tuple[list[Run], int, int]:
    """Runs holding the leading records of a batch's records part `data` (`count`
    records): the runs, how many records they hold and the byte position after them.
    Stops at the first record that does not start a run of at least `MIN_RUN`."""
    buf = np.frombuffer(data, np.uint8)
    runs: list[Run] = []
    pos = index = 0
    while index < count:
        run = _run_at(data, buf, pos, index, count - index)
        if run is None:
            break
        runs.append(run)
        index += len(run.rows)
        pos += run.rows.size
    return runs, index, pos


def _run_at(
    data: Buffer, buf: npt.NDArray[np.uint8], pos: int, index: int, limit: int
) -> Run | None:
    layout = record_layout(data, pos)
    if layout is None:
        return None
    size, constant, ts_at, ts_width, offset_at, offset_width, key_at, key_size, value_at, \
        value_size = layout
    if offset_width > len(WIDTH_LIMITS) or ts_width > 2:
        return None
    low = WIDTH_LIMITS[offset_width - 2] if offset_width > 1 else 0
    high = WIDTH_LIMITS[offset_width - 1]
    if not low <= index < high:
        return None  # the first offset delta cannot be `index` written minimally
    n = min(limit, high - index, (len(buf) - pos) // size)
    if n < MIN_RUN:
        return None
    rows = buf[pos : pos + n * size].reshape(n, size)
    first = rows[0]
    ok = rows[:, constant[0]] == first[constant[0]]
    for k in constant[1:]:
        ok &= rows[:, k] == first[k]
    for j, expected in enumerate(_offset_delta_bytes(offset_width)):
        ok &= rows[:, offset_at + j] == expected[index - low : index - low + n]
    last = rows[:, ts_at + ts_width - 1]
    ok &= last < 0x80
    raw: npt.NDArray[np.integer[Any]] = last
    if ts_width == 2:
        head = rows[:, ts_at]
        ok &= head >= 0x80
        raw = (head & 0x7F) | (last.astype(np.uint16) << 7)
    taken = n if ok.all() else int(np.argmin(ok))
    if taken < MIN_RUN:
        return None
    deltas = _ZIGZAG[raw[:taken]]
    return Run(rows[:taken], index, deltas, key_at, key_size, value_at, value_size)


_OFFSET_DELTAS: dict[int, tuple[npt.NDArray[np.uint8], ...]] = {}


def _offset_delta_bytes(width: int) -> tuple[npt.NDArray[np.uint8], ...]:
    """Byte j of the zigzag varint of every offset delta written in `width` bytes, from
    the smallest such delta on (made once per width)."""
    found = _OFFSET_DELTAS.get(width)
    if found is None:
        low = WIDTH_LIMITS[width - 2] if width > 1 else 0
        zigzag = 2 * np.arange(low, WIDTH_LIMITS[width - 1], dtype=np.int64)
        found = _OFFSET_DELTAS[width] = tuple(
            (((zigzag >> (7 * j)) & 0x7F) | (0x80 if j < width - 1 else 0)).astype(np.uint8)
            for j in range(width)
        )
    return found
