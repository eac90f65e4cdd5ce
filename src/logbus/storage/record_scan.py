"""A reader of the records inside a stored v2 batch, for the few storage features that
need per-record fields: offset-for-timestamp search and transaction markers. Records are
read by the records package's reference decoder (`records.record.decode_record`) and
markers by `records.control`: one implementation of varints and control records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch
from logbus.records.control import ControlType, decode_control_key, decode_end_txn_marker
from logbus.records.record import decode_record

# (codec id, compressed bytes) -> the uncompressed records section; may raise ValueError.
Decompressor = Callable[[int, memoryview], bytes]


def default_decompressor() -> Decompressor:
    """The records package's codecs (gzip, snappy, lz4, zstd)."""
    from logbus.records.compression import decompress

    return decompress


class RecordFields(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class ControlMarker(NamedTuple):
    control_type: int
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlType.ABORT


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
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    for _ in range(header.record_count):
        if pos >= len(data):
            raise InvalidBatch("the batch's records end before its record count")
        record, pos = decode_record(
            data, pos, header.base_offset, header.base_timestamp, log_append_time
        )
        yield RecordFields(record.offset, record.timestamp, record.key, record.value)


def read_control_marker(batch: memoryview, header: BatchHeader) -> ControlMarker | None:
    """The end-transaction marker of a control batch, or None if it carries none (or
    cannot be read: stored data is never a reason to fail)."""
    try:
        records = iter_records(batch, header)
        if records is None:
            return None
        for record in records:
            key = decode_control_key(record.key)
            marker = decode_end_txn_marker(record.value)
            return ControlMarker(key.type, marker.coordinator_epoch)
    except InvalidBatch:
        return None
    return None
