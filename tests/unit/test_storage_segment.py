from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_helpers import at_offset, headers_of, make_batch

from logbus.records.batch import BatchHeader
from logbus.storage.errors import CorruptIndexError
from logbus.storage.log_config import LogConfig
from logbus.storage.segment import LogSegment
from logbus.storage.time_index import TimestampOffset


def fill(
    segment: LogSegment, batches: int, records: int = 5, *, start: int = 0, ts: int = 1000
) -> list[int]:
    """Append `batches` batches of `records` records; return their positions."""
    positions = []
    offset = start
    for i in range(batches):
        data = at_offset(make_batch(records, timestamp=ts + i, value_size=100), offset)
        positions.append(segment.size)
        last = offset + records - 1
        segment.append(last, ts + i, last, data)
        offset = last + 1
    return positions


def test_append_read_round_trip(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=1000)
    positions = fill(segment, 20)
    assert (tmp_path / "00000000000000000000.log").stat().st_size == segment.size
    assert segment.offset_index.entries > 0

    read = segment.read(37, 1 << 20)
    assert read is not None
    assert read.first_offset == 35 and read.position == positions[7]
    data = read.slice.read()
    assert len(data) == segment.size - positions[7]
    assert [h.base_offset for h in headers_of(data)] == list(range(35, 100, 5))

    assert segment.read(100, 1 << 20) is None
    assert segment.read_next_offset() == 100
    segment.close()


def test_read_limits(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    positions = fill(segment, 4)
    batch_size = positions[1]
    read = segment.read(0, 10)
    assert read is not None and read.slice.size == 10  # a partial batch, as Kafka sends
    read = segment.read(0, 10, min_one_message=True)
    assert read is not None and read.slice.size == batch_size
    read = segment.read(5, 1 << 20, max_position=positions[3])
    assert read is not None and read.slice.size == positions[3] - positions[1]
    read = segment.read(0, 0)
    assert read is not None and read.slice.size == 0
    segment.close()


def test_translate_offset_uses_index(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 100, index_interval_bytes=500)
    positions = fill(segment, 50, start=100)
    assert segment.offset_index.entries >= 10
    for batch in range(50):
        for offset in (100 + batch * 5, 100 + batch * 5 + 4):
            location = segment.translate_offset(offset)
            assert location is not None
            assert location.position == positions[batch]
            assert location.base_offset == 100 + batch * 5
    segment.close()


def test_reopen_keeps_indexes_and_timestamps(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=500)
    fill(segment, 30, ts=5000)
    entries = segment.offset_index.entries
    segment.close()
    assert (tmp_path / "00000000000000000000.index").stat().st_size == entries * 8

    reopened = LogSegment(tmp_path, 0, index_interval_bytes=500, active=False)
    reopened.sanity_check()
    assert reopened.offset_index.entries == entries
    assert reopened.max_timestamp_so_far == 5029
    assert reopened.offset_of_max_timestamp_so_far == 149
    assert reopened.read_next_offset() == 150
    reopened.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    offset = 0
    for i in range(20):
        stamps = [10_000 + i * 100 + j * 10 for j in range(5)]
        data = at_offset(make_batch(5, timestamps=stamps), offset)
        segment.append(offset + 4, max(stamps), offset + 4, data)
        offset += 5
    assert segment.find_offset_by_timestamp(0) == TimestampOffset(10_000, 0)
    assert segment.find_offset_by_timestamp(10_520) == TimestampOffset(10_520, 27)
    assert segment.find_offset_by_timestamp(10_525) == TimestampOffset(10_530, 28)
    assert segment.find_offset_by_timestamp(11_940) == TimestampOffset(11_940, 99)
    assert segment.find_offset_by_timestamp(11_941) is None
    assert segment.find_offset_by_timestamp(0, starting_offset=42) == TimestampOffset(10_820, 42)
    segment.close()


def test_find_offset_by_timestamp_in_compressed_batch(tmp_path: Path) -> None:
    from logbus.records.compression import decompress

    segment = LogSegment(tmp_path, 0)
    stamps = [100, 200, 300, 400]
    data = make_batch(4, timestamps=stamps, compression=1)
    segment.append(3, 400, 3, data)
    assert segment.find_offset_by_timestamp(250, decompress=decompress) == TimestampOffset(300, 2)
    # Without a codec the batch's first offset stands in (never past the answer).
    assert segment.find_offset_by_timestamp(250) == TimestampOffset(400, 0)
    segment.close()


def test_truncate_to(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=500)
    positions = fill(segment, 30)
    removed = segment.truncate_to(52)  # inside batch 10 (offsets 50..54)
    assert removed > 0
    assert segment.size == positions[10]
    assert segment.read_next_offset() == 50
    assert segment.offset_index.last_offset < 52
    assert segment.max_timestamp_so_far == 1009
    assert segment.truncate_to(1000) == 0
    segment.close()


def test_should_roll(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, created_ms=0)
    config = LogConfig(segment_bytes=1000, segment_ms=10_000)
    assert not segment.should_roll(config, 100, 0, 0, now_ms=99_999)
    fill(segment, 1, ts=50_000)
    size = segment.size
    assert segment.should_roll(config, 1001 - size, 50_000, 5, now_ms=0)
    assert not segment.should_roll(config, 10, 60_000, 5, now_ms=0)
    # segment.ms counts from the first batch's timestamp to the incoming one.
    assert segment.should_roll(config, 10, 60_001, 5, now_ms=0)
    assert segment.should_roll(config, 10, 50_000, 1 << 31, now_ms=0)
    segment.close()


def _corrupt_and_recover(tmp_path: Path, damage: str) -> tuple[LogSegment, list[int], int]:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=500)
    positions = fill(segment, 10)
    size = segment.size
    segment.close(clean=False)
    path = tmp_path / "00000000000000000000.log"
    with open(path, "r+b") as f:
        if damage == "torn":
            f.truncate(size - 7)
        elif damage == "crc":
            f.seek(positions[9] + 70)
            byte = f.read(1)
            f.seek(positions[9] + 70)
            f.write(bytes([byte[0] ^ 0xFF]))
        elif damage == "garbage":
            f.seek(size)
            f.write(os.urandom(300))
        elif damage == "zeros":
            f.seek(size)
            f.write(bytes(4096))
        elif damage == "zeroed-region":
            f.seek(positions[9])
            f.write(bytes(size - positions[9]))
    recovered = LogSegment(tmp_path, 0, index_interval_bytes=500, active=False)
    truncated = recovered.recover(max_message_size=1 << 20)
    return recovered, positions, truncated


