from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from storage_helpers import at_offset, headers_of, make_batch

from logbus.records.batch import BatchHeader, compute_crc, crc_is_valid
from logbus.storage.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from logbus.storage.log import Log, TimestampAndOffset
from logbus.storage.log_config import LogConfig


def open_log(tmp_path: Path, **config: object) -> Log:
    return Log(tmp_path / "orders-0", LogConfig(**config), now_ms=0)  # type: ignore[arg-type]


def read_all(log: Log, start: int = 0) -> bytes:
    """Everything from `start` (one read returns at most one segment's bytes)."""
    out = b""
    while start < log.log_end_offset:
        info = log.read(start, 1 << 30)
        assert info.records is not None
        data = info.records.read()
        out += data
        start = headers_of(data)[-1].next_offset
    return out


def test_append_assigns_offsets_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = make_batch(3)
    info = log.append_as_leader(first, leader_epoch=5, now_ms=1)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.log_append_time == -1 and not info.duplicate
    two = make_batch(2) + make_batch(4)
    info = log.append_as_leader(two, leader_epoch=5, now_ms=2)
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 8, 6)
    assert log.log_end_offset == 9

    data = read_all(log)
    assert len(data) == len(first) + len(two)
    headers = headers_of(data)
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4), (5, 8)]
    assert all(h.partition_leader_epoch == 5 for h in headers)
    # Only baseOffset and partitionLeaderEpoch changed: the rest is as received.
    sent = first + two
    pos = 0
    for h in headers:
        stored, original = data[pos : pos + h.size], sent[pos : pos + h.size]
        assert stored[8:12] == original[8:12] and stored[16:] == original[16:]
        assert crc_is_valid(stored, h)
        pos += h.size
    assert log.leader_epoch_cache.latest_epoch == 5
    log.close()


def test_log_append_time_rewrites_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(make_batch(3, timestamp=5), leader_epoch=0, now_ms=777_000)
    assert info.log_append_time == 777_000 and info.max_timestamp == 777_000
    data = read_all(log)
    header = BatchHeader.parse(data)
    assert header.is_log_append_time and header.max_timestamp == 777_000
    assert crc_is_valid(data, header)
    decoded = DefaultRecordBatch(bytearray(data))
    assert decoded.validate_crc()
    assert [r.timestamp for r in decoded] == [777_000] * 3
    log.close()


def test_rejects_bad_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500, segment_bytes=2000)
    good = make_batch(2)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as exc:
        log.append_as_leader(bytes(bad_crc), 0)
    assert exc.value.error_code == 2
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + good[:30], 0)  # partial trailing batch
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good[:8] + struct.pack(">i", 10) + good[12:], 0)
    with pytest.raises(RecordTooLargeError) as too_large:
        log.append_as_leader(make_batch(1, value_size=600), 0)
    assert too_large.value.error_code == 10
    with pytest.raises(RecordListTooLargeError) as too_many:
        log.append_as_leader(make_batch(1, value_size=300) * 8, 0)
    assert too_many.value.error_code == 18

    old_magic = bytearray(good)
    old_magic[16] = 1
    with pytest.raises(InvalidRecordError) as invalid:
        log.append_as_leader(bytes(old_magic), 0)
    assert invalid.value.error_code == 87

    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 3)
    struct.pack_into(">I", wrong_count, 17, compute_crc(wrong_count))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(wrong_count), 0)

    lying_count = bytearray(good)  # claims 9 records in a body holding 2
    struct.pack_into(">i", lying_count, 57, 9)
    struct.pack_into(">i", lying_count, 23, 8)
    struct.pack_into(">I", lying_count, 17, compute_crc(lying_count))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(lying_count), 0)

    control = bytearray(good)
    struct.pack_into(">h", control, 21, 0x20)
    struct.pack_into(">I", control, 17, compute_crc(control))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(control), 0)

    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.close()


