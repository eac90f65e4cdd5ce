"""Decoding RecordBatch v2 records column-wise, with numpy and Arrow arrays.

The entry point is `decode_columns` (encoding is `records.columnar_encode`). It reads the
records of several batches (one fetched record set) into columns without making a Python
object per record, by three paths with the same results:

- Runs: in a long batch, runs of records laid out alike (keys and values of one length
  each, the offset deltas the records' indexes: what producers write) are found and
  decoded with strided numpy views over the batch's bytes (`records.columnar_stride`);
  their values are copied once, straight into the result's binary column.
- Generic: the records no run holds, of all batches at once. Their bytes (decompressed
  when needed) are joined into one buffer; the record length varints are followed to
  find where each record starts (runs of equal-sized records are guessed and checked
  with numpy, other records take one Python step each); every other field is decoded
  for all records at once with numpy; keys and values become Arrow `BinaryArray`s
  gathered by Arrow itself from that one buffer. It takes records without headers whose
  varints are short.
- Exact: a batch with anything else (headers, long varints, or malformed bytes) goes
  through `records.reader.decode_record_tuples`, which reads headers and names what is
  wrong with a bad batch, so every path returns the same columns and the same
  `InvalidBatch` is raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from logbus.records.batch import (
    HEADER_SIZE,
    BatchHeader,
)
from logbus.records.columnar_stride import Run, find_runs
from logbus.records.compression import CompressionType
from logbus.records.reader import (
    _batch_data,
    _check_crc,
    _record_count,
    decode_record_tuples,
)
from logbus.records.record import MIN_RECORD_BODY, Header
from logbus.records.varint import Buffer
from logbus.records.varint_arrays import record_fields, record_starts

Int64Array = npt.NDArray[np.int64]
# Bytes appended after the joined bodies so that reading a varint's next bytes past the
# end of the last record never indexes out of the buffer (the values read are discarded).
_PAD = bytes(16)
_INT32_LIMIT = 2**31
# Batches with fewer records go straight to the generic path, all in one pass: checking
# a run costs a few dozen numpy calls, more than that path spends on a few hundred records.
_MIN_RUN_BATCH = 512


@dataclass(frozen=True)
class RecordColumns:
    """The records of a record set, one entry per record in offset order.

    `timestamp_types` holds 0 (CreateTime) or 1 (LogAppendTime); `headers` is None when
    no record has a header, else one tuple of (key, value) pairs per record."""

    offsets: Int64Array
    timestamps: Int64Array
    timestamp_types: npt.NDArray[np.int32]
    keys: pa.Array
    values: pa.Array
    headers: list[tuple[Header, ...]] | None

    def __len__(self) -> int:
        return len(self.offsets)


def decode_columns(
    batches: Sequence[tuple[Buffer, BatchHeader]],
    *,
    min_offset: int = 0,
    end_offset: int | None = None,
    verify_crc: bool = True,
) -> RecordColumns:
    """The records of `batches` (each a whole batch and its parsed header) with offsets
    in [min_offset, end_offset), as columns. Control batches are the caller's to leave
    out. Raises InvalidBatch as `records.reader.decode_batch` does."""
    found = _open_batches(batches, verify_crc)
    window = (min_offset, end_offset)
    rest = _decode_runs(found, window)
    if rest:
        generic = _decode_generic(rest, window)
        if generic is None:
            for item in rest:
                item.slow = True
        elif len(rest) == len(found) and not any(item.parts for item in rest):
            return generic  # every record took the generic path: nothing to join
        else:
            for item, part in zip(rest, _split(generic, [b.kept for b in rest]), strict=True):
                item.parts.append(part)
    for item in found:
        if item.slow:
            item.parts = [_decode_slow(item.view, item.header, window)]
    return _join([part for item in found for part in item.parts])


def _open_batches(
    batches: Sequence[tuple[Buffer, BatchHeader]], verify_crc: bool
) -> list[_Batch]:
    """The batches that hold records, CRC checked, with their records part (decompressed
    when needed)."""
    found: list[_Batch] = []
    for batch, header in batches:
        view = memoryview(batch)[: header.size]
        if verify_crc:
            _check_crc(view, header)
        if _record_count(header) == 0:
            continue
        if header.compression == CompressionType.NONE:
            body: Buffer = view[HEADER_SIZE:]
        else:
            body = _batch_data(view, header)
        found.append(_Batch(view, header, body))
    return found


def _decode_runs(found: list[_Batch], window: tuple[int, int | None]) -> list[_Batch]:
    """Decode the runs that lead each long batch of `found` into its parts; return the
    batches with records left for the generic path (the batches with bytes after their
    records are marked for the exact decoder, which names them)."""
    rest: list[_Batch] = []
    for item in found:
        count = item.header.record_count
        if count < _MIN_RUN_BATCH:
            item.rest_count = count
            rest.append(item)
            continue
        runs, done, pos = find_runs(item.body, count)
        item.parts.extend(_run_part(run, item.header, window) for run in runs)
        if done < count:
            item.rest_at, item.rest_count = pos, count - done
            rest.append(item)
        elif pos != len(item.body):
            item.slow = True
    return rest


@dataclass
class _Batch:
    """One batch with records being decoded: its bytes, header and records part; the
    columns decoded so far; where the records no run holds start (and how many there
    are, and how many of them are in the offset window) or whether the whole batch
    goes to the exact decoder."""

    view: memoryview
    header: BatchHeader
    body: Buffer
    parts: list[_Part] = field(default_factory=list)
    rest_at: int = 0
    rest_count: int = 0
    kept: int = 0
    slow: bool = False


def _decode_generic(
    items: list[_Batch], window: tuple[int, int | None]
) -> RecordColumns | None:
    """The records of `items` that no run holds, all at once over their joined bytes;
    notes in each item how many of its records are in the window. None when a record
    is beyond this path (headers, long varints, malformed)."""
    bounds = []
    pos = 0
    for item in items:
        size = len(item.body) - item.rest_at
        if item.rest_count > size // (MIN_RECORD_BODY + 1):
            return None  # more records than the bytes could hold: let the checks name it
        bounds.append((pos, pos + size, item.rest_count))
        pos += size
    data = b"".join([*(memoryview(item.body)[item.rest_at :] for item in items), _PAD])
    buf = np.frombuffer(data, np.uint8)
    starts = record_starts(data, buf, bounds)
    if starts is None:
        return None
    fields = record_fields(buf, starts)
    if not (fields.ok & (fields.header_count == 0) & (fields.after == fields.end)).all():
        return None
    timestamp_delta, offset_delta = fields.timestamp_delta, fields.offset_delta
    key_start, key_length = fields.key_start, fields.key_length
    value_start, value_length = fields.value_start, fields.value_length

    headers = [item.header for item in items]
    per_batch = np.array([item.rest_count for item in items], np.int64)
    base_offsets = np.repeat(np.array([h.base_offset for h in headers], np.int64), per_batch)
    offsets = base_offsets + offset_delta
    appended = np.repeat(np.array([h.is_log_append_time for h in headers]), per_batch)
    timestamps = np.where(
        appended,
        np.repeat(np.array([h.max_timestamp for h in headers], np.int64), per_batch),
        np.repeat(np.array([h.base_timestamp for h in headers], np.int64), per_batch)
        + timestamp_delta,
    )
    min_offset, end_offset = window
    keep = offsets >= min_offset
    if end_offset is not None:
        keep &= offsets < end_offset
    if keep.all():
        kept = per_batch
    else:
        kept = np.add.reduceat(keep, np.cumsum(per_batch) - per_batch)
        offsets, timestamps, appended = offsets[keep], timestamps[keep], appended[keep]
        key_start, key_length = key_start[keep], key_length[keep]
        value_start, value_length = value_start[keep], value_length[keep]
    for item, count in zip(items, kept.tolist(), strict=True):
        item.kept = count
    return RecordColumns(
        offsets=offsets,
        timestamps=timestamps,
        timestamp_types=appended.astype(np.int32),
        keys=_gather(data, key_start, key_length),
        values=_gather(data, value_start, value_length),
        headers=None,
    )


def _gather(data: bytes, start: Int64Array, length: Int64Array) -> pa.Array:
    """A BinaryArray of data[start:start+length] (null where length is -1), copied by
    Arrow: an array alternating the wanted slices with the bytes between them is laid
    over `data` without copying, then every other element is taken."""
    n = len(start)
    if n == 0:
        return pa.array([], pa.binary())
    stop = start + np.maximum(length, 0)
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2] = start
    bounds[1::2] = stop
    large = len(data) >= _INT32_LIMIT
    offsets = bounds if large else bounds.astype(np.int32)
    validity = None
    nulls = length < 0
    if nulls.any():
        valid = np.ones(2 * n - 1, bool)
        valid[0::2] = ~nulls
        validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    laid = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        2 * n - 1,
        [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
    )
    taken = laid.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return taken.cast(pa.binary()) if large else taken


def _decode_slow(
    view: memoryview, header: BatchHeader, window: tuple[int, int | None]
) -> _Part:
    """One batch's records in the window, by the exact decoder (which names faults)."""
    min_offset, end_offset = window
    records: list[tuple[Any, ...]] = decode_record_tuples(
        view, header, tuple, "", 0, min_offset=min_offset, verify_crc=False
    )
    if end_offset is not None:
        records = [r for r in records if r[2] < end_offset]
    if not records:
        empty = _empty()
        return _Part(empty.offsets, empty.timestamps, empty.timestamp_types, empty.keys,
                     empty.values, None)
    _, _, offsets, stamps, kinds, keys, values, record_headers = zip(*records, strict=True)
    return _Part(
        offsets=np.array(offsets, np.int64),
        timestamps=np.array(stamps, np.int64),
        timestamp_types=np.array(kinds, np.int32),
        keys=pa.array(keys, pa.binary()),
        values=pa.array(values, pa.binary()),
        headers=list(record_headers) if any(record_headers) else None,
    )


