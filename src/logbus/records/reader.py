"""Reading records out of RecordBatch v2 bytes: one batch, or a fetched record set.

`decode_records` decodes one whole batch (checking its CRC and decompressing it);
`iter_record_set` walks the concatenated batches of a Fetch response or a log segment,
ignoring a partial batch at the end. Every inconsistency raises `InvalidBatch`.
Control batches (transaction markers) are returned like any other; callers tell them
apart with `is_control_batch` and read them with `logbus.records.control`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from logbus.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    compute_crc,
    split_batches,
)
from logbus.records.compression import CompressionError, CompressionType, decompress
from logbus.records.record import MIN_RECORD_BODY, Record, decode_record
from logbus.records.varint import Buffer, VarintError, decode_varlong

_KNOWN_CODECS = frozenset(int(codec) for codec in CompressionType)
T = TypeVar("T", bound=tuple[Any, ...])


def is_control_batch(header: BatchHeader) -> bool:
    """Whether the batch holds a control record (a transaction marker), not user data."""
    return header.is_control


def decode_batch(batch: Buffer, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode exactly one whole batch into its header and records."""
    view = memoryview(batch)
    header = BatchHeader.parse(view)
    if len(view) < header.size:
        raise InvalidBatch(
            f"record batch at offset {header.base_offset} is truncated: "
            f"{len(view)} of {header.size} bytes"
        )
    if len(view) > header.size:
        raise InvalidBatch(
            f"{len(view) - header.size} bytes follow the record batch at offset "
            f"{header.base_offset}; expected exactly one batch"
        )
    return header, _decode_body(view, header, verify_crc)


def decode_records(batch: Buffer, *, verify_crc: bool = True) -> list[Record]:
    """Decode exactly one whole batch into its records (decompressed, CRC checked)."""
    return decode_batch(batch, verify_crc=verify_crc)[1]