def test_empty_append_is_a_no_op(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(b"", 0)
    assert info.record_count == 0 and log.log_end_offset == 0
    log.close()


def test_compacted_topic_requires_keys(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="compact")
    log.append_as_leader(make_batch(2), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch(2, keys=[b"a", None]), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch(2, keys=[None, None], compression=1), 0)
    log.close()


def test_roll_by_size_and_read_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    for _ in range(30):
        log.append_as_leader(make_batch(2, value_size=50), 0)
    assert len(log.segments) > 3
    assert all(s.size <= 1000 for s in log.segments)
    names = sorted(p.name for p in log.dir.iterdir() if p.suffix == ".log")
    assert names[0] == "00000000000000000000.log"
    assert [int(n[:20]) for n in names] == [s.base_offset for s in log.segments]
    assert (log.dir / f"{log.segments[1].base_offset:020d}.snapshot").exists()
    offset = 0
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        assert info.records is not None
        headers = headers_of(info.records.read())
        assert headers[0].base_offset == offset
        offset = headers[-1].next_offset
    assert offset == 60
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(make_batch(1, timestamp=10_000), 0, now_ms=10_000)
    log.append_as_leader(make_batch(1, timestamp=10_900), 0, now_ms=10_900)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, timestamp=11_001), 0, now_ms=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_reopen_after_clean_close(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000)
    for i in range(20):
        log.append_as_leader(make_batch(3, timestamp=1000 + i), 2)
    before = read_all(log)
    log.close()
    log = open_log(tmp_path, segment_bytes=2000)
    assert log.log_end_offset == 60
    assert log.recovery_point == 60
    assert read_all(log) == before
    info = log.append_as_leader(make_batch(1), 3)
    assert info.first_offset == 60
    assert log.leader_epoch_cache.entries[-1] == (3, 60)
    log.close()


def test_read_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(make_batch(2), 0)
    with pytest.raises(OffsetOutOfRangeError) as exc:
        log.read(11, 100)
    assert exc.value.error_code == 1
    assert log.read(10, 100).records is None
    # The high watermark bound leaves out batches at or past it.
    info = log.read(0, 1 << 20, max_offset=6)
    assert info.records is not None
    assert [h.base_offset for h in headers_of(info.records.read())] == [0, 2, 4]
    assert log.read(6, 1 << 20, max_offset=6).records is None
    log.high_watermark = 10
    assert log.maybe_increment_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert log.read(4, 100).records is not None
    log.close()


def test_min_one_message(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(1, value_size=500), 0)
    partial = log.read(0, 100)
    assert partial.records is not None and partial.records.size == 100
    whole = log.read(0, 100, min_one_message=True)
    assert whole.records is not None and whole.records.size == log.size_in_bytes
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600)
    for i in range(20):
        stamps = [1000 * i + 10 * j for j in range(3)]
        log.append_as_leader(make_batch(3, timestamps=stamps), 7)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(-2) == TimestampAndOffset(-1, 0, 7)
    assert log.offset_for_timestamp(-1) == TimestampAndOffset(-1, 60, 7)
    assert log.offset_for_timestamp(-3) == TimestampAndOffset(19_020, 59, 7)
    assert log.offset_for_timestamp(0) == TimestampAndOffset(0, 0, 7)
    assert log.offset_for_timestamp(5_015) == TimestampAndOffset(5_020, 17, 7)
    assert log.offset_for_timestamp(12_000) == TimestampAndOffset(12_000, 36, 7)
    assert log.offset_for_timestamp(19_021) is None
    log.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=350)
    for epoch in range(10):
        log.append_as_leader(
            make_batch(2, producer_id=9, producer_epoch=0, base_sequence=2 * epoch), epoch
        )
    log.high_watermark = 20
    assert len(log.segments) > 2
    assert log.truncate_to(8)
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.leader_epoch_cache.latest_epoch == 3
    assert headers_of(read_all(log))[-1].last_offset == 7
    # Producer state went back with the log: sequence 8 is next again.
    info = log.append_as_leader(make_batch(2, producer_id=9, producer_epoch=0, base_sequence=8), 11)
    assert info.first_offset == 8 and not info.duplicate
    assert not log.truncate_to(100)
    log.remove_deleted_segments(force=True)
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
    log.close()


def test_truncate_at_the_log_end_drops_an_epoch_started_there(tmp_path: Path) -> None:
    """A broker that led epoch 5 without appending has an entry (5, end) the next leader
    does not know: truncating to the end keeps the records and drops it (as Kafka)."""
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2), 3)
    log.leader_epoch_cache.assign(5, log.log_end_offset)
    assert not log.truncate_to(2)
    assert log.log_end_offset == 2
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0)]
    log.close()


def test_truncate_fully(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(5), 0)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.append_as_leader(make_batch(1), 1).first_offset == 100
    log.close()
    log = open_log(tmp_path)
    assert log.log_end_offset == 101
    log.close()


