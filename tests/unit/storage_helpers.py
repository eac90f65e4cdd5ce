"""For storage tests: record batches built by kafka-python (an independent encoder), a
compacted log, its records read back by kafka-python, and a log cleaner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from logbus.records.batch import (
    BatchHeader,
    set_base_offset,
)
from logbus.storage.cleaner import (
    Cleaner,
)
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.storage.offset_map import OffsetMap
from logbus.storage.throttler import Throttler


def make_batch(
    count: int = 1,
    *,
    timestamp: int = 1000,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: int = 0,
) -> bytes:
    """One v2 batch of `count` records (offset deltas 0..count-1, base offset 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i in range(count):
        ts = timestamps[i] if timestamps is not None else timestamp
        key = keys[i] if keys is not None else b"key-%d" % i
        builder.append(i, timestamp=ts, key=key, value=b"v" * value_size, headers=[])
    return bytes(builder.build())


def headers_of(data: bytes) -> list[BatchHeader]:
    """The headers of a concatenation of batches."""
    out = []
    pos = 0
    while pos < len(data):
        header = BatchHeader.parse(data, pos)
        out.append(header)
        pos += header.size
    return out


def at_offset(batch: bytes, base_offset: int) -> bytes:
    """`batch` with its base offset rewritten (as the log does on append)."""
    buf = bytearray(batch)
    set_base_offset(buf, base_offset)
    return bytes(buf)


def open_log(directory: Path, **config: object) -> Log:
    settings: dict[str, object] = {"cleanup_policy": "compact", "segment_bytes": 200}
    settings.update(config)
    return Log(directory / "compacted-0", LogConfig(**settings), now_ms=0)  # type: ignore[arg-type]


def records_of(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, decoded by kafka-python, CRCs checked."""
    out = []
    for segment in log.segments:
        records = MemoryRecords(segment.read_bytes(0, segment.size))
        while records.has_next():
            b = records.next_batch()
            assert b.validate_crc()
            out.extend((r.offset, r.key, r.value) for r in b)
    return out


def new_cleaner(hook: object = None) -> Cleaner:
    return Cleaner(OffsetMap(1 << 20), Throttler(float("inf")), hook=hook)  # type: ignore[arg-type]
