"""Encoding RecordBatch v2 records column-wise, from Arrow key and value arrays.

The entry points are `encode_batches` (many batches in one call) and `encode_columns`
(one batch); keys and values may be Arrow arrays or chunked arrays (the pieces of many
batches are encoded without being joined first). Records have no headers and one
timestamp. The records are laid out in one buffer, with room for each batch's 61-byte
header before its records:

- records of one shape (the same key and value lengths and the same field widths; rows
  of fixed-size payloads are nearly all alike, as offset deltas change width only at 64
  and 8192) are written a run at a time, each field as one strided copy of fixed-size
  items: the bytes between one record's value and the next record's key (header count,
  length, attributes, timestamp and offset deltas, key length), which depend on the
  offset delta only and come from a table kept per shape, then the keys, the value
  length, the values; a run of thousands of records costs a few copies;
- when records differ too often for runs to pay, the bytes around each key and value
  are computed for all records at once with numpy, and Arrow's `take` gathers the
  pieces of every record (its fields, key, value length, value, header count) in order.

Each batch then gets its header and its CRC32C in place, and leaves as one copy.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeAlias

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
Column: TypeAlias = pa.Array | pa.ChunkedArray
_INT32_LIMIT = 2**31
# Widest bytes before a key: body length (5 bytes at most), attributes, timestamp delta,
# offset delta and key length (5 each at most); before a value: its length.
_BEFORE_KEY = 17
_BEFORE_VALUE = 5
# Runs pay while they hold this many records on average; below, Arrow's take is cheaper.
_MIN_RUN = 48
# The values (offset deltas, key and value lengths from -1, record lengths) from which
# their zigzag varint is one byte wider: 1 byte below 64, 2 below 8192, and so on.
_VARINT_STEPS = (64, 8192, 1 << 20, 1 << 27)


def _zigzag(values: Int64Array) -> npt.NDArray[np.uint64]:
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _field_size(value: int) -> int:
    """The bytes of the zigzag varint of `value` (-1 <= value < 2**31)."""
    return 1 + sum(value >= step for step in _VARINT_STEPS)


def _field_sizes(values: Int64Array) -> Int64Array | int:
    """`_field_size` of each of `values` (at least one); one int when all take as many
    bytes (as nearly always: a column of fixed-size payloads, or all null)."""
    low, high = int(values.min()), int(values.max())
    size = _field_size(low)
    if size == _field_size(high):
        return size
    sizes = np.full(len(values), size, np.int64)
    for step in _VARINT_STEPS:
        if low < step <= high:
            sizes += values >= step
    return sizes


def _delta_sizes(first: int, count: int) -> Int64Array:
    """`_field_size` of the offset deltas first, first + 1, ..., count of them: they
    widen at known deltas, so by ranges."""
    sizes = np.full(count, _field_size(first), np.int64)
    for step in _VARINT_STEPS:
        if first < step < first + count:
            sizes[step - first :] += 1
    return sizes


def _field_and_bytes(lengths: Int64Array) -> Int64Array | int:
    """The bytes a key or value of each of `lengths` (-1 for null) takes in a record:
    its length field and its bytes; one int when the lengths are all equal."""
    low, high = int(lengths.min()), int(lengths.max())
    if low == high:
        return _field_size(low) + max(low, 0)
    return _field_sizes(lengths) + np.maximum(lengths, 0)


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


def _chunks(array: Column) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def lengths_of(array: Column) -> Int64Array:
    """Byte length of each element of a binary array (or chunked array), -1 for a null."""
    if isinstance(array, pa.ChunkedArray):
        parts = [lengths_of(chunk) for chunk in array.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
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
    key_lengths: Int64Array, value_lengths: Int64Array, delta_sizes: Int64Array | int
) -> Int64Array:
    """The bytes each record's body takes (all but its length varint) as `encode_batches`
    writes it, its offset delta taking `delta_sizes` bytes: timestamp delta 0, no
    headers."""
    body = (
        3  # attributes, timestamp delta 0, header count 0
        + delta_sizes
        + _field_and_bytes(key_lengths)
        + _field_and_bytes(value_lengths)
    )
    if isinstance(body, int):
        return np.full(len(key_lengths), body, np.int64)
    return body


def record_sizes(
    key_lengths: Int64Array, value_lengths: Int64Array, *, first_delta: int = 0
) -> Int64Array:
    """The bytes each record takes in a batch `encode_batches` writes (key and value
    lengths as `lengths_of` gives them) when their offset deltas are first_delta,
    first_delta + 1, ... (and at most that when they are smaller)."""
    if not len(key_lengths):
        return np.zeros(0, np.int64)
    body = _record_bodies(
        key_lengths, value_lengths, _delta_sizes(first_delta, len(key_lengths))
    )
    body += _field_sizes(body)
    return body


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
        body = _record_bodies(key_lengths, value_lengths, _field_sizes(deltas))
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


class _Chunks:
    """A binary column's chunks, walked in record order (their buffers read when first
    needed: a column of null keys is never read)."""

    def __init__(self, array: Column) -> None:
        self.chunks = [chunk for chunk in _chunks(array) if len(chunk)]
        self.starts = list(itertools.accumulate((len(c) for c in self.chunks), initial=0))
        self.index = -1
        self.data = np.zeros(0, np.uint8)
        self.offsets = np.zeros(1, np.int32)

    def items(self, first: int, count: int, width: int) -> npt.NDArray[np.void]:
        """The `count` items of `width` bytes each (not null) from record `first` on, as
        an array of `width`-byte items; the records must be in one chunk, and later
        than those asked for before."""
        index = self.index
        while first >= self.starts[index + 1]:
            index += 1
        if index != self.index:
            self.index = index
            self.data, self.offsets = _data(self.chunks[index])
        at = int(self.offsets[first - self.starts[index]])
        return self.data[at : at + count * width].view(np.dtype((np.void, width)))


def _write_items(out: npt.NDArray[np.uint8], at: int, stride: int, count: int,
                 items: npt.NDArray[Any] | np.void) -> None:
    """Write `count` fixed-size byte strings (`items`, or the same one) at `at`,
    `at + stride`, ...: one strided copy, much faster than byte column by column."""
    rows = np.ndarray((count,), items.dtype, out, at, (stride,))
    rows[...] = items


class _Shape(NamedTuple):
    """The bytes of a run of records of one shape (key length, value length, offset
    delta width) but their offset deltas, keys and values. Laid out, a run's records
    are `size` bytes apart; the `gap` bytes from the header count of the record before
    each record (the header byte before a batch's first record, overwritten later) to
    its key (or to its value, when it has no key bytes) are the same in every record but
    for the offset delta: `head`, the delta, `tail`; then come the key, `value_field`
    (when the key has bytes), the value and the header count."""

    head: bytes  # the header count of the record before, length, attributes, timestamp
    width: int  # of the offset delta
    tail: bytes  # the key length, and the value length when the key has no bytes
    key_bytes: int
    value_field: bytes  # the value length, when the key has bytes
    value_bytes: int

    @property
    def gap(self) -> int:
        return len(self.head) + self.width + len(self.tail)

    @property
    def size(self) -> int:
        return self.gap - 1 + self.key_bytes + len(self.value_field) + self.value_bytes + 1


@functools.lru_cache(maxsize=1024)
def _shape(key_length: int, value_length: int, width: int) -> _Shape:
    key_field, value_field = encode_varint(key_length), encode_varint(value_length)
    key_bytes, value_bytes = max(key_length, 0), max(value_length, 0)
    body = 3 + width + len(key_field) + key_bytes + len(value_field) + value_bytes
    head = bytes(1) + encode_varint(body) + bytes(2)  # attributes 0, timestamp delta 0
    if key_bytes:
        return _Shape(head, width, key_field, key_bytes, value_field, value_bytes)
    return _Shape(head, width, key_field + value_field, 0, b"", value_bytes)


def _gaps(shape: _Shape, first: int, end: int) -> npt.NDArray[np.uint8]:
    """The gaps before the records of `shape` with offset deltas first .. end - 1."""
    gaps = np.empty((end - first, shape.gap), np.uint8)
    column = len(shape.head)
    gaps[:, :column] = np.frombuffer(shape.head, np.uint8)
    raw = np.arange(first, end, dtype=np.int64) << 1  # zigzag
    for byte in range(shape.width):
        part = (raw >> (7 * byte)) & 0x7F
        if byte + 1 < shape.width:
            part |= 0x80
        gaps[:, column + byte] = part
    gaps[:, column + shape.width :] = np.frombuffer(shape.tail, np.uint8)
    return gaps


# Gaps computed once per shape, for the offset deltas from the first of their width on:
# at most _GAP_ROWS rows each (beyond, a run's gaps are computed for it), _GAP_BYTES bytes
# in all (the oldest tables leave first).
_GAP_TABLES: dict[_Shape, npt.NDArray[np.uint8]] = {}
_GAP_LOCK = threading.Lock()
_GAP_ROWS = 1 << 16
_GAP_BYTES = 1 << 23
_WIDTH_FIRSTS = (0, *_VARINT_STEPS)


def _gaps_of_run(shape: _Shape, first: int, end: int) -> npt.NDArray[np.uint8]:
    """`_gaps` from the table of `shape`, grown (doubling) when a run needs more."""
    lowest = _WIDTH_FIRSTS[shape.width - 1]
    table = _GAP_TABLES.get(shape)
    if table is None or end - lowest > len(table):
        if end - lowest > _GAP_ROWS:
            return _gaps(shape, first, end)
        rows = min(max(end - lowest, 2 * len(table) if table is not None else 64), _GAP_ROWS)
        if shape.width < len(_WIDTH_FIRSTS):
            rows = min(rows, _WIDTH_FIRSTS[shape.width] - lowest)
        table = _gaps(shape, lowest, lowest + rows)
        table.flags.writeable = False
        with _GAP_LOCK:  # encoders in other threads may be growing tables too
            _GAP_TABLES.pop(shape, None)
            kept = sum(kept.nbytes for kept in _GAP_TABLES.values())
            while _GAP_TABLES and kept + table.nbytes > _GAP_BYTES:
                kept -= _GAP_TABLES.pop(next(iter(_GAP_TABLES))).nbytes
            _GAP_TABLES[shape] = table
    return table[first - lowest : end - lowest]


def _lay_out_runs(
    keys: Column,
    values: Column,
    key_lengths: Int64Array,
    value_lengths: Int64Array,
    firsts: Int64Array,
) -> tuple[npt.NDArray[np.uint8], list[int]] | None:
    """The batches' records (each batch after room for its header) laid out a run of
    records of one `_Shape` at a time; where each batch starts; None when runs are too
    short to pay."""
    n = len(key_lengths)
    changes = np.flatnonzero(
        (key_lengths[1:] != key_lengths[:-1]) | (value_lengths[1:] != value_lengths[:-1])
    )
    key_chunks, value_chunks = _Chunks(keys), _Chunks(values)
    chunk_firsts = [*key_chunks.starts[1:-1], *value_chunks.starts[1:-1]]
    if (len(changes) + len(firsts) + len(chunk_firsts)) * _MIN_RUN > n:
        return None
    batch_firsts = firsts.tolist()
    # Runs start at each batch's first record, where the offset delta widens, where a
    # key or value length changes and where a chunk starts.
    starts = set(batch_firsts)
    for first, end in itertools.pairwise(batch_firsts):
        starts.update(first + step for step in _VARINT_STEPS if first + step < end)
    starts.update((changes + 1).tolist())
    starts.update(chunk_firsts)
    run_firsts = sorted(starts)
    batch_starts: list[int] = []
    plan: list[tuple[int, int, int, int, _Shape]] = []
    position = 0
    batch = -1
    for first, end in itertools.pairwise(run_firsts):
        if first == batch_firsts[batch + 1]:
            batch += 1
            batch_starts.append(position)
            position += HEADER_SIZE
        delta = first - batch_firsts[batch]
        shape = _shape(int(key_lengths[first]), int(value_lengths[first]), _field_size(delta))
        plan.append((first, end, position, delta, shape))
        position += (end - first) * shape.size
    batch_starts.append(position)
    if position >= _INT32_LIMIT:
        raise ValueError("record batches must stay below 2 GiB in all")
    out = np.empty(position, np.uint8)
    for first, end, start, delta, shape in plan:
        m, size = end - first, shape.size
        gaps = _gaps_of_run(shape, delta, delta + m)
        _write_items(out, start - 1, size, m, gaps.view(np.dtype((np.void, shape.gap)))[:, 0])
        at = start - 1 + shape.gap
        if shape.key_bytes:
            _write_items(out, at, size, m, key_chunks.items(first, m, shape.key_bytes))
            at += shape.key_bytes
            _write_items(out, at, size, m, np.void(shape.value_field))
            at += len(shape.value_field)
        if shape.value_bytes:
            _write_items(out, at, size, m, value_chunks.items(first, m, shape.value_bytes))
    # The header count of each batch's last record (the others' are in the next gaps).
    for end in batch_starts[1:]:
        out[end - 1] = 0
    return out, batch_starts


def _lay_out_take(
    keys: Column,
    values: Column,
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
    laid = pa.concat_arrays([pieces, *_chunks(keys), *_chunks(values)])
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
    keys: Column,
    values: Column,
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
    or of one buffer each. `keys` and `values` may be chunked arrays (chunked alike or
    not): their chunks are not joined."""
    n = len(values)
    if len(keys) != n or sum(counts) != n or not all(c > 0 for c in counts):
        raise ValueError("a batch needs one key and one value per record, at least one")
    sequences = list(base_sequences) if base_sequences is not None else [NO_SEQUENCE] * len(
        counts
    )
    if keys.type != pa.binary():
        keys = keys.cast(pa.binary())
    if values.type != pa.binary():
        values = values.cast(pa.binary())
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