class _Strided(NamedTuple):
    """A binary column of equal-sized items: `rows[:, at:at + size]` (all null when
    size is -1), `rows` being a run's (count, record size) view."""

    rows: npt.NDArray[np.uint8]
    at: int
    size: int


class _Part(NamedTuple):
    """Some consecutive records: `RecordColumns` whose keys and values may be left
    strided until the columns of all parts are joined."""

    offsets: Int64Array
    timestamps: Int64Array
    timestamp_types: npt.NDArray[np.int32]
    keys: pa.Array | _Strided
    values: pa.Array | _Strided
    headers: list[tuple[Header, ...]] | None


def _run_part(run: Run, header: BatchHeader, window: tuple[int, int | None]) -> _Part:
    """The records of `run` in the window."""
    first = header.base_offset + run.first_index
    n = len(run.rows)
    min_offset, end_offset = window
    low = min(max(min_offset - first, 0), n)
    high = n if end_offset is None else min(max(end_offset - first, low), n)
    rows = run.rows[low:high]
    if header.is_log_append_time:
        timestamps = np.full(high - low, header.max_timestamp, np.int64)
    else:
        timestamps = run.timestamp_deltas[low:high] + header.base_timestamp
    return _Part(
        offsets=np.arange(first + low, first + high, dtype=np.int64),
        timestamps=timestamps,
        timestamp_types=np.full(high - low, header.is_log_append_time, np.int32),
        keys=_Strided(rows, run.key_at, run.key_size),
        values=_Strided(rows, run.value_at, run.value_size),
        headers=None,
    )


