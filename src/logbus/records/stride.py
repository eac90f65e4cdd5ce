"""Decoding runs of identically laid-out records with strided slices (the consumer's
fast path; `logbus.records.reader.decode_record_columns` is the entry point).

Clients write regular batches: no headers, keys all null (or all of one length),
values of one length, offset deltas 0, 1, 2, ... and small timestamp deltas. In a run
of records whose varints all have the same widths and whose key and value lengths are
equal, every record has the same size S, so byte k of every record of the run is one
C-level slice `data[start + k : stop : S]`. `decode_run` checks a whole run with a
handful of such slices (the length, attributes, key and value length and header count
bytes are constant; the offset deltas are exactly the run's indexes; the timestamp
deltas have the expected widths) and cuts keys and values with one slice per record.
It accepts only records that the per-record decoder reads the same way, and returns
the prefix of the run that passes; what is left (an irregular or malformed record)
goes to the per-record decoder, which also names what is wrong.
"""

from __future__ import annotations

from typing import NamedTuple

from logbus.records.varint import ZIGZAG_1, ZIGZAG_2, Buffer

# A run's offset deltas all have one width: 1 byte below 64, 2 below 8192, 3 below 2**20.
WIDTH_LIMITS = (1 << 6, 1 << 13, 1 << 20)
_MAX_VARINT_BYTES = 3
# Runs shorter than this are left to the per-record decoder (a run costs a few µs).
MIN_RUN = 6

# Byte translations: the low seven bits; 0 for a last varint byte (below 0x80);
# 0 for a continuation byte (0x80 and above).
_LOW_SEVEN = bytes(b & 0x7F for b in range(256))
_LAST_IS_ZERO = bytes(0 if b < 0x80 else 1 for b in range(256))
_MORE_IS_ZERO = bytes(1 if b < 0x80 else 0 for b in range(256))
_ZERO = b"\0"


class RunColumns(NamedTuple):
    """The columns of `length` consecutive records decoded by `decode_run`; `cut` says
    whether the run ended at a record that does not fit it (rather than at the limit,
    the data's end or an offset delta that takes one more byte)."""

    length: int
    cut: bool
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]


# The layout of a record without headers (`record_layout`), positions relative to its start:
# (size, positions of the bytes every record of a run shares, timestamp delta position,
# its width, offset delta position, its width, key position, key size (-1: null),
# value position, value size (-1: null)).
Layout = tuple[int, list[int], int, int, int, int, int, int, int, int]


def _length_field(data: Buffer, pos: int) -> tuple[int, int] | None:
    """(length, width) of the key or value length varint at `pos` (length -1: null), or
    None when it is longer than `_MAX_VARINT_BYTES` or negative other than -1 (left to
    the per-record decoder, which names the fault). Raises IndexError past the end."""
    b = data[pos]
    u, width = (b, 1) if b < 0x80 else _varint(data, pos)
    if width == 0 or (u & 1 and u != 1):
        return None
    return (-1 if u & 1 else u >> 1), width


def _varint(data: Buffer, pos: int) -> tuple[int, int]:
    """(unsigned value, width) of the varint at `pos`; width 0 if it is longer than
    `_MAX_VARINT_BYTES`. Raises IndexError past the data's end."""
    value = 0
    for width in range(_MAX_VARINT_BYTES):
        b = data[pos + width]
        value |= (b & 0x7F) << (7 * width)
        if b < 0x80:
            return value, width + 1
    return 0, 0


