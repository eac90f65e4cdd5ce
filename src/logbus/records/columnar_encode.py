"""Encoding RecordBatch v2 records column-wise, from Arrow key and value arrays.

The entry points are `encode_batches` (many batches in one call) and `encode_columns`
(one batch). Records have no headers and one timestamp. The bytes around each key and
value (length, attributes, deltas, key and value lengths, header count) are computed for
all records at once with numpy. The records are then laid out in one buffer, with room
for each batch's 61-byte header before its records:

- records of one shape (the same key and value lengths and the same field widths; rows
  of fixed-size payloads are nearly all alike, as offset deltas change width only at 64
  and 8192) are copied a run at a time, as the rows and columns of a 2-D numpy view,
  so a run of thousands of records costs a few array copies;
- when records differ too often for runs to pay, Arrow's `take` gathers the pieces of
  every record (its fields, key, value length, value, header count) in order.

Each batch then gets its header and its CRC32C in place, and leaves as one copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logbus.records.batch import (
    _HEADER,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
)
from logbus.records.compression import CompressionType, compress
from logbus.records.crc32c import crc32c
from logbus.records.varint import encode_varint

Int64Array = npt.NDArray[np.int64]
_INT32_LIMIT = 2**31
# Widest bytes before a key: body length (5 bytes at most), attributes, timestamp delta,
# offset delta and key length (5 each at most); before a value: its length.
_BEFORE_KEY = 17
_BEFORE_VALUE = 5
# Runs pay while they hold this many records on average; below, Arrow's take is cheaper.
_MIN_RUN = 48


def _zigzag(values: Int64Array) -> npt.NDArray[np.uint64]:
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(raw: npt.NDArray[np.uint64]) -> Int64Array:
    size = np.ones(len(raw), np.int64)
    for bits in (7, 14, 21, 28):
        size += raw >= np.uint64(1 << bits)
    return size


def _put_varints(
    out: npt.NDArray[np.uint8], cursor: Int64Array, raw: npt.NDArray[np.uint64]
) -> None:
    """Write unsigned varints into row i of `out` at column cursor[i], advancing the
    cursors."""
    rows = np.arange(len(raw))
    while True:
        more = raw >= np.uint64(0x80)
        out[rows, cursor[rows]] = (raw & np.uint64(0x7F)) | (
            more.astype(np.uint64) << np.uint64(7)
        )
        cursor[rows] += 1
        if not more.any():
            return
        rows, raw = rows[more], raw[more] >> np.uint64(7)


def lengths_of(array: pa.Array) -> Int64Array:
    """Byte length of each element of a binary array, -1 for a null."""
    n = len(array)
    if array.null_count == n:
        return np.full(n, -1, np.int64)
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4)
    lengths = np.diff(offsets).astype(np.int64)
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(array.buffers()[0], np.uint8), bitorder="little")
        lengths[bits[array.offset : array.offset + n] == 0] = -1
    return lengths


def _record_bodies(
    key_lengths: Int64Array, value_lengths: Int64Array, deltas: Int64Array | None = None
) -> Int64Array:
    """The bytes each record's body takes (all but its length varint) as `encode_batches`
    writes it: offset `deltas` (by default from 0 by position), timestamp delta 0, no
    headers."""
    if deltas is None:
        deltas = np.arange(len(key_lengths), dtype=np.int64)
    return (
        3  # attributes, timestamp delta 0, header count 0
        + _varint_sizes(_zigzag(deltas))
        + _varint_sizes(_zigzag(key_lengths))
        + np.maximum(key_lengths, 0)
        + _varint_sizes(_zigzag(value_lengths))
        + np.maximum(value_lengths, 0)
    )


def record_sizes(
    key_lengths: Int64Array, value_lengths: Int64Array, *, first_delta: int = 0
) -> Int64Array:
    """The bytes each record takes in a batch `encode_batches` writes (key and value
    lengths as `lengths_of` gives them) when their offset deltas are first_delta,
    first_delta + 1, ... (and at most that when they are smaller)."""
    deltas = np.arange(first_delta, first_delta + len(key_lengths), dtype=np.int64)
    body = _record_bodies(key_lengths, value_lengths, deltas)
    return body + _varint_sizes(_zigzag(body))


def encode_columns(
    keys: pa.Array,
    values: pa.Array,
    *,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
) -> bytes:
    """One RecordBatch v2 (base offset 0, CRC filled in) holding a record per element of
    `keys` and `values` (binary arrays of equal length, nulls allowed), all with
    `timestamp` (CreateTime) and no headers: what `build_batch` writes for the same
    records."""
    return encode_batches(
        keys, values, [len(values)], timestamp=timestamp, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequences=[base_sequence],
        compression=compression, compression_level=compression_level,
    )[0].tobytes()


class _Fields:
    """The bytes around each record's key and value: `before_key[i, :key_at[i]]` (record
    length, attributes, timestamp delta, offset delta, key length) and
    `before_value[i, :value_at[i]]` (value length); a record ends with a header count 0."""

    def __init__(self, key_lengths: Int64Array, value_lengths: Int64Array,
                 deltas: Int64Array) -> None:
        n = len(key_lengths)
        body = _record_bodies(key_lengths, value_lengths, deltas)
        self.before_key = np.zeros((n, _BEFORE_KEY), np.uint8)
        self.key_at = np.zeros(n, np.int64)
        _put_varints(self.before_key, self.key_at, _zigzag(body))
        self.key_at += 2  # attributes 0, timestamp delta 0 (already zero)
        _put_varints(self.before_key, self.key_at, _zigzag(deltas))
        _put_varints(self.before_key, self.key_at, _zigzag(key_lengths))
        self.before_value = np.zeros((n, _BEFORE_VALUE), np.uint8)
        self.value_at = np.zeros(n, np.int64)
        _put_varints(self.before_value, self.value_at, _zigzag(value_lengths))
        self.sizes = (
            self.key_at + np.maximum(key_lengths, 0) + self.value_at
            + np.maximum(value_lengths, 0) + 1
        )


def _data(array: pa.Array) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int32]]:
    """A binary array's data buffer and its n + 1 offsets into it."""
    n = len(array)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, n + 1, array.offset * 4)
    data = buffers[2]
    return (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), offsets


