"""A minimal reader of the records inside a v2 batch, for the few storage features that
need per-record fields: offset-for-timestamp search, key checks on compacted topics and
transaction markers. Appends and fetches never use it (batches stay opaque).

Record layout (Kafka's record format v2): length varint, attributes int8, timestampDelta
varlong, offsetDelta varint, key (varint length, -1 for null), value (same), headers.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch

# (codec id, compressed bytes) -> the uncompressed records section; may raise ValueError.
Decompressor = Callable[[int, memoryview], bytes]


def default_decompressor() -> Decompressor:
    """The records package's codecs (gzip, snappy, lz4, zstd)."""
    from logbus.records.compression import decompress

    return decompress


CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_INT16 = struct.Struct(">h")
_CONTROL_VALUE = struct.Struct(">hi")


class RecordFields(NamedTuple):
    offset: int
    timestamp: int
    key: memoryview | None
    value: memoryview | None


class ControlMarker(NamedTuple):
    control_type: int
    coordinator_epoch: int


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at `pos`; return (value, next position)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise InvalidBatch("record ends inside a varint")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatch("varint is too long")
    return (raw >> 1) ^ -(raw & 1), pos


def records_section(
    batch: memoryview, header: BatchHeader, decompress: Decompressor | None
) -> memoryview | None:
    """The uncompressed bytes after the batch header, or None if the batch is compressed
    and no decompressor is available."""
    body = batch[HEADER_SIZE : header.size]
    if header.compression == 0:
        return body
    if decompress is None:
        return None
    return memoryview(decompress(header.compression, body))


def iter_records(
    batch: memoryview, header: BatchHeader, decompress: Decompressor | None = None
) -> Iterator[RecordFields] | None:
    """Iterate the records of one batch (None when it cannot be decompressed here).

    Raises ValueError (InvalidBatch, or the decompressor's error) on malformed data.
    """
    data = records_section(batch, header, decompress)
    if data is None:
        return None
    return _iter(data, header)


def _iter(data: memoryview, header: BatchHeader) -> Iterator[RecordFields]:
    pos = 0
    for _ in range(header.record_count):
        length, pos = _varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise InvalidBatch("record length runs past the batch")
        pos += 1  # attributes
        timestamp_delta, pos = _varint(data, pos)
        offset_delta, pos = _varint(data, pos)
        key_length, pos = _varint(data, pos)
        key = None
        if key_length >= 0:
            key = data[pos : pos + key_length]
            pos += key_length
        value_length, pos = _varint(data, pos)
        value = None
        if value_length >= 0:
            value = data[pos : pos + value_length]
            pos += value_length
        if pos > end:
            raise InvalidBatch("record fields run past the record length")
        if header.is_log_append_time:
            timestamp = header.max_timestamp
        else:
            timestamp = header.base_timestamp + timestamp_delta
        yield RecordFields(header.base_offset + offset_delta, timestamp, key, value)
        pos = end


def read_control_marker(batch: memoryview, header: BatchHeader) -> ControlMarker | None:
    """The end-transaction marker of a control batch, or None if it carries none."""
    records = iter_records(batch, header)
    if records is None:
        return None
    for record in records:
        if record.key is None or record.value is None or len(record.key) < 4:
            return None
        control_type = _INT16.unpack_from(record.key, 2)[0]
        if len(record.value) < _CONTROL_VALUE.size:
            return None
        _version, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value, 0)
        return ControlMarker(control_type, coordinator_epoch)
    return None
