"""Runs of identically laid-out records as strided numpy views (the column decoder's fast
path; `records.columnar.decode_columns` is the entry point).

The runs are found by the one run detector, `records.stride.find_run` (the consumer's
list decoder and the validator's numpy walker use it too): in a run every record has the
same size S, the bytes every record shares, the offset deltas (exactly the records'
indexes in the batch) and the widths of the timestamp deltas are checked a column at a
time. Here each run becomes a (count, S) array laid over the batch's bytes without
copying, so that each key and value column is a slice of it, and its timestamp deltas
an array (`timestamp_deltas`, which the validator's numpy walker uses too). Records that
no run holds are left to `records.columnar`'s other paths.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from logbus.records.stride import MIN_RUN, RunExtent, find_run
from logbus.records.varint import Buffer
from logbus.records.varint_arrays import ZIGZAG_2_ARRAY

__all__ = ["MIN_RUN", "Run", "find_runs", "timestamp_deltas"]

Int64Array = npt.NDArray[np.int64]
Bytes2D = npt.NDArray[np.uint8]


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
        extent = find_run(data, pos, index, count - index)
        if extent is None:
            break
        size, _, _, _, _, _, key_at, key_size, value_at, value_size = extent.layout
        rows = buf[pos : extent.stop].reshape(extent.length, size)
        runs.append(Run(rows, index, timestamp_deltas(extent), key_at, key_size, value_at,
                        value_size))
        index += extent.length
        pos = extent.stop
    return runs, index, pos


def timestamp_deltas(run: RunExtent) -> Int64Array:
    """The timestamp delta of each record of `run`, from the bytes `find_run` read."""
    last = np.frombuffer(run.last, np.uint8)
    if run.first is None:
        if run.last.count(run.last[:1]) == len(run.last):  # what producers mostly write
            return np.full(len(last), ZIGZAG_2_ARRAY[last[0]], np.int64)
        return ZIGZAG_2_ARRAY[last]
    low = (np.frombuffer(run.first, np.uint8) & np.uint8(0x7F)).astype(np.int64)
    deltas: Int64Array = ZIGZAG_2_ARRAY[low | last.astype(np.int64) << 7]
    return deltas
