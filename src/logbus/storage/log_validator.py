"""Checks the batches of an append and assigns their offsets (Kafka's LogValidator).

Pure functions over bytes (no I/O). `analyze_records` reads each 61-byte header, checks
the CRC32C and, for a produced batch, every record inside it (`records.validation`, at
C speed; compressed batches decompressed into a bounded buffer first), so that what
the log stores is always readable; `assign_offsets` copies the records once and rewrites
`baseOffset` and `partitionLeaderEpoch` in place (neither is covered by the CRC); for
LogAppendTime it also sets the timestamp type and `maxTimestamp` and recomputes the CRC.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbus.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatch,
    compute_crc,
    crc_is_valid,
    peek_offset_and_length,
    set_base_offset,
    set_partition_leader_epoch,
)
from logbus.records.builder import build_batch
from logbus.records.compression import CompressionError, CompressionType, decompress_bounded
from logbus.records.control import decode_control_key
from logbus.records.reader import decode_batch
from logbus.records.validation import (
    InvalidRecords,
    RecordsCheck,
    check_records,
    decompressed_limit,
)
from logbus.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from logbus.storage.log_config import LogConfig

_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
# length, attributes, timestampDelta, offsetDelta, key length, value length, header count
_MIN_RECORD_SIZE = 7
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_KNOWN_CODECS = frozenset(int(codec) for codec in CompressionType)


class BatchInfo(NamedTuple):
    position: int
    header: BatchHeader  # as received (offsets not yet assigned)
    # The smallest and largest record timestamps, when the records were read (else the
    # header's baseTimestamp and maxTimestamp).
    min_timestamp: int
    max_timestamp: int


class AssignedRecords(NamedTuple):
    """The records of an append with offsets assigned, ready for the active segment."""

    buffer: bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    base_offsets: list[int]  # per batch
    max_timestamps: list[int]  # per batch, after LogAppendTime rewriting


def analyze_records(
    records: bytes | bytearray | memoryview,
    *,
    max_message_bytes: int,
    from_client: bool,
    compact: bool = False,
    topic_partition: str = "",
) -> list[BatchInfo]:
    """Split an append into whole v2 batches and check each one.

    Raises CorruptRecordError (partial batch, impossible length, CRC mismatch, compressed
    data that does not decompress within its bound), RecordTooLargeError (batch larger
    than `max_message_bytes`) or InvalidRecordError (magic other than 2, bad record count,
    client-written control batch, inconsistent producer fields; for a produced batch,
    records that do not fill the batch exactly, malformed records, offset deltas other
    than 0..n-1, a maxTimestamp other than the largest record timestamp, a missing key on
    a compacted topic; for a control batch, a key that is no control key). Any error
    refuses the whole append. A produced batch's own base offset is ignored (it is
    overwritten), more lenient than Kafka 3.x.
    """
    view = memoryview(records)
    out: list[BatchInfo] = []
    position = 0
    while position < len(view):
        if len(view) - position < LOG_OVERHEAD:
            raise CorruptRecordError("trailing bytes shorter than a batch header")
        _, length = peek_offset_and_length(view, position)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or position + size > len(view):
            raise CorruptRecordError(f"batch length {length} at byte {position} is impossible")
        magic = view[position + _MAGIC_AT]
        if magic != MAGIC_V2:
            raise InvalidRecordError(f"record batch magic {magic} is not supported (only v2)")
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        batch = view[position : position + size]
        try:
            header = BatchHeader.parse(batch)
        except InvalidBatch as exc:
            raise CorruptRecordError(str(exc)) from exc
        if not crc_is_valid(batch, header):
            raise CorruptRecordError(f"CRC mismatch in batch at byte {position}")
        _check_header(header, from_client)
        low, high = header.base_timestamp, header.max_timestamp
        control = header.is_control
        if from_client or control:
            where = (len(out), position, topic_partition)  # named only on a refusal
            checked = _check_records(batch, header, max_message_bytes, where, compact)
            if from_client and checked.max_timestamp != header.max_timestamp:
                # (for LogAppendTime both are the header's maxTimestamp)
                raise InvalidRecordError(
                    f"{_named(where)}: maxTimestamp {header.max_timestamp} is not the largest "
                    f"record timestamp {checked.max_timestamp}"
                )
            if compact and not control:
                _check_keys(checked, topic_partition)
            if control:
                _check_control_key(checked, _named(where))
            low, high = checked.min_timestamp, checked.max_timestamp
        out.append(BatchInfo(position, header, low, high))
        position += size
    return out


def _check_header(header: BatchHeader, from_client: bool) -> None:
    if (
        header.compression == 0
        and header.size - HEADER_SIZE < header.record_count * _MIN_RECORD_SIZE
    ):
        # A batch-level bound before reading records: this body cannot hold them.
        raise InvalidRecordError(
            f"batch of {header.size} bytes cannot hold its {header.record_count} records"
        )
    # Only produced batches are held to the rules below: replicated and coordinator batches
    # may legitimately be empty or have gaps left by the log cleaner.
    if not from_client:
        return
    if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"record count {header.record_count} does not match last offset delta "
            f"{header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not write control batches")
    if header.compression not in _KNOWN_CODECS:
        raise InvalidRecordError(f"unknown compression codec id {header.compression}")
    if header.has_producer_id:
        if header.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence {header.base_sequence} for producer {header.producer_id}"
            )
        if header.producer_epoch < 0:
            raise InvalidRecordError(
                f"invalid epoch {header.producer_epoch} for producer {header.producer_id}"
            )
    elif header.is_transactional:
        raise InvalidRecordError("a transactional batch needs a producer id")


def _check_records(
    batch: memoryview,
    header: BatchHeader,
    max_message_bytes: int,
    where: tuple[int, int, str],
    compact: bool,
) -> RecordsCheck:
    """Every record of one batch (`records.validation.check_records`); a compressed
    batch is decompressed into at most `decompressed_limit(max_message_bytes)` bytes."""
    body = batch[HEADER_SIZE:]
    if header.compression != CompressionType.NONE and header.record_count > 0:
        limit = decompressed_limit(max_message_bytes)
        if header.record_count * _MIN_RECORD_SIZE > limit:
            raise InvalidRecordError(
                f"{_named(where)}: {header.record_count} records cannot fit in the {limit} bytes a "
                "batch may decompress to"
            )
        try:
            body = decompress_bounded(header.compression, body, limit)
        except CompressionError as exc:
            raise CorruptRecordError(f"{_named(where)}: {exc}") from None
    try:
        return check_records(body, header, want_keyless=compact)
    except InvalidRecords as exc:
        message = f"{_named(where)}: {exc}"
        errors = [] if exc.index is None else [(exc.index, message)]
        raise InvalidRecordError(message, errors) from None


def _named(where: tuple[int, int, str]) -> str:
    """(batch index, its byte position, topic-partition) as an error message names it."""
    index, position, topic_partition = where
    return f"batch {index} (at byte {position}) of {topic_partition}"


def _check_keys(checked: RecordsCheck, where: str) -> None:
    """Every record of a compacted topic needs a key (Kafka's message and record errors)."""
    if not len(checked.keyless):
        return
    message = f"Compacted topic cannot accept message without key in topic partition {where}."
    errors = [(i, message) for i in checked.keyless[:1000]]
    shown = ", ".join(
        f"RecordError(batchIndex={i}, message='{text}')" for i, text in errors[:3]
    )
    raise InvalidRecordError(
        f"One or more records have been rejected due to {len(checked.keyless)} record errors "
        f"in total, and only showing the first three errors at most: [{shown}]",
        errors,
    )


def _check_control_key(checked: RecordsCheck, where: str) -> None:
    try:
        decode_control_key(checked.first_key)
    except InvalidBatch as exc:
        raise InvalidRecordError(f"{where}: {exc}", [(0, str(exc))]) from None


def assign_offsets(
    records: bytes | bytearray | memoryview,
    batches: list[BatchInfo],
    *,
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> AssignedRecords:
    """Copy the records once and give the batches consecutive offsets from `first_offset`.

    With `log_append_time_ms`, each batch becomes a LogAppendTime batch with that
    timestamp (attributes and maxTimestamp rewritten, CRC recomputed).
    """
    buffer = bytearray(records)
    view = memoryview(buffer)
    next_offset = first_offset
    max_timestamp = -1
    offset_of_max = first_offset
    base_offsets: list[int] = []
    max_timestamps: list[int] = []
    for position, header, _, _ in batches:
        batch = view[position : position + header.size]
        set_base_offset(batch, next_offset)
        set_partition_leader_epoch(batch, leader_epoch)
        timestamp = header.max_timestamp
        if log_append_time_ms is not None:
            timestamp = log_append_time_ms
            _INT16.pack_into(batch, _ATTRIBUTES_AT, header.attributes | TIMESTAMP_TYPE_MASK)
            _INT64.pack_into(batch, _MAX_TIMESTAMP_AT, timestamp)
            _UINT32.pack_into(batch, _CRC_AT, compute_crc(batch))
        last_offset = next_offset + header.last_offset_delta
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            offset_of_max = last_offset
        base_offsets.append(next_offset)
        max_timestamps.append(timestamp)
        next_offset = last_offset + 1
    last = next_offset - 1
    if log_append_time_ms is not None:
        offset_of_max = last
    return AssignedRecords(
        buffer, first_offset, last, max_timestamp, offset_of_max, base_offsets, max_timestamps
    )


def check_timestamps(
    batches: list[BatchInfo], now_ms: int, before_max_ms: int, after_max_ms: int
) -> None:
    """message.timestamp.before/after.max.ms for CreateTime batches: each batch's
    smallest and largest record timestamps (read by `analyze_records`) must lie within
    [now - before, now + after] (KIP-937)."""
    low = now_ms - before_max_ms
    high = now_ms + after_max_ms
    for info in batches:
        header = info.header
        if header.is_log_append_time or header.is_control:
            continue
        for timestamp in (info.min_timestamp, info.max_timestamp):
            if timestamp >= 0 and not low <= timestamp <= high:
                raise InvalidTimestampError(
                    f"Timestamp {timestamp} of message with offset {header.base_offset} is "
                    f"out of range. The timestamp should be within [{low}, {high}]"
                )


def target_codec(config: LogConfig) -> tuple[CompressionType, int | None] | None:
    """(codec, level) that compression.type asks stored batches to use, or None for
    "producer" (batches kept as produced). Level None is the codec's default."""
    name = config.compression_type
    if name == "producer":
        return None
    if name == "uncompressed":
        return CompressionType.NONE, None
    codec = CompressionType.from_name(name)
    level = {
        CompressionType.GZIP: config.compression_gzip_level,
        CompressionType.LZ4: config.compression_lz4_level,
        CompressionType.ZSTD: config.compression_zstd_level,
    }.get(codec)
    if codec == CompressionType.GZIP and level is not None and level < 0:
        level = None  # compression.gzip.level -1: the codec's default
    return codec, level


def recompress(
    records: bytes | bytearray | memoryview,
    batches: list[BatchInfo],
    codec: CompressionType,
    level: int | None,
) -> bytes | None:
    """The records with every batch rewritten in `codec` (compression.type), or None when
    every batch already uses it. Offsets deltas, timestamps, headers and producer fields are
    kept; the leader assigns offsets afterwards as for any batch."""
    if all(info.header.compression == codec for info in batches):
        return None
    view = memoryview(records)
    out = bytearray()
    for position, header, _, _ in batches:
        batch = view[position : position + header.size]
        if header.compression == codec or header.is_control:
            out += batch
            continue
        try:
            _, decoded = decode_batch(batch, verify_crc=False)
        except ValueError as exc:  # InvalidBatch or a codec's error
            raise CorruptRecordError(str(exc)) from exc
        out += build_batch(
            decoded,
            base_offset=header.base_offset,
            compression=codec,
            compression_level=level,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            partition_leader_epoch=header.partition_leader_epoch,
            base_timestamp=header.base_timestamp,
            last_offset_delta=header.last_offset_delta,
        )
    return bytes(out)
