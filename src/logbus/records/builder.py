"""Building a complete RecordBatch v2 (magic 2) as bytes, CRC32C included.

The entry point is `build_batch`. Records are written straight into one bytearray after
a zeroed 61-byte header (or into a scratch buffer that is then compressed), and the
header and CRC are filled in last.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from logbus.records.batch import (
    CONTROL_FLAG,
    CRC_START,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    compute_crc,
)
from logbus.records.compression import CompressionType, compress
from logbus.records.record import HeaderInput, Record, plain_record_parts, write_record

NO_TIMESTAMP: Final = -1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_CRC: Final = struct.Struct(">I")
_CRC_OFFSET: Final = CRC_START - 4


class NewRecord(NamedTuple):
    """A record to write. Its offset is the previous record's plus one (the first is the
    batch's base offset); a `timestamp` of None means the time the batch is built."""

    key: bytes | None
    value: bytes | None
    headers: HeaderInput = ()
    timestamp: int | None = None


# A plain (key, value) pair is read as NewRecord(key, value). A `Record` keeps its own
# offset and timestamp, which lets a rewrite (log cleaning, recompression) keep gaps.
RecordInput = NewRecord | Record | tuple[bytes | None, bytes | None]


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch, as Kafka timestamps are."""
    return time.time_ns() // 1_000_000


def build_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Return one RecordBatch v2 holding `records`, with a correct CRC.

    - `base_timestamp`: the batch's baseTimestamp; None means the first record's.
    - `max_timestamp`: None means the largest record timestamp. With `log_append_time`
      readers report this value as every record's timestamp.
    - `last_offset_delta`: None means the last record's; a larger value keeps the offset
      range of a batch whose last records were cleaned away. An empty batch needs it.
    - `delete_horizon_ms`: sets the delete-horizon flag and stores the horizon as the
      baseTimestamp (what the log cleaner writes, KIP-534).

    Raises ValueError for inconsistent arguments (offsets not increasing, a
    transactional batch without a producer id, values out of their field's range).
    """
    if is_transactional and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id")
    if delete_horizon_ms is not None:
        if base_timestamp is not None:
            raise ValueError("give base_timestamp or delete_horizon_ms, not both")
        base_timestamp = delete_horizon_ms
    codec = CompressionType(compression)
    out = bytearray(HEADER_SIZE)
    body = out if codec == CompressionType.NONE else bytearray()
    written = _write_records(body, records, base_offset, base_timestamp)
    if last_offset_delta is None:
        if written.record_count == 0:
            raise ValueError("an empty batch needs last_offset_delta")
        last_offset_delta = written.last_offset_delta
    elif last_offset_delta < written.last_offset_delta:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} is before the last record's "
            f"{written.last_offset_delta}"
        )
    # Kafka's readers skip the body of a batch without records, so an empty batch
    # carries none, whatever its codec.
    if body is not out and written.record_count:
        out += compress(codec, body, compression_level)
    _write_header(
        out,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(
            codec, log_append_time, is_transactional, is_control, delete_horizon_ms is not None
        ),
        last_offset_delta=last_offset_delta,
        base_timestamp=(
            NO_TIMESTAMP if written.base_timestamp is None else written.base_timestamp
        ),
        max_timestamp=written.max_timestamp if max_timestamp is None else max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        count=written.record_count,
    )
    return bytes(out)


class _Written(NamedTuple):
    """What `_write_records` wrote: how many records, the last one's offset delta (-1 for
    none), the batch's base timestamp (None: no record and none given) and the largest
    record timestamp."""

    record_count: int
    last_offset_delta: int
    base_timestamp: int | None
    max_timestamp: int


def _write_records(
    body: bytearray,
    records: Iterable[RecordInput],
    base_offset: int,
    base_timestamp: int | None,
) -> _Written:
    """Append `records` to `body`, offset deltas from `base_offset` and timestamp deltas
    from `base_timestamp` (None: the first record's timestamp)."""
    offset_delta = -1
    count = 0
    largest_timestamp = NO_TIMESTAMP
    now: int | None = None
    key: bytes | None
    value: bytes | None
    headers: HeaderInput
    timestamp: int | None
    for item in records:
        if isinstance(item, Record):
            key, value, headers, timestamp = item.key, item.value, item.headers, item.timestamp
            delta = item.offset - base_offset
            if delta <= offset_delta:
                raise ValueError(
                    f"record offset {item.offset} does not follow offset "
                    f"{base_offset + offset_delta} in a batch based at {base_offset}"
                )
            offset_delta = delta
        else:
            fields = item if isinstance(item, NewRecord) else NewRecord(*item)
            key, value, headers, timestamp = fields
            offset_delta += 1
        if timestamp is None:
            if now is None:
                now = now_ms()
            timestamp = now
        if base_timestamp is None:
            base_timestamp = timestamp
        if timestamp > largest_timestamp:
            largest_timestamp = timestamp
        write_record(body, offset_delta, timestamp - base_timestamp, key, value, headers)
        count += 1
    return _Written(count, offset_delta, base_timestamp, largest_timestamp)