def record_layout(data: Buffer, pos: int) -> Layout | None:
    """The layout of the record at `pos`, or None if it is not one a run can hold (it
    has headers, a long varint, a negative length, or it is malformed). The attributes
    byte is not looked at: the per-record decoder ignores it too (no bits are in use)."""
    # One-byte varints are read inline: this runs once per run, and a run may be short.
    try:
        b = data[pos]
        length, lw = (b, 1) if b < 0x80 else _varint(data, pos)
        if lw == 0 or length & 1:
            return None
        size = lw + (length >> 1)
        if pos + size > len(data) or data[pos + size - 1] != 0:  # the header count
            return None
        constant = list(range(lw))
        constant.append(size - 1)
        timestamp_at = p = lw + 1
        b = data[pos + p]
        tw = 1 if b < 0x80 else _varint(data, pos + p)[1]
        if not 0 < tw <= 2:
            return None
        offset_at = p = p + tw
        b = data[pos + p]
        ow = 1 if b < 0x80 else _varint(data, pos + p)[1]
        if ow == 0:
            return None
        p += ow
        fields: list[tuple[int, int]] = []  # (position, size) of the key, then the value
        for _ in range(2):
            field = _length_field(data, pos + p)
            if field is None:
                return None
            field_size, width = field
            constant.extend(range(p, p + width))
            p += width
            fields.append((p, field_size))
            if field_size > 0:
                p += field_size
        (key_at, key_size), (value_at, value_size) = fields
        if p + 1 != size:
            return None
    except IndexError:
        return None
    return (size, constant, timestamp_at, tw, offset_at, ow, key_at, key_size, value_at,
            value_size)


