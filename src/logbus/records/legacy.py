"""Legacy message sets (magic 0 and 1) and their conversion to and from RecordBatch v2.

Kafka's message format before 0.11 ("Message sets" in Kafka's implementation docs; magic 1
is KIP-32). The broker stores only v2 batches, so, as Kafka does with a newer message
format, Produce v0-2 data is up-converted with `upconvert_message_set` before it reaches
the log (`is_legacy` tells the two formats apart) and Fetch v0-3 answers are down-converted
with `downconvert_record_set`. `iter_message_set` and `decode_message_set` parse a legacy
message set. Everything here is pure: bytes in, bytes or values out.

A message set is a sequence of [offset int64, size int32, message]; a message is crc
uint32 (CRC32 over magic .. end), magic int8, attributes int8 (codec in bits 0-2; bit 3 is
LogAppendTime, magic 1 only), timestamp int64 (magic 1 only), key and value (int32 length,
-1 for null, then bytes). A compressed message's value is a message set of inner messages;
with magic 1 the inner offsets are relative and the wrapper carries the absolute offset of
the last one. Every malformation raises `InvalidBatch` (the peer's fault: CORRUPT_MESSAGE).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Final

from logbus.records.batch import (
    COMPRESSION_MASK,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatch,
    iter_batches,
    split_batches,
)
from logbus.records.builder import NO_TIMESTAMP, NewRecord, build_batch
from logbus.records.compression import CompressionError, CompressionType, decompress
from logbus.records.reader import decode_batch, iter_batch_records, iter_record_set
from logbus.records.record import Record
from logbus.records.varint import Buffer

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1
# offset int64 + size int32: what precedes every message.
LOG_OVERHEAD: Final = 12
# crc, magic, attributes, [timestamp,] key length, value length
RECORD_OVERHEAD_V0: Final = 14
RECORD_OVERHEAD_V1: Final = 22
# Where the magic byte sits in both a legacy entry and a v2 batch.
MAGIC_POSITION: Final = 16

# Uncompressed messages of one produce request are gathered into v2 batches of at most
# about this many legacy bytes, which keeps each batch well under max.message.bytes (Kafka
# checks that limit per legacy message, before conversion).
DEFAULT_RUN_BYTES: Final = 16 * 1024

_ENTRY: Final = struct.Struct(">qi")
_PREFIX: Final = struct.Struct(">IBB")
_TIMESTAMP: Final = struct.Struct(">q")
_LENGTH: Final = struct.Struct(">i")
_LEGACY_CODECS: Final = frozenset(
    (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)
)


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """One decoded message. `timestamp` is NO_TIMESTAMP (-1) for magic 0; for an inner
    message of a LogAppendTime wrapper it is the wrapper's, as Kafka reads it."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return self.magic >= MAGIC_V1 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    """A top-level message and the messages it stands for: itself when uncompressed, its
    inner messages (absolute offsets, timestamps resolved) when it is a compressed wrapper."""

    wrapper: LegacyMessage
    messages: tuple[LegacyMessage, ...]


def is_legacy(data: Buffer) -> bool:
    """Whether `data` starts with a magic 0 or 1 message rather than a v2 batch."""
    return len(data) > MAGIC_POSITION and data[MAGIC_POSITION] in (MAGIC_V0, MAGIC_V1)


def iter_message_set(data: Buffer, *, allow_partial: bool = False) -> Iterator[LegacyEntry]:
    """Yield each top-level entry of a legacy message set, decompressing wrappers.

    A partial message at the end is an error in a produced set; with `allow_partial` (a
    fetched set cut at max_bytes) it is skipped silently.
    """
    for wrapper in _shallow_messages(memoryview(data), allow_partial, "message set"):
        if wrapper.compression == CompressionType.NONE:
            yield LegacyEntry(wrapper, (wrapper,))
        else:
            yield LegacyEntry(wrapper, _inner_messages(wrapper))


def decode_message_set(data: Buffer, *, allow_partial: bool = False) -> list[LegacyMessage]:
    """Every message of a legacy message set, compressed wrappers replaced by their inner
    messages (Kafka's "deep" iteration)."""
    return [
        m for entry in iter_message_set(data, allow_partial=allow_partial) for m in entry.messages
    ]


def upconvert_message_set(
    data: Buffer,
    *,
    now_ms: int,
    log_append_time: bool = False,
    max_run_bytes: int = DEFAULT_RUN_BYTES,
) -> bytes:
    """Turn a produced legacy message set into v2 batches, ready for the log to validate.

    Each compressed wrapper becomes one batch recompressed with the wrapper's codec; runs
    of uncompressed messages become uncompressed batches of at most about `max_run_bytes`
    legacy bytes each. Keys, values (null stays null) and timestamps are kept, magic 0's
    missing timestamp becoming NO_TIMESTAMP (-1) as in Kafka; a producer's LogAppendTime
    flag is not kept (the topic decides). With `log_append_time` the batches are marked
    LogAppendTime at `now_ms`, as Kafka's converter does for such a topic. Batches are
    numbered from offset 0 without gaps: the log assigns the real offsets. An empty
    message set gives b"". Raises InvalidBatch for a malformed message set.
    """
    out = bytearray()
    run: list[NewRecord] = []
    run_bytes = 0
    next_offset = 0

    def emit(records: list[NewRecord], codec: int) -> None:
        nonlocal next_offset
        out.extend(
            build_batch(
                records,
                base_offset=next_offset,
                compression=codec,
                log_append_time=log_append_time,
                max_timestamp=now_ms if log_append_time else None,
            )
        )
        next_offset += len(records)

    for entry in iter_message_set(data):
        wrapper = entry.wrapper
        if wrapper.compression == CompressionType.NONE:
            size = _message_size(wrapper)
            if run and run_bytes + size > max_run_bytes:
                emit(run, CompressionType.NONE)
                run, run_bytes = [], 0
            run.append(_as_new_record(wrapper))
            run_bytes += size
            continue
        if run:
            emit(run, CompressionType.NONE)
            run, run_bytes = [], 0
        emit([_as_new_record(m) for m in entry.messages], wrapper.compression)
    if run:
        emit(run, CompressionType.NONE)
    return bytes(out)


def downconvert_record_set(data: Buffer, magic: int, *, stop_at_partial: bool = True) -> bytes:
    """Turn fetched v2 batches into a legacy message set of `magic` (0 or 1).

    Each record becomes one uncompressed message at its absolute offset: the simplest
    output every legacy reader accepts, gaps left by compaction included. Headers are
    dropped (legacy messages have none) and control batches (transaction markers) are
    skipped. Magic 1 carries each record's timestamp and the batch's timestamp type;
    magic 0 has neither. A partial batch at the end is dropped, or with
    `stop_at_partial=False` raises InvalidBatch, as does any malformed batch.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    view = memoryview(data)
    batches: Iterable[tuple[BatchHeader, list[Record]]]
    if stop_at_partial:
        batches = iter_record_set(view)
    else:
        batches = (decode_batch(view[pos : pos + h.size]) for pos, h in iter_batches(view))
    out = bytearray()
    for header, records in batches:
        _write_downconverted(out, header, records, magic)
    return bytes(out)


def downconvert_readable(
    data: Buffer, magic: int, max_bytes: int | None = None, min_offset: int = -1
) -> tuple[bytes, InvalidBatch | None]:
    """`downconvert_record_set` of the batches before the first that cannot be read
    (stored data that a disk fault or an older broker left corrupt), and that batch's
    error (None when every batch was read).

    With `max_bytes`, conversion stops once the output holds that many bytes (at least
    one message): each record is a message of its own, so a reader goes on from the next
    offset; records below `min_offset` (the fetch offset, inside the first batch) are
    left out, as Kafka's down-conversion does. Records are decoded one at a time, so a
    stored batch of a million tiny compressed records costs what its first `max_bytes`
    of messages cost (a 56-byte Fetch v0 of one such batch held the broker 5.6 s and
    built a 37 MB answer)."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    view = memoryview(data)
    out = bytearray()
    try:
        for position, header in split_batches(view):
            batch = view[position : position + header.size]
            if header.last_offset < min_offset:
                continue
            records = iter_batch_records(batch, header)
            if header.base_offset < min_offset:
                records = (r for r in records if r.offset >= min_offset)
            if not _write_downconverted(out, header, records, magic, max_bytes):
                break
    except InvalidBatch as exc:
        return bytes(out), exc
    return bytes(out), None


def _write_downconverted(
    out: bytearray,
    header: BatchHeader,
    records: Iterable[Record],
    magic: int,
    max_bytes: int | None = None,
) -> bool:
    """Append the batch's records to `out` as messages; False once `out` holds
    `max_bytes` (the records after are left unread)."""
    if header.is_control:
        return True
    attributes = 0
    if magic == MAGIC_V1 and header.is_log_append_time:
        attributes = TIMESTAMP_TYPE_MASK
    for record in records:
        if out and max_bytes is not None and len(out) >= max_bytes:
            return False
        timestamp = record.timestamp if magic == MAGIC_V1 else NO_TIMESTAMP
        write_message(out, record.offset, magic, timestamp, record.key, record.value, attributes)
    return True


def write_message(
    out: bytearray,
    offset: int,
    magic: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
    attributes: int = 0,
) -> None:
    """Append one [offset, size, message] entry to `out`, CRC included. `timestamp` is
    ignored for magic 0. Compressing is the caller's business: pass the compressed inner
    message set as `value` and the codec in `attributes`."""
    start = len(out)
    out += _ENTRY.pack(offset, 0)
    out += _PREFIX.pack(0, magic, attributes)
    if magic >= MAGIC_V1:
        out += _TIMESTAMP.pack(timestamp)
    for field in (key, value):
        if field is None:
            out += _LENGTH.pack(-1)
        else:
            out += _LENGTH.pack(len(field))
            out += field
    _LENGTH.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    crc = zlib.crc32(memoryview(out)[start + LOG_OVERHEAD + 4 :])
    struct.pack_into(">I", out, start + LOG_OVERHEAD, crc)


def _as_new_record(message: LegacyMessage) -> NewRecord:
    return NewRecord(message.key, message.value, (), message.timestamp)


def _message_size(message: LegacyMessage) -> int:
    overhead = RECORD_OVERHEAD_V0 if message.magic == MAGIC_V0 else RECORD_OVERHEAD_V1
    key = 0 if message.key is None else len(message.key)
    value = 0 if message.value is None else len(message.value)
    return LOG_OVERHEAD + overhead + key + value


def _shallow_messages(view: memoryview, allow_partial: bool, where: str) -> Iterator[LegacyMessage]:
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if allow_partial:
                return
            raise InvalidBatch(f"{where}: {end - pos} trailing bytes are too few for a message")
        offset, size = _ENTRY.unpack_from(view, pos)
        if size < RECORD_OVERHEAD_V0:
            raise InvalidBatch(f"{where}: message at offset {offset} has impossible size {size}")
        start = pos + LOG_OVERHEAD
        if start + size > end:
            if allow_partial:
                return
            raise InvalidBatch(
                f"{where}: message at offset {offset} is truncated: {end - start} of {size} bytes"
            )
        yield _decode_message(view[start : start + size], offset, where)
        pos = start + size


def _decode_message(message: memoryview, offset: int, where: str) -> LegacyMessage:
    where = f"{where}: message at offset {offset}"
    crc, magic, attributes = _PREFIX.unpack_from(message)
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise InvalidBatch(f"{where} has magic {magic}; a legacy message set needs 0 or 1")
    computed = zlib.crc32(message[4:])
    if computed != crc:
        raise InvalidBatch(
            f"{where}: CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})"
        )
    timestamp = NO_TIMESTAMP
    pos = 6
    if magic == MAGIC_V1:
        if len(message) < RECORD_OVERHEAD_V1:
            raise InvalidBatch(f"{where} is {len(message)} bytes, too short for magic 1")
        (timestamp,) = _TIMESTAMP.unpack_from(message, pos)
        pos += 8
    key, pos = _read_bytes(message, pos, where, "key")
    value, pos = _read_bytes(message, pos, where, "value")
    if pos != len(message):
        raise InvalidBatch(f"{where} has {len(message) - pos} bytes after its value")
    return LegacyMessage(offset, magic, attributes, timestamp, key, value)


def _read_bytes(message: memoryview, pos: int, where: str, name: str) -> tuple[bytes | None, int]:
    if pos + 4 > len(message):
        raise InvalidBatch(f"{where} ends before its {name} length")
    (length,) = _LENGTH.unpack_from(message, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(message):
        raise InvalidBatch(f"{where} has an impossible {name} length {length}")
    return message[pos : pos + length].tobytes(), pos + length


def _inner_messages(wrapper: LegacyMessage) -> tuple[LegacyMessage, ...]:
    where = f"compressed message at offset {wrapper.offset}"
    codec = wrapper.compression
    if codec not in _LEGACY_CODECS:
        # zstd needs magic 2 (KIP-110); ids 5-7 were never assigned.
        raise InvalidBatch(f"{where}: codec id {codec} is not allowed with magic {wrapper.magic}")
    if wrapper.value is None:
        raise InvalidBatch(f"{where} has a null value")
    payload = wrapper.value
    if codec == CompressionType.LZ4 and wrapper.magic == MAGIC_V0:
        payload = _fix_lz4_header_checksum(payload)
    try:
        data = decompress(codec, payload)
    except CompressionError as exc:
        raise InvalidBatch(f"{where}: {exc}") from None
    inner = list(_shallow_messages(memoryview(data), False, where))
    if not inner:
        raise InvalidBatch(f"{where} holds no messages")
    # As in Kafka's reader, a base below 0 (a producer that left the wrapper's offset at
    # 0) means the inner offsets are taken as they are.
    base = wrapper.offset - inner[-1].offset if wrapper.magic == MAGIC_V1 else 0
    base = max(base, 0)
    out: list[LegacyMessage] = []
    for message in inner:
        if message.magic != wrapper.magic:
            raise InvalidBatch(
                f"{where}: inner message magic {message.magic} differs from the wrapper's"
            )
        if message.compression != CompressionType.NONE:
            raise InvalidBatch(f"{where}: inner message at offset {message.offset} is compressed")
        if wrapper.is_log_append_time:
            message = replace(
                message,
                timestamp=wrapper.timestamp,
                attributes=message.attributes | TIMESTAMP_TYPE_MASK,
            )
        out.append(replace(message, offset=base + message.offset))
    return tuple(out)


# KAFKA-3160: Kafka before 0.10 (so every magic 0 writer) computed the LZ4 frame header
# checksum over the magic number too. As Kafka does for magic 0, accept either checksum:
# write the correct one before a strict decoder sees the frame.
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_CONTENT_SIZE_FLAG: Final = 0x08
_LZ4_DICT_ID_FLAG: Final = 0x01


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return frame
    flags = frame[4]
    end = 6
    if flags & _LZ4_CONTENT_SIZE_FLAG:
        end += 8
    if flags & _LZ4_DICT_ID_FLAG:
        end += 4
    if len(frame) <= end:
        return frame
    checksum = (_xxh32_short(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((checksum,)) + frame[end + 1 :]


_P1: Final = 0x9E3779B1
_P2: Final = 0x85EBCA77
_P3: Final = 0xC2B2AE3D
_P4: Final = 0x27D4EB2F
_P5: Final = 0x165667B1
_M32: Final = 0xFFFFFFFF
_UINT32_LE: Final = struct.Struct("<I")


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """xxHash32 with seed 0 of fewer than 16 bytes (an LZ4 frame descriptor is at most 14),
    so cramjam need not expose xxhash and no extra dependency is needed."""
    if len(data) >= 16:
        raise ValueError("_xxh32_short only hashes inputs shorter than 16 bytes")
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, pos)
        h = _rotl32((h + word * _P3) & _M32, 17) * _P4 & _M32
        pos += 4
    for byte in data[pos:]:
        h = _rotl32((h + byte * _P5) & _M32, 11) * _P1 & _M32
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    h ^= h >> 16
    return h