def _spans_match(offsets: npt.NDArray[np.int32], lengths: Int64Array) -> bool:
    """Whether every null slot spans no bytes (Arrow allows it to): the slots span no
    more bytes in all than the values that are not null."""
    return int(offsets[-1]) - int(offsets[0]) == int(np.maximum(lengths, 0).sum())


def _delta_columns(run: npt.NDArray[np.uint8], column: int, first_delta: int,
                   width: int) -> None:
    """Write the offset deltas first_delta, first_delta + 1, ... (all `width` bytes long
    as varints) into the rows of `run` from `column`."""
    raw = np.arange(first_delta, first_delta + len(run), dtype=np.int64) << 1  # zigzag
    for byte in range(width):
        part = (raw >> (7 * byte)) & 0x7F
        if byte + 1 < width:
            part |= 0x80
        run[:, column + byte] = part


def _constant_columns(run: npt.NDArray[np.uint8], column: int, piece: bytes) -> int:
    """Write `piece` into every row of `run` from `column`; the column after it. (Numpy
    fills a column with a scalar much faster than it broadcasts a few bytes to rows.)"""
    for byte in piece:
        run[:, column] = byte
        column += 1
    return column


def _copy_columns(run: npt.NDArray[np.uint8], column: int, data: npt.NDArray[np.uint8],
                  at: int, width: int) -> int:
    """Copy len(run) consecutive `width`-byte items of `data` from `at` into the rows of
    `run` from `column`; the column after them."""
    if width:
        run[:, column : column + width] = data[at : at + len(run) * width].reshape(
            len(run), width
        )
    return column + width


# Offset deltas from which the varint of a delta (zigzag: twice the delta) is one byte
# wider.
_DELTA_STEPS = (64, 8192, 1 << 20, 1 << 27)