def _split(columns: RecordColumns, counts: list[int]) -> list[_Part]:
    """`columns` cut into consecutive parts of `counts` records (views, no copies)."""
    parts = []
    start = 0
    for count in counts:
        stop = start + count
        parts.append(_Part(
            columns.offsets[start:stop],
            columns.timestamps[start:stop],
            columns.timestamp_types[start:stop],
            columns.keys[start:stop],
            columns.values[start:stop],
            None,
        ))
        start = stop
    return parts


def _join(parts: list[_Part]) -> RecordColumns:
    """One `RecordColumns` of the parts' records, in order."""
    if not parts:
        return _empty()
    n = sum(len(part.offsets) for part in parts)
    headers: list[tuple[Header, ...]] | None = None
    if any(part.headers is not None for part in parts):
        headers = []
        for part in parts:
            headers += part.headers if part.headers is not None else [()] * len(part.offsets)
    return RecordColumns(
        offsets=_concatenate([part.offsets for part in parts]),
        timestamps=_concatenate([part.timestamps for part in parts]),
        timestamp_types=_concatenate([part.timestamp_types for part in parts]),
        keys=_binary_column([part.keys for part in parts], n),
        values=_binary_column([part.values for part in parts], n),
        headers=headers,
    )


_T = TypeVar("_T", np.int32, np.int64)