def iter_record_set(
    data: Buffer, *, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Yield (header, records) for each whole batch in a concatenation of batches.

    A partial batch at the end (a Fetch response cut at max_bytes) is skipped silently;
    a complete batch that is malformed raises InvalidBatch.
    """
    view = memoryview(data)
    for position, header in split_batches(view):
        yield header, _decode_body(view[position : position + header.size], header, verify_crc)


def _check_crc(view: memoryview, header: BatchHeader) -> None:
    actual = compute_crc(view)
    if actual != header.crc:
        raise InvalidBatch(
            f"record batch at offset {header.base_offset}: CRC32C mismatch "
            f"(stored {header.crc:#010x}, computed {actual:#010x})"
        )


def _batch_data(view: memoryview, header: BatchHeader) -> bytes:
    """The records part of a batch, decompressed."""
    codec = header.compression
    if codec == CompressionType.NONE:
        return bytes(view[HEADER_SIZE:])
    where = f"record batch at offset {header.base_offset}"
    if codec in _KNOWN_CODECS:
        try:
            return decompress(codec, view[HEADER_SIZE:])
        except CompressionError as exc:
            raise InvalidBatch(f"{where}: {exc}") from None
    raise InvalidBatch(f"{where}: unknown compression codec id {codec}")


def _record_count(header: BatchHeader) -> int:
    count = header.record_count
    if count < 0:
        raise InvalidBatch(f"record batch at offset {header.base_offset}: negative record "
                           f"count {count}")
    return count


def _decode_body(view: memoryview, header: BatchHeader, verify_crc: bool) -> list[Record]:
    where = f"record batch at offset {header.base_offset}"
    if verify_crc:
        _check_crc(view, header)
    count = _record_count(header)
    if count == 0:
        # As in Kafka, a batch without records has nothing to read (even if compressed).
        return []
    data = _batch_data(view, header)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    records: list[Record] = []
    append = records.append
    pos = 0
    end = len(data)
    try:
        for index in range(count):
            if pos >= end:
                raise InvalidBatch(f"header counts {count} records but the data ends after {index}")
            record, pos = decode_record(data, pos, base_offset, base_timestamp, log_append_time)
            append(record)
    except InvalidBatch as exc:
        raise InvalidBatch(f"{where}: {exc}") from None
    if pos != end:
        raise InvalidBatch(
            f"{where}: {end - pos} bytes left over after the {count} records its header counts"
        )
    return records


def decode_record_tuples(
    batch: Buffer,
    header: BatchHeader,
    cls: type[T],
    topic: str,
    partition: int,
    *,
    min_offset: int = 0,
    verify_crc: bool = True,
) -> list[T]:
    """Decode one whole batch straight into record tuples of type `cls` (a NamedTuple of
    topic, partition, offset, timestamp, timestamp_type, key, value, headers), leaving out
    records before `min_offset`: the consumer's hot path.

    The batch is copied (or decompressed) once out of the response; each key and value
    is then one slice of that. Records whose varints take one or two bytes and that have
    no headers (nearly all) are read inline; any other record goes through
    `decode_record`, which also names what is wrong with a malformed one.
    """
    view = memoryview(batch)[: header.size]
    if verify_crc:
        _check_crc(view, header)
    if _record_count(header) == 0:
        return []
    count = header.record_count
    data = _batch_data(view, header)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    kind = 0 if log_append_time is None else 1
    out: list[T] = []
    append = out.append
    new = tuple.__new__
    end_of_data = len(data)
    pos = 0
    for index in range(count):
        start = pos
        try:
            b = data[pos]  # record length
            if b < 0x80:
                pos += 1
                length = (b >> 1) ^ -(b & 1)
            else:
                b2 = data[pos + 1]
                if b2 >= 0x80:
                    raise _Slow
                pos += 2
                u = (b & 0x7F) | (b2 << 7)
                length = (u >> 1) ^ -(u & 1)
            end = pos + length
            if length < MIN_RECORD_BODY or end > end_of_data:
                raise _Slow
            b = data[pos + 1]  # after the attributes: timestamp delta
            if b < 0x80:
                pos += 2
                timestamp_delta = (b >> 1) ^ -(b & 1)
            else:
                timestamp_delta, pos = decode_varlong(data, pos + 1)
            b = data[pos]  # offset delta
            if b < 0x80:
                pos += 1
                offset_delta = (b >> 1) ^ -(b & 1)
            else:
                b2 = data[pos + 1]
                if b2 >= 0x80:
                    raise _Slow
                pos += 2
                u = (b & 0x7F) | (b2 << 7)
                offset_delta = (u >> 1) ^ -(u & 1)
            b = data[pos]  # key
            if b == 1:
                pos += 1
                key = None
            else:
                if b < 0x80:
                    pos += 1
                    u = b
                else:
                    b2 = data[pos + 1]
                    if b2 >= 0x80:
                        raise _Slow
                    pos += 2
                    u = (b & 0x7F) | (b2 << 7)
                if u & 1:
                    raise _Slow
                size = u >> 1
                key = data[pos : pos + size]
                pos += size
            b = data[pos]  # value
            if b == 1:
                pos += 1
                value = None
            else:
                if b < 0x80:
                    pos += 1
                    u = b
                else:
                    b2 = data[pos + 1]
                    if b2 >= 0x80:
                        raise _Slow
                    pos += 2
                    u = (b & 0x7F) | (b2 << 7)
                if u & 1:
                    raise _Slow
                size = u >> 1
                value = data[pos : pos + size]
                pos += size
            # No headers (a single 0), ending exactly where the length said.
            if pos + 1 != end or data[pos] != 0:
                raise _Slow
            pos = end
            offset = base_offset + offset_delta
            if offset >= min_offset:
                timestamp = (
                    base_timestamp + timestamp_delta
                    if log_append_time is None
                    else log_append_time
                )
                append(new(cls, (topic, partition, offset, timestamp, kind, key, value, ())))
        except (_Slow, IndexError, VarintError):
            if start >= end_of_data:
                raise InvalidBatch(
                    f"record batch at offset {base_offset}: header counts {count} records "
                    f"but the data ends after {index}"
                ) from None
            try:
                r, pos = decode_record(data, start, base_offset, base_timestamp, log_append_time)
            except InvalidBatch as exc:
                raise InvalidBatch(f"record batch at offset {base_offset}: {exc}") from None
            if r.offset >= min_offset:
                append(new(cls, (topic, partition, r.offset, r.timestamp, kind, r.key, r.value,
                                 r.headers)))
    if pos != end_of_data:
        raise InvalidBatch(
            f"record batch at offset {base_offset}: {end_of_data - pos} bytes left over after "
            f"the {count} records its header counts"
        )
    return out


class _Slow(Exception):
    """A record the inline path leaves to `decode_record` (headers, long varints, or a
    fault to be named)."""
