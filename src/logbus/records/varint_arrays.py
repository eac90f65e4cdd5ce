"""The varints of many records at once, with numpy: the column decoder's and the record
validator's common ground (`records.columnar`, `records.validation_numpy`).

`record_fields` decodes every field of many records up to their header counts, for both.
`varints` decodes one zigzag varint (or varlong) at each of many positions with a few
array operations, accepting exactly what `records.varint.decode_varint` /
`decode_varlong` accept. `record_starts` finds where each record of a records section
starts by following their length varints: runs of equally sized records (what producers
write) are guessed and checked with numpy, other records are stepped over one at a time
by `records.varint`'s reference decoder.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from logbus.records.record import MIN_RECORD_BODY
from logbus.records.varint import ZIGZAG_2, VarintError, decode_varint

Int64Array = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
BoolArray = npt.NDArray[np.bool_]

VARINT_BYTES: Final = 5
VARLONG_BYTES: Final = 10
# A record is at least its length varint and the smallest body.
MIN_RECORD_SIZE: Final = 1 + MIN_RECORD_BODY
# `varint.ZIGZAG_2` as an array: the value of every one- or two-byte zigzag varint from
# its 14 bits (a run's timestamp deltas, `records.columnar_stride`).
ZIGZAG_2_ARRAY: Final[Int64Array] = np.array(ZIGZAG_2, np.int64)
_MAX_WINDOW = 1 << 16
_MAX_STEPS = 4096


def varints(
    buf: Bytes, pos: Int64Array, max_bytes: int
) -> tuple[Int64Array, Int64Array, BoolArray]:
    """Zigzag varints at `pos` (`max_bytes` 5: 32-bit varints, 10: 64-bit varlongs):
    (values, positions after them, which are well formed). Reading past the end of `buf`
    repeats its last byte: the caller checks that each field ends where it should."""
    limit = len(buf) - 1
    b = buf[np.minimum(pos, limit)].astype(np.uint64)
    raw = b & np.uint64(0x7F)
    size = np.ones(len(pos), np.int64)
    more = b >= 0x80
    for k in range(1, max_bytes):
        if not more.any():
            break
        b = buf[np.minimum(pos + k, limit)].astype(np.uint64)
        raw |= np.where(more, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0)).astype(
            np.uint64
        )
        size += more
        if k == max_bytes - 1:
            # The last byte allowed ends the varint and holds only the top bits: 4 of
            # a 32-bit value, 1 of a 64-bit one.
            top = 0x0F if max_bytes == VARINT_BYTES else 0x01
            more &= b > top
        else:
            more &= b >= 0x80
    ok = ~more
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, pos + size, ok


class RecordFields(NamedTuple):
    """The fields of many records up to their header counts, decoded at once by
    `record_fields`: where each record ends, its deltas, where its key and value start
    and their lengths (-1: null), its header count and where that count ends; `ok` says
    which records have well-formed fields that stay within the record (the headers and
    whether the fields fill the record are the caller's to check)."""

    end: Int64Array
    timestamp_delta: Int64Array
    offset_delta: Int64Array
    key_start: Int64Array
    key_length: Int64Array
    value_start: Int64Array
    value_length: Int64Array
    header_count: Int64Array
    after: Int64Array
    ok: BoolArray


def record_fields(buf: Bytes, starts: Int64Array) -> RecordFields:
    """The fields of the records at `starts`, read as `records.record.decode_record`
    reads them: the numpy walk the column decoder and the validator's numpy walker share."""
    length, p, ok = varints(buf, starts, VARINT_BYTES)
    end = p + length
    ok &= length >= MIN_RECORD_BODY
    p = p + 1  # attributes: no bit is in use, every value is read the same way
    timestamp_delta, p, good = varints(buf, p, VARLONG_BYTES)
    ok &= good
    offset_delta, p, good = varints(buf, p, VARINT_BYTES)
    ok &= good
    key_length, p, good = varints(buf, p, VARINT_BYTES)
    ok &= good & (key_length >= -1)
    key_start = p
    p = p + np.maximum(key_length, 0)
    ok &= p <= end
    value_length, p, good = varints(buf, p, VARINT_BYTES)
    ok &= good & (value_length >= -1)
    value_start = p
    p = p + np.maximum(value_length, 0)
    ok &= p <= end
    header_count, p, good = varints(buf, p, VARINT_BYTES)
    ok &= good & (header_count >= 0)
    return RecordFields(end, timestamp_delta, offset_delta, key_start, key_length,
                        value_start, value_length, header_count, p, ok)


def _record_size(data: bytes | memoryview, pos: int) -> int:
    """Bytes of the record at `pos` (its length varint included); 0 if that is no
    record (malformed length, or shorter than the smallest record). May raise
    IndexError."""
    b = data[pos]
    if b < 0x80:
        size = 1 + ((b >> 1) ^ -(b & 1))
    else:
        try:
            length, after = decode_varint(data, pos)
        except VarintError:
            return 0
        size = after - pos + length
    return size if size >= MIN_RECORD_SIZE else 0


def record_sizes_at(buf: Bytes, positions: Int64Array) -> Int64Array:
    """The sizes of the records at `positions` as `_record_size` reads them (0 where
    the length varint is malformed or too small)."""
    length, after, ok = varints(buf, positions, VARINT_BYTES)
    sizes = after - positions + length
    sizes[~ok | (sizes < MIN_RECORD_SIZE)] = 0
    return sizes


def _walk(data: bytes | memoryview, pos: int, count: int, starts: list[int]) -> int | None:
    """Step over `count` records from `pos`, noting where each starts; the position
    after them, or None at a malformed length. May raise IndexError."""
    append = starts.append
    for _ in range(count):
        append(pos)
        size = _record_size(data, pos)
        if not size:
            return None
        pos += size
    return pos


def record_starts(
    data: bytes | memoryview, buf: Bytes, bounds: list[tuple[int, int, int]]
) -> Int64Array | None:
    """Where each record starts (its length varint), for each (start, end, count) of
    `bounds` in turn: `count` records from `start` that exactly fill up to `end`. None
    when a length is malformed or the records do not fill their bounds exactly.

    Records of one size are common (fixed-size payloads; offset deltas change size only
    at 64 and 8192), so the next records are guessed to be the size of the one at hand and
    the guess checked with numpy, taking the records up to the first that differs. When
    guesses keep failing, records are stepped over one by one, in runs that double while
    guessing does not pay."""
    pieces: list[Int64Array] = []
    walked: list[int] = []
    window = 64
    run = 32
    try:
        for pos, end, count in bounds:
            if count * MIN_RECORD_SIZE > end - pos:
                return None  # more records than the bytes can hold
            done = 0
            while done < count:
                if pos >= end:
                    return None
                size = _record_size(data, pos)
                if not size:
                    return None
                k = min(count - done, window, (end - pos) // size)
                if k <= 0:
                    return None
                guess = pos + size * np.arange(k, dtype=np.int64)
                ok = record_sizes_at(buf, guess) == size
                taken = k if ok.all() else int(np.argmin(ok))
                if walked:
                    pieces.append(np.array(walked, np.int64))
                    walked.clear()
                pieces.append(guess[:taken])
                pos += taken * size
                done += taken
                if taken == k:
                    window = min(window * 4, _MAX_WINDOW)
                    run = 32
                    continue
                window = 64
                if taken < 16:
                    steps = min(run, count - done)
                    after = _walk(data, pos, steps, walked)
                    if after is None:
                        return None
                    pos = after
                    done += steps
                    run = min(run * 2, _MAX_STEPS)
            if pos != end:
                return None
    except IndexError:
        return None
    if walked:
        pieces.append(np.array(walked, np.int64))
    return np.concatenate(pieces) if pieces else np.empty(0, np.int64)
