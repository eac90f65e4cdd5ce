"""Reading records out of RecordBatch v2 bytes: one batch, or a fetched record set.

`decode_records` decodes one whole batch (checking its CRC and decompressing it);
`iter_record_set` walks the concatenated batches of a Fetch response or a log segment,
ignoring a partial batch at the end. Every inconsistency raises `InvalidBatch`.
Control batches (transaction markers) are returned like any other; callers tell them
apart with `is_control_batch` and read them with `logbus.records.control`.
"""

from __future__ import annotations

from collections.abc import Iterator

from logbus.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    compute_crc,
    split_batches,
)
from logbus.records.compression import CompressionError, CompressionType, decompress
from logbus.records.record import Record, decode_record
from logbus.records.varint import Buffer

_KNOWN_CODECS = frozenset(int(codec) for codec in CompressionType)


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


def _decode_body(view: memoryview, header: BatchHeader, verify_crc: bool) -> list[Record]:
    where = f"record batch at offset {header.base_offset}"
    if verify_crc:
        actual = compute_crc(view)
        if actual != header.crc:
            raise InvalidBatch(
                f"{where}: CRC32C mismatch (stored {header.crc:#010x}, computed {actual:#010x})"
            )
    count = header.record_count
    if count < 0:
        raise InvalidBatch(f"{where}: negative record count {count}")
    if count == 0:
        # As in Kafka, a batch without records has nothing to read (even if compressed).
        return []
    codec = header.compression
    if codec == CompressionType.NONE:
        data = bytes(view[HEADER_SIZE:])
    elif codec in _KNOWN_CODECS:
        try:
            data = decompress(codec, view[HEADER_SIZE:])
        except CompressionError as exc:
            raise InvalidBatch(f"{where}: {exc}") from None
    else:
        raise InvalidBatch(f"{where}: unknown compression codec id {codec}")

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