def _attributes(
    codec: CompressionType,
    log_append_time: bool,
    is_transactional: bool,
    is_control: bool,
    has_delete_horizon: bool,
) -> int:
    """The batch's attributes field."""
    attributes = int(codec)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG
    return attributes


def _write_header(
    out: bytearray,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
) -> None:
    """Fill in the 61-byte header at the start of `out` and then its CRC."""
    try:
        _HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    except struct.error as exc:
        raise ValueError(f"record batch header field out of range: {exc}") from None
    _CRC.pack_into(out, _CRC_OFFSET, compute_crc(out))


def seal_batch(
    out: bytearray,
    *,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
) -> bytearray:
    """Finish a batch whose records were written one by one with `write_record`.

    `out` holds HEADER_SIZE reserved bytes (see `new_batch_buffer`) followed by `count`
    records with offset deltas 0..count-1 and timestamp deltas from `base_timestamp`.
    Returns the complete batch: `out` itself filled in, or a new buffer holding the
    compressed records. The producer's incremental path: records are encoded once, as they
    arrive, and compressed once per batch.
    """
    codec = CompressionType(compression)
    if codec != CompressionType.NONE:
        compressed = compress(codec, memoryview(out)[HEADER_SIZE:], compression_level)
        out = bytearray(HEADER_SIZE)
        out += compressed
    _write_header(
        out,
        base_offset=0,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        attributes=int(codec) | (TRANSACTIONAL_FLAG if is_transactional else 0),
        last_offset_delta=count - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        count=count,
    )
    return out


def build_plain_batch(
    values: Sequence[bytes],
    keys: Sequence[bytes] | None = None,
    *,
    timestamp: int,
    compression: CompressionType | int = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """`build_batch` for columns: header-less records of one `timestamp`, `bytes` values,
    keys all null (`keys` None) or all `bytes`, based at offset 0, encoded in bulk
    (`record.plain_record_parts`). Byte-identical to
    `build_batch([NewRecord(key, value, (), timestamp), ...])` with the same arguments."""
    if not values:
        raise ValueError("a batch built from columns needs at least one record")
    if keys is not None and len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    parts = plain_record_parts(values, keys)
    parts.insert(0, bytes(HEADER_SIZE))
    out = seal_batch(
        bytearray().join(parts),
        count=len(values),
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        compression=compression,
        compression_level=compression_level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return bytes(out)


def new_batch_buffer() -> bytearray:
    """An empty buffer for `seal_batch`: the header's bytes, reserved."""
    return bytearray(HEADER_SIZE)


_PRODUCER_FIELDS: Final = struct.Struct(">qhi")
_PRODUCER_FIELDS_OFFSET: Final = 43  # producerId, producerEpoch, baseSequence
_ATTRIBUTES: Final = struct.Struct(">h")
_ATTRIBUTES_OFFSET: Final = 21


def restamp_batch(
    batch: bytearray | memoryview,
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool | None = None,
) -> None:
    """Rewrite a sealed batch's producer id, epoch and base sequence (and its CRC), as an
    idempotent producer does when it must resend a batch under a new epoch; with
    `is_transactional` given, its transactional attribute too."""
    _PRODUCER_FIELDS.pack_into(
        batch, _PRODUCER_FIELDS_OFFSET, producer_id, producer_epoch, base_sequence
    )
    if is_transactional is not None:
        (attributes,) = _ATTRIBUTES.unpack_from(batch, _ATTRIBUTES_OFFSET)
        attributes = (
            attributes | TRANSACTIONAL_FLAG
            if is_transactional
            else attributes & ~TRANSACTIONAL_FLAG
        )
        _ATTRIBUTES.pack_into(batch, _ATTRIBUTES_OFFSET, attributes)
    _CRC.pack_into(batch, _CRC_OFFSET, compute_crc(batch))