def _lay_out_runs(
    keys: pa.Array,
    values: pa.Array,
    key_lengths: Int64Array,
    value_lengths: Int64Array,
    firsts: Int64Array,
) -> tuple[npt.NDArray[np.uint8], list[int]] | None:
    """The batches' records (each batch after room for its header) laid out a run of
    records of one shape at a time, as the rows of a 2-D view, column by column, and
    where each batch starts; None when runs are too short to pay. In a run the key and
    value lengths and the width of the offset delta are the same, so every byte before a
    key or value but the delta's is the same in every record."""
    n = len(key_lengths)
    counts = np.diff(firsts)
    steps = [
        firsts[:-1][counts > step] + step for step in _DELTA_STEPS if (counts > step).any()
    ]
    changes = np.flatnonzero(
        (key_lengths[1:] != key_lengths[:-1]) | (value_lengths[1:] != value_lengths[:-1])
    ) + 1
    if (len(changes) + len(firsts)) * _MIN_RUN > n:
        return None
    key_data, key_offsets = _data(keys)
    value_data, value_offsets = _data(values)
    if not (_spans_match(key_offsets, key_lengths) and _spans_match(value_offsets, value_lengths)):
        return None
    run_firsts = np.unique(np.concatenate([firsts, changes, *steps])).tolist()
    batch_starts: list[int] = []
    plan: list[tuple[int, int, int, int, int, bytes, bytes, bytes, int]] = []
    position = 0
    batch = -1
    batch_firsts = firsts.tolist()
    for first, end in itertools.pairwise(run_firsts):
        if first == batch_firsts[batch + 1]:
            batch += 1
            batch_starts.append(position)
            position += HEADER_SIZE
        key_length, value_length = int(key_lengths[first]), int(value_lengths[first])
        key_bytes, value_bytes = max(key_length, 0), max(value_length, 0)
        delta = first - batch_firsts[batch]
        delta_width = 1 + sum(delta >= step for step in _DELTA_STEPS)
        key_prefix = encode_varint(key_length)
        value_prefix = encode_varint(value_length)
        body = 3 + delta_width + len(key_prefix) + key_bytes + len(value_prefix) + value_bytes
        head = encode_varint(body) + bytes(2)  # length, attributes 0, timestamp delta 0
        size = len(head) - 2 + body
        plan.append(
            (first, end, position, delta, delta_width, head, key_prefix, value_prefix, size)
        )
        position += (end - first) * size
    batch_starts.append(position)
    if position >= _INT32_LIMIT:
        raise ValueError("record batches must stay below 2 GiB in all")
    out = np.empty(position, np.uint8)
    for first, end, start, delta, delta_width, head, key_prefix, value_prefix, size in plan:
        m = end - first
        run = out[start : start + m * size].reshape(m, size)
        column = _constant_columns(run, 0, head)
        _delta_columns(run, column, delta, delta_width)
        column = _constant_columns(run, column + delta_width, key_prefix)
        key_bytes = int(key_offsets[first + 1] - key_offsets[first])
        column = _copy_columns(run, column, key_data, int(key_offsets[first]), key_bytes)
        column = _constant_columns(run, column, value_prefix)
        value_bytes = int(value_offsets[first + 1] - value_offsets[first])
        column = _copy_columns(run, column, value_data, int(value_offsets[first]), value_bytes)
        run[:, column] = 0  # header count
    return out, batch_starts