@pytest.mark.parametrize("damage", ["torn", "crc", "zeroed-region"])
def test_recover_truncates_the_damaged_last_batch(tmp_path: Path, damage: str) -> None:
    segment, positions, truncated = _corrupt_and_recover(tmp_path, damage)
    assert truncated > 0
    assert segment.size == positions[9]
    assert segment.read_next_offset() == 45
    assert segment.translate_offset(44) is not None
    assert segment.translate_offset(45) is None
    segment.sanity_check()
    segment.close()


@pytest.mark.parametrize("damage", ["garbage", "zeros"])
def test_recover_drops_trailing_garbage(tmp_path: Path, damage: str) -> None:
    segment, positions, truncated = _corrupt_and_recover(tmp_path, damage)
    assert truncated > 0
    assert segment.read_next_offset() == 50
    assert segment.size == positions[9] + (positions[9] - positions[8])
    segment.close()


def test_recover_rejects_offsets_going_backwards_and_oversized(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0)
    first = at_offset(make_batch(3), 0)
    second = at_offset(make_batch(2), 0)  # offsets go back
    segment.append(2, 1000, 2, first)
    segment.append(1, 1000, 1, second)
    assert segment.recover(1 << 20) == len(second)
    assert segment.size == len(first)
    assert segment.recover(10) == len(first)  # every batch is over the size limit
    assert segment.size == 0
    segment.close()


def test_recover_rebuilds_indexes(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=500)
    fill(segment, 30)
    entries = segment.offset_index.entries
    segment.close()
    (tmp_path / "00000000000000000000.index").write_bytes(b"\x00" * 12)
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=500, active=False)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()
    assert reopened.recover(1 << 20) == 0
    assert reopened.offset_index.entries == entries
    reopened.sanity_check()
    reopened.close()


def test_delete_via_suffix(tmp_path: Path) -> None:
    segment = LogSegment(tmp_path, 7)
    fill(segment, 2, start=7)
    segment.change_file_suffixes("", ".deleted")
    names = sorted(os.listdir(tmp_path))
    assert names == [
        "00000000000000000007.index.deleted",
        "00000000000000000007.log.deleted",
        "00000000000000000007.timeindex.deleted",
    ]
    read = segment.read(7, 100)  # still readable while deletion is pending
    assert read is not None and BatchHeader.parse(read.slice.read()).base_offset == 7
    segment.delete()
    assert os.listdir(tmp_path) == []