def _concatenate(arrays: list[npt.NDArray[_T]]) -> npt.NDArray[_T]:
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _binary_column(pieces: list[pa.Array | _Strided], n: int) -> pa.Array:
    """One BinaryArray of the pieces' items, in order. Strided pieces are copied once,
    straight into the result."""
    if not any(isinstance(piece, _Strided) for piece in pieces):
        return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
    if all(isinstance(piece, _Strided) and piece.size < 0 for piece in pieces):
        return pa.nulls(n, pa.binary())
    total = sum(map(_data_size, pieces))
    large = total >= _INT32_LIMIT
    column = _BinaryBuilder(
        np.empty(n + 1, np.int64 if large else np.int32), np.empty(total, np.uint8), n
    )
    column.ends[0] = 0
    for piece in pieces:
        if isinstance(piece, _Strided):
            column.add_strided(piece)
        else:
            column.add_array(piece)
    validity = None
    if column.valid is not None:
        validity = pa.py_buffer(np.packbits(column.valid, bitorder="little"))
    joined = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        n,
        [validity, pa.py_buffer(column.ends), pa.py_buffer(column.data)],
    )
    return joined.cast(pa.binary()) if large else joined


def _data_size(piece: pa.Array | _Strided) -> int:
    """Bytes of the items of `piece`."""
    if isinstance(piece, _Strided):
        return len(piece.rows) * max(piece.size, 0)
    if not len(piece):
        return 0
    ends = np.frombuffer(piece.buffers()[1], np.int32, len(piece) + 1, 4 * piece.offset)
    return int(ends[-1] - ends[0])


@dataclass
class _BinaryBuilder:
    """The buffers of a binary column being filled piece by piece: item ends (`ends[i +
    1]` for item i), the items' bytes, and which items are valid (None until a null is
    added); `at` items and `pos` bytes are filled so far."""

    ends: npt.NDArray[np.generic]  # int32, or int64 past 2 GiB of items
    data: npt.NDArray[np.uint8]
    n: int
    valid: npt.NDArray[np.bool_] | None = None
    at: int = 0
    pos: int = 0

    def _nulls(self, count: int) -> npt.NDArray[np.bool_]:
        """The validity of the next `count` items, to be written."""
        if self.valid is None:
            self.valid = np.ones(self.n, np.bool_)
        return self.valid[self.at : self.at + count]

    def add_strided(self, piece: _Strided) -> None:
        at, pos, count, size = self.at, self.pos, len(piece.rows), piece.size
        if size < 0:
            self._nulls(count)[...] = False
            self.ends[at + 1 : at + count + 1] = pos
        else:
            stop = pos + count * size
            if size:
                # As one item of `size` bytes per record: numpy copies those faster
                # than rows of single bytes.
                item = np.dtype((np.void, size))
                self.data[pos:stop].view(item)[...] = (
                    piece.rows[:, piece.at : piece.at + size].view(item)[:, 0]
                )
            self.ends[at + 1 : at + count + 1] = np.arange(1, count + 1) * size + pos
            self.pos = stop
        self.at += count

    def add_array(self, piece: pa.Array) -> None:
        count = len(piece)
        if not count:
            return
        at, pos = self.at, self.pos
        buffers = piece.buffers()
        offsets = np.frombuffer(buffers[1], np.int32, count + 1, 4 * piece.offset)
        first, last = int(offsets[0]), int(offsets[-1])
        if last > first:
            self.data[pos : pos + last - first] = np.frombuffer(
                buffers[2], np.uint8, last - first, first
            )
        self.ends[at + 1 : at + count + 1] = offsets[1:] - first + pos
        if piece.null_count:
            self._nulls(count)[...] = piece.is_valid().to_numpy(zero_copy_only=False)
        self.pos = pos + last - first
        self.at = at + count


def _empty() -> RecordColumns:
    return RecordColumns(
        offsets=np.empty(0, np.int64),
        timestamps=np.empty(0, np.int64),
        timestamp_types=np.empty(0, np.int32),
        keys=pa.array([], pa.binary()),
        values=pa.array([], pa.binary()),
        headers=None,
    )