def _lay_out_take(
    keys: pa.Array,
    values: pa.Array,
    key_lengths: Int64Array,
    value_lengths: Int64Array,
    firsts: Int64Array,
) -> tuple[npt.NDArray[np.uint8], list[int]]:
    """`_lay_out_runs` for any records: Arrow gathers the pieces of every record (its
    fields, key, value length, value and header count) in order."""
    n = len(key_lengths)
    counts = np.diff(firsts)
    deltas = np.arange(n, dtype=np.int64) - np.repeat(firsts[:-1], counts)
    fields = _Fields(key_lengths, value_lengths, deltas)
    total = int(fields.sizes.sum()) + HEADER_SIZE * len(counts)
    if total >= _INT32_LIMIT:
        raise ValueError("record batches must stay below 2 GiB in all")
    pieces_data = np.concatenate(
        [
            fields.before_key[np.arange(_BEFORE_KEY) < fields.key_at[:, None]],
            fields.before_value[np.arange(_BEFORE_VALUE) < fields.value_at[:, None]],
            np.zeros(1, np.uint8),
        ]
    )
    offsets = np.zeros(2 * n + 2, np.int64)
    np.cumsum(np.concatenate([fields.key_at, fields.value_at, [1]]), out=offsets[1:])
    pieces = pa.Array.from_buffers(
        pa.binary(), 2 * n + 1,
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(pieces_data)],
    )
    laid = pa.concat_arrays([pieces, keys, values])
    records = np.arange(n, dtype=np.int64)
    order = np.empty((n, 5), np.int64)
    order[:, 0] = records  # before_key[i]
    order[:, 1] = 2 * n + 1 + records  # keys[i]
    order[:, 2] = n + records  # before_value[i]
    order[:, 3] = 3 * n + 1 + records  # values[i]
    order[:, 4] = 2 * n  # the header count
    taken = laid.take(pa.array(order.ravel()))
    taken_offsets = np.frombuffer(taken.buffers()[1], np.int32, len(taken) + 1, taken.offset * 4)
    data = np.frombuffer(taken.buffers()[2], np.uint8)
    out = np.empty(total, np.uint8)
    batch_starts: list[int] = []
    position = 0
    for first, end in zip(firsts[:-1].tolist(), firsts[1:].tolist(), strict=True):
        low, high = int(taken_offsets[5 * first]), int(taken_offsets[5 * end])
        batch_starts.append(position)
        position += HEADER_SIZE
        out[position : position + high - low] = data[low:high]
        position += high - low
    batch_starts.append(position)
    return out, batch_starts


def encode_batches(
    keys: pa.Array,
    values: pa.Array,
    counts: Sequence[int],
    *,
    timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequences: Sequence[int] | None = None,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    key_lengths: Int64Array | None = None,
    value_lengths: Int64Array | None = None,
) -> list[memoryview]:
    """`encode_columns` for many batches at once, so the work per batch is only its
    header, CRC and compression: the first counts[0] records make the first batch (with
    base sequence base_sequences[0]), and so on. The records must stay below 2 GiB in
    all. `key_lengths` and `value_lengths`, when the caller has them, are what
    `lengths_of` gives for the arrays. The batches are views of one buffer (uncompressed)
    or of one buffer each."""
    n = len(values)
    if len(keys) != n or sum(counts) != n or not all(c > 0 for c in counts):
        raise ValueError("a batch needs one key and one value per record, at least one")
    sequences = list(base_sequences) if base_sequences is not None else [NO_SEQUENCE] * len(
        counts
    )
    keys, values = keys.cast(pa.binary()), values.cast(pa.binary())
    if key_lengths is None:
        key_lengths = lengths_of(keys)
    if value_lengths is None:
        value_lengths = lengths_of(values)
    firsts = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=firsts[1:])
    laid = _lay_out_runs(keys, values, key_lengths, value_lengths, firsts)
    if laid is None:
        laid = _lay_out_take(keys, values, key_lengths, value_lengths, firsts)
    out, batch_starts = laid
    laid_out = memoryview(out)  # type: ignore[arg-type]  # numpy arrays export buffers
    codec = CompressionType(compression)
    batches: list[memoryview] = []
    for index, count in enumerate(counts):
        batch = laid_out[batch_starts[index] : batch_starts[index + 1]]
        if codec != CompressionType.NONE:
            part = compress(codec, batch[HEADER_SIZE:], compression_level)
            batch = memoryview(bytearray(HEADER_SIZE + len(part)))
            batch[HEADER_SIZE:] = part
        _HEADER.pack_into(
            batch, 0, 0, len(batch) - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, MAGIC_V2, 0,
            int(codec), count - 1, timestamp, timestamp, producer_id, producer_epoch,
            sequences[index], count,
        )
        crc = crc32c(batch[CRC_START:])
        batch[CRC_START - 4 : CRC_START] = crc.to_bytes(4, "big")
        batches.append(batch)
    return batches