def _offset_delta_bytes(width: int) -> tuple[bytes, ...]:
    """Byte j of the zigzag varint of every offset delta of `width` bytes, from the
    first such delta on (built from repeated patterns: no per-delta loop)."""
    low = WIDTH_LIMITS[width - 2] if width > 1 else 0
    high = WIDTH_LIMITS[width - 1]
    columns = []
    for j in range(width):
        more = 0x80 if j < width - 1 else 0
        # Byte j of zigzag(i) = 2i is bits 7j.. of 2i: each value repeats for 2**(7j-1)
        # consecutive deltas (byte 0 takes the even values 0..126 in turn).
        if j == 0:
            pattern = bytes(v | more for v in range(0, 0x80, 2))
        else:
            repeat = 1 << (7 * j - 1)
            pattern = b"".join(bytes([v | more]) * repeat for v in range(0x80))
        whole = pattern * (high // len(pattern) + 1)
        columns.append(whole[low:high])
    return tuple(columns)


_OFFSET_DELTAS: dict[int, tuple[bytes, ...]] = {}


def _expected_offset_deltas(width: int) -> tuple[bytes, ...]:
    found = _OFFSET_DELTAS.get(width)
    if found is None:
        found = _OFFSET_DELTAS[width] = _offset_delta_bytes(width)
    return found


def _equal_prefix(actual: bytes, expected: bytes) -> int:
    """How many leading bytes of two equally long strings agree (by bisection)."""
    if actual == expected:
        return len(actual)
    low, high = 0, len(actual)  # actual[:low] agrees, actual[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if actual[low:middle] == expected[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _slices(data: bytes, start: int, count: int, step: int, size: int) -> list[bytes | None]:
    """`count` slices of `size` bytes, `step` bytes apart from `start` on."""
    return [data[p : p + size] for p in range(start, start + count * step, step)]


class RunExtent(NamedTuple):
    """The records of a run found by `find_run`: `length` of them from byte `start` to
    `stop`, laid out as `layout` says; `cut` as in `RunColumns`. `last` and `first` are
    the last and first bytes of every record's timestamp delta (`first` is None when the
    deltas take one byte)."""

    length: int
    cut: bool
    stop: int
    layout: Layout
    last: bytes
    first: bytes | None


def _strided(data: Buffer, start: int, stop: int, step: int) -> bytes:
    """`data[start:stop:step]` as bytes (numpy copies a strided memoryview ten times
    faster than the memoryview itself)."""
    if isinstance(data, bytes):
        return data[start:stop:step]
    import numpy as np  # only here: the broker's produce path does not load numpy

    return np.frombuffer(data, np.uint8)[start:stop:step].tobytes()


def _same_prefix(column: bytes) -> int:
    """How many leading bytes of `column` equal its first (counting is several times
    faster than stripping when they all do)."""
    first = column[:1]
    if column.count(first) == len(column):
        return len(column)
    return len(column) - len(column.lstrip(first))


def find_run(data: Buffer, pos: int, index: int, limit: int) -> RunExtent | None:
    """The run of up to `limit` records from `pos` on, the first being record `index` of
    its batch, or None if fewer than `MIN_RUN` records at `pos` form one. Every record of
    a run is one the per-record decoder reads, with offset delta `index + i`: the bytes
    every record shares are checked a column at a time with strided slices."""
    layout = record_layout(data, pos)
    if layout is None:
        return None
    size, constant, timestamp_at, tw, offset_at, ow = layout[:6]
    if ow > len(WIDTH_LIMITS) or index >= WIDTH_LIMITS[ow - 1] or (
        ow > 1 and index < WIDTH_LIMITS[ow - 2]
    ):
        return None  # the first offset delta is not `index`, or not written minimally
    count = longest = min(limit, WIDTH_LIMITS[ow - 1] - index, (len(data) - pos) // size)
    if count < MIN_RUN:
        return None
    stop = pos + count * size
    for k in constant:
        count = _same_prefix(_strided(data, pos + k, stop, size))
        if count < MIN_RUN:
            return None
        stop = pos + count * size
    skip = index - (WIDTH_LIMITS[ow - 2] if ow > 1 else 0)
    for j, expected in enumerate(_expected_offset_deltas(ow)):
        column = _strided(data, pos + offset_at + j, stop, size)
        count = _equal_prefix(column, expected[skip : skip + count])
        if count < MIN_RUN:
            return None
        stop = pos + count * size
    at = pos + timestamp_at
    last = _strided(data, at + tw - 1, stop, size)
    if not last.isascii():
        count -= len(last.translate(_LAST_IS_ZERO).lstrip(_ZERO))
        if count < MIN_RUN:
            return None
        stop = pos + count * size
        last = last[:count]
    first = None
    if tw == 2:
        first = _strided(data, at, stop, size)
        count -= len(first.translate(_MORE_IS_ZERO).lstrip(_ZERO))
        if count < MIN_RUN:
            return None
        stop = pos + count * size
        first, last = first[:count], last[:count]
    return RunExtent(count, count < longest, stop, layout, last, first)


def timestamp_delta_low_bits(run: RunExtent) -> bytes | None:
    """The low seven bits of each record's two-byte timestamp delta (None for one-byte
    deltas, which `run.last` holds whole)."""
    return None if run.first is None else run.first.translate(_LOW_SEVEN)


def decode_run(
    data: bytes, pos: int, index: int, limit: int, base_timestamp: int
) -> tuple[RunColumns, int] | None:
    """Decode up to `limit` records from `pos` on, the first being record `index` of
    its batch, as one run; return its columns and the position after it, or None if
    fewer than `MIN_RUN` records at `pos` form a run. Offsets are not returned: record
    `index + i` of a run has offset delta `index + i`."""
    run = find_run(data, pos, index, limit)
    if run is None:
        return None
    count, last, stop = run.length, run.last, run.stop
    size, _, _, _, _, _, key_at, key_size, value_at, value_size = run.layout
    low = timestamp_delta_low_bits(run)
    if low is None:
        if last.count(0) == count:
            timestamps = [base_timestamp] * count
        else:
            # A table of the 128 possible timestamps pays for itself on a long run.
            table = [base_timestamp + delta for delta in ZIGZAG_1]
            timestamps = list(map(table.__getitem__, last))
    else:
        zigzag = ZIGZAG_2
        timestamps = [base_timestamp + zigzag[a | b << 7]
                      for a, b in zip(low, last, strict=True)]
    keys: list[bytes | None]
    values: list[bytes | None]
    if key_size < 0:
        keys = [None] * count
    else:
        keys = _slices(data, pos + key_at, count, size, key_size)
    if value_size < 0:
        values = [None] * count
    else:
        values = _slices(data, pos + value_at, count, size, value_size)
    return RunColumns(count, run.cut, timestamps, keys, values), stop
