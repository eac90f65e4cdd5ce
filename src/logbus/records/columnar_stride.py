"""Runs of identically laid-out records found and decoded with strided numpy views (the
column decoder's fast path; `records.columnar.decode_columns` is the entry point).

This is the numpy counterpart of `records.stride`. In a run of records whose varints
all have the same widths and whose keys and values have one length each, every record
has the same size S, so the run is a (count, S) array laid over the batch's bytes
without copying and each field is a column of it. A run is checked with a few column
comparisons, on eight-byte words of each record read as uint64 columns: the bytes every
record of the run shares (length, key and value lengths, header count) equal the first
record's, the offset deltas are exactly the records' indexes in the batch (written
minimally) and the timestamp deltas have the first record's width. The records before
the first that fails form the run; the next run starts there. The per-record decoder
(`records.reader.decode_record_tuples`) reads such records the same way; records that
no run holds are left to `records.columnar`'s other paths.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from logbus.records.stride import WIDTH_LIMITS, record_layout
from logbus.records.varint import Buffer
from logbus.records.varint_arrays import ZIGZAG_2_ARRAY

Int64Array = npt.NDArray[np.int64]
Bytes2D = npt.NDArray[np.uint8]
# Shorter runs are left to the other decoders: checking a run costs a few numpy calls.
MIN_RUN = 8
_WORD = 8
_WORD_TYPE = np.dtype("<u8")


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
    if size < _WORD:
        return None  # records this small are left to the generic path
    # The shared bytes of the first records looked at in Python first: records of
    # varying sizes fail here, for much less than the numpy checks cost.
    for at in constant:
        column = pos + at
        if data[column : column + MIN_RUN * size : size] != bytes((data[column],)) * MIN_RUN:
            return None
    rows = buf[pos : pos + n * size].reshape(n, size)
    # Every byte to check is in some eight-byte word of each record, read as one strided
    # (unaligned) uint64 column: the offset delta in the first, whole.
    checks = dict.fromkeys(constant, 0xFF)
    checks[ts_at + ts_width - 1] = 0x80  # the timestamp delta's last byte: bit 7 clear
    if ts_width == 2:
        checks[ts_at] = 0x80  # its first: bit 7 set
    first_word = max(0, offset_at + offset_width - _WORD)
    words = [first_word]
    for at in sorted(checks):
        if not any(start <= at < start + _WORD for start in words):
            words.append(min(at, size - _WORD))
    expected = _offset_delta_words(offset_width, index + n)[index - low : index - low + n]
    ok: npt.NDArray[np.bool_] | None = None
    for start in words:
        # Copied once: numpy is several times slower on the unaligned view.
        word = np.ndarray((n,), _WORD_TYPE, buf, pos + start, (size,)).copy()
        mask = 0
        for at, bits in checks.items():
            if start <= at < start + _WORD:
                mask |= bits << (8 * (at - start))
        same = (word & np.uint64(mask)) == (word[0] & np.uint64(mask))
        if start == first_word:
            shift = np.uint64(8 * (offset_at - start))
            offset_deltas = (word >> shift) & np.uint64((1 << (8 * offset_width)) - 1)
            same &= offset_deltas == expected
            ts_word = word >> np.uint64(8 * (ts_at - start))
        ok = same if ok is None else ok & same
    assert ok is not None
    taken = n if ok.all() else int(np.argmin(ok))
    if taken < MIN_RUN:
        return None
    raw = ts_word[:taken] & np.uint64(0x7F if ts_width == 1 else 0x7F7F)
    timestamp_deltas: Int64Array
    if (raw == raw[0]).all():  # one timestamp for all (what producers mostly write)
        timestamp_deltas = np.full(taken, ZIGZAG_2_ARRAY[_low_bits(int(raw[0]))], np.int64)
    else:
        if ts_width == 2:
            raw = (raw & np.uint64(0x7F)) | ((raw >> np.uint64(1)) & np.uint64(0x7F << 7))
        timestamp_deltas = ZIGZAG_2_ARRAY[raw]
    return Run(rows[:taken], index, timestamp_deltas, key_at, key_size, value_at, value_size)


def _low_bits(raw: int) -> int:
    """The value of a varint of up to two bytes from its bytes (little-endian)."""
    return (raw & 0x7F) | ((raw >> 1) & (0x7F << 7))


_OFFSET_DELTAS: dict[int, npt.NDArray[np.uint64]] = {}


def _offset_delta_words(width: int, stop: int) -> npt.NDArray[np.uint64]:
    """The zigzag varint of every offset delta written in `width` bytes (as the bytes of
    a little-endian integer), from the smallest such delta on to below `stop` at least
    (kept, and grown as longer runs need it)."""
    low = WIDTH_LIMITS[width - 2] if width > 1 else 0
    found = _OFFSET_DELTAS.get(width)
    if found is None or low + len(found) < stop:
        have = 0 if found is None else len(found)
        high = min(WIDTH_LIMITS[width - 1], max(stop, low + 2 * have, 1 << 13))
        zigzag = 2 * np.arange(low, high, dtype=np.uint64)
        found = np.zeros(len(zigzag), np.uint64)
        for j in range(width):
            more = 0x80 if j < width - 1 else 0
            byte = ((zigzag >> np.uint64(7 * j)) & np.uint64(0x7F)) | np.uint64(more)
            found |= byte << np.uint64(8 * j)
        _OFFSET_DELTAS[width] = found
    return found