def test_retention_by_size_and_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=700, retention_bytes=1000, file_delete_delay_ms=100)
    for i in range(20):
        log.append_as_leader(make_batch(2, timestamp=i), 0)
    count = len(log.segments)
    assert log.delete_old_segments(now_ms=1000) == 0  # nothing below the high watermark
    log.high_watermark = log.log_end_offset
    deleted = log.delete_old_segments(now_ms=1000)
    assert deleted > 0 and len(log.segments) == count - deleted
    # Deletion stops before the log would shrink below retention.bytes.
    assert log.size_in_bytes >= 1000 > log.size_in_bytes - log.segments[0].size
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert any(p.name.endswith(".log.deleted") for p in log.dir.iterdir())
    assert log.remove_deleted_segments(now_ms=1050) == 0
    assert log.remove_deleted_segments(now_ms=1100) == deleted
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()

    log = open_log(tmp_path, segment_bytes=700, retention_ms=5000, retention_bytes=-1)
    log.high_watermark = log.log_end_offset
    end = log.log_end_offset
    # Segments 12 and 24 hold timestamps up to 11 and 17; segment 36 up to 19.
    assert log.delete_old_segments(now_ms=5019) == 2
    assert log.log_start_offset == 36
    log.delete_old_segments(now_ms=10**6)  # everything expired: the log rolls and empties
    assert log.log_start_offset == end and log.log_end_offset == end
    assert log.append_as_leader(make_batch(1), 0).first_offset == end
    log.close()


def test_flush_messages_policy(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=4)
    log.append_as_leader(make_batch(3), 0)
    assert log.recovery_point == 0 and log.unflushed_messages == 3
    log.append_as_leader(make_batch(1), 0)
    assert log.recovery_point == 4 and log.unflushed_messages == 0
    log.append_as_leader(make_batch(1), 0)
    log.flush(now_ms=99)
    assert log.recovery_point == 5 and log.last_flush_ms == 99
    log.close()


def test_idempotent_duplicates_across_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batch = make_batch(3, producer_id=1234, producer_epoch=0, base_sequence=0)
    assert log.append_as_leader(batch, 0).first_offset == 0
    log.append_as_leader(make_batch(1), 0)  # someone else's data
    retry = log.append_as_leader(batch, 0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    assert log.log_end_offset == 4
    log.close()

    log = open_log(tmp_path)
    assert log.append_as_leader(batch, 0).duplicate
    with pytest.raises(OutOfOrderSequenceError) as exc:
        log.append_as_leader(make_batch(1, producer_id=1234, producer_epoch=0, base_sequence=5), 0)
    assert exc.value.error_code == 45
    nxt = make_batch(1, producer_id=1234, producer_epoch=0, base_sequence=3)
    assert log.append_as_leader(nxt, 0).first_offset == 4
    log.close()


def test_append_as_follower(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = at_offset(make_batch(2), 0) + at_offset(make_batch(3), 2)
    info = log.append_as_follower(data)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 4, 5)
    assert read_all(log) == data
    with pytest.raises(Exception, match="below the log end"):
        log.append_as_follower(at_offset(make_batch(1), 3))
    log.close()


def test_topic_id_is_checked(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    log = Log(tmp_path / "t-1", LogConfig(), topic_id=topic_id)
    assert (tmp_path / "t-1" / "partition.metadata").exists()
    log.close()
    with pytest.raises(InconsistentTopicIdError):
        Log(tmp_path / "t-1", LogConfig(), topic_id=uuid.uuid4())
    log = Log(tmp_path / "t-1", LogConfig())
    assert log.topic_id == topic_id
    log.close()


def test_directory_name_parsing(tmp_path: Path) -> None:
    log = Log(tmp_path / "my-dashed.topic-12", LogConfig())
    assert (log.topic, log.partition) == ("my-dashed.topic", 12)
    log.close()
    with pytest.raises(ValueError):
        Log(tmp_path / "nopartition", LogConfig())
    assert not os.path.exists(tmp_path / "nopartition")


def test_flush_from_another_thread_while_appending_and_rolling(tmp_path: Path) -> None:
    import threading

    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=100)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for _ in range(300):
            log.append_as_leader(make_batch(2, value_size=40), 0)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    log.flush()
    assert log.recovery_point == log.log_end_offset == 600
    assert len(headers_of(read_all(log))) == 300
    log.close()
