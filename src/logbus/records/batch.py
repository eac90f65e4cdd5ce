"""The RecordBatch v2 header: a view over the first 61 bytes of a batch.

Layout (Kafka's record batch format, magic 2): baseOffset int64, batchLength int32,
partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16, lastOffsetDelta
int32, baseTimestamp int64, maxTimestamp int64, producerId int64, producerEpoch int16,
baseSequence int32, recordCount int32. The CRC covers attributes to the end of the batch,
so the broker may rewrite baseOffset and partitionLeaderEpoch in place.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from logbus.records.crc32c import crc32c

HEADER_SIZE = 61
# baseOffset + batchLength: what precedes the bytes that batchLength counts.
LOG_OVERHEAD = 12
MAGIC_V2 = 2
CRC_START = 21

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")


class InvalidBatch(ValueError):
    """A batch whose bytes are not a valid RecordBatch v2 (the peer's fault)."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The decoded header fields of one record batch (values, not a live view)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        """Decode the header at `position`; raise InvalidBatch if it is short or not v2."""
        if len(buf) - position < HEADER_SIZE:
            raise InvalidBatch("record batch shorter than its 61-byte header")
        header = cls(*_HEADER.unpack_from(buf, position))
        if header.magic != MAGIC_V2:
            raise InvalidBatch(f"unsupported record batch magic {header.magic}")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(f"record batch length {header.batch_length} is impossible")
        return header

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def peek_offset_and_length(
    buf: bytes | bytearray | memoryview, position: int = 0
) -> tuple[int, int]:
    """Return (baseOffset, batchLength) at `position`: the 12 bytes before any batch body."""
    base_offset, length = _OFFSET_AND_LENGTH.unpack_from(buf, position)
    return base_offset, length


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """The CRC32C a whole batch should carry (over attributes .. end)."""
    return crc32c(memoryview(batch)[CRC_START:])


def crc_is_valid(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    return compute_crc(memoryview(batch)[: header.size]) == header.crc


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Rewrite baseOffset in place (not covered by the CRC)."""
    _BASE_OFFSET.pack_into(batch, 0, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (not covered by the CRC)."""
    _LEADER_EPOCH.pack_into(batch, 12, epoch)


def iter_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Split a concatenation of whole batches into (position, header) pairs.

    Raises InvalidBatch on a truncated or malformed batch; callers that tolerate a
    partial trailing batch (fetch responses) should use `split_batches` instead.
    """
    view = memoryview(buf)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < len(view):
        header = BatchHeader.parse(view, pos)
        if pos + header.size > len(view):
            raise InvalidBatch("record batch extends past the end of the record set")
        out.append((pos, header))
        pos += header.size
    return out


def split_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Like `iter_batches`, but stop silently at a partial batch at the end.

    A fetch response may end part-way through a batch (the broker cuts at max_bytes);
    those trailing bytes are not an error. A malformed batch that is complete is.
    """
    view = memoryview(buf)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    end = len(view)
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
        if batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(f"record batch length {batch_length} is impossible")
        if pos + LOG_OVERHEAD + batch_length > end:
            break
        header = BatchHeader.parse(view, pos)
        out.append((pos, header))
        pos += header.size
    return out


def has_transactional_batch(buf: bytes | bytearray | memoryview) -> bool:
    """Whether any whole v2 batch in `buf` is transactional (Kafka's
    `ProduceRequest.hasTransactionalRecords`); malformed bytes are left to validation."""
    view = memoryview(buf)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        _, length = _OFFSET_AND_LENGTH.unpack_from(view, pos)
        if view[pos + 16] != MAGIC_V2 or length < HEADER_SIZE - LOG_OVERHEAD:
            return False
        (attributes,) = _ATTRIBUTES.unpack_from(view, pos + CRC_START)
        if attributes & TRANSACTIONAL_FLAG:
            return True
        pos += LOG_OVERHEAD + length
    return False
