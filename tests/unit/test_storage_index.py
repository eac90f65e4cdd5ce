from __future__ import annotations

import struct
from pathlib import Path

import pytest

from logbus.storage.abstract_index import IndexFullError
from logbus.storage.errors import CorruptIndexError
from logbus.storage.offset_index import OffsetIndex, OffsetPosition
from logbus.storage.time_index import TimeIndex, TimestampOffset


def test_offset_index_lookup_is_floor(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    for i in range(1, 11):
        index.append(100 + i * 10, i * 1000)
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(100) == OffsetPosition(100, 0)
    assert index.lookup(110) == OffsetPosition(110, 1000)
    assert index.lookup(115) == OffsetPosition(110, 1000)
    assert index.lookup(199) == OffsetPosition(190, 9000)
    assert index.lookup(10**9) == OffsetPosition(200, 10000)
    assert index.entries == 10
    index.close()


def test_offset_index_rejects_non_increasing_entries(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 1024)
    index.append(5, 100)
    with pytest.raises(ValueError):
        index.append(5, 200)
    with pytest.raises(ValueError):
        index.append(6, 100)
    with pytest.raises(ValueError):
        index.append(1 << 31, 300)
    index.close()


def test_offset_index_file_format_and_trim_on_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.index"
    index = OffsetIndex(path, 50, 4096)
    assert path.stat().st_size == 4096  # preallocated
    index.append(60, 4100)
    index.append(75, 8300)
    index.close()
    data = path.read_bytes()
    assert data == struct.pack(">iiii", 10, 4100, 25, 8300)

    reopened = OffsetIndex(path, 50, 4096, writable=False)
    assert reopened.entries == 2
    assert reopened.lookup(80) == OffsetPosition(75, 8300)
    reopened.sanity_check(log_size=9000)
    reopened.close()


def test_offset_index_truncate_to(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 1024)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.truncate_to(30)  # removes 30 and later
    assert index.entries == 2
    assert index.last_offset == 20
    index.truncate_to(15)
    assert index.entries == 1
    index.truncate_to(0)
    assert index.entries == 0
    assert index.lookup(100) == OffsetPosition(0, 0)
    index.append(5, 50)
    assert index.lookup(7) == OffsetPosition(5, 50)
    index.close()


def test_offset_index_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 16)
    index.append(1, 10)
    index.append(2, 20)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(3, 30)
    index.close()


def test_offset_index_sanity_check_detects_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", 10, 4100) + bytes(8 * 5))
    index = OffsetIndex(path, 0, 1024, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close(trim=False)


def test_offset_index_sanity_check_detects_partial_entry_and_past_end(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", 10, 4100) + b"\x00\x01")
    index = OffsetIndex(path, 0, 1024, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close()
    path.write_bytes(struct.pack(">ii", 10, 4100))
    index = OffsetIndex(path, 0, 1024, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=4000)
    index.close()


def test_time_index_only_appends_growing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000010.timeindex", 10, 1200)
    assert index.maybe_append(1000, 12)
    assert not index.maybe_append(1000, 15)
    assert not index.maybe_append(900, 16)
    assert index.maybe_append(2000, 20)
    assert index.entries == 2
    with pytest.raises(ValueError):
        index.maybe_append(3000, 19)
    assert index.lookup(999) == TimestampOffset(-1, 10)
    assert index.lookup(1000) == TimestampOffset(1000, 12)
    assert index.lookup(1999) == TimestampOffset(1000, 12)
    assert index.lookup(5000) == TimestampOffset(2000, 20)
    index.close()
    data = (tmp_path / "00000000000000000010.timeindex").read_bytes()
    assert data == struct.pack(">qiqi", 1000, 2, 2000, 10)


def test_time_index_truncate_and_reserved_slot(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "0.timeindex", 0, 36)  # three entries
    assert index.maybe_append(100, 1)
    assert index.maybe_append(200, 2)
    assert index.is_full  # the last slot is kept for the final entry
    assert not index.maybe_append(300, 3)
    assert index.maybe_append(300, 3, skip_full_check=True)
    index.truncate_to(2)
    assert index.entries == 1
    assert index.last_entry == TimestampOffset(100, 1)
    index.close()


def test_time_index_sanity_check_detects_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    path.write_bytes(struct.pack(">qi", 5000, 3) + bytes(24))
    index = TimeIndex(path, 0, 1200, writable=False)
    with pytest.raises(CorruptIndexError):
        index.sanity_check()
    index.close(trim=False)


def test_index_lookup_does_not_reread_file(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "0.index", 0, 80_000)
    for i in range(1, 10_001):
        index.append(i, i * 10)
    # Lookups go through the memory map (binary search), not file reads.
    assert index.lookup(5_555) == OffsetPosition(5_555, 55_550)
    index.flush()
    index.close()
    assert (tmp_path / "0.index").stat().st_size == 80_000


def test_time_index_final_entry_fits_in_a_trimmed_file(tmp_path: Path) -> None:
    path = tmp_path / "0.timeindex"
    index = TimeIndex(path, 0, 1200)
    index.maybe_append(100, 1)
    index.close()
    reopened = TimeIndex(path, 0, 1200, writable=False)
    assert reopened.maybe_append(200, 5, skip_full_check=True)
    reopened.close()
    assert path.stat().st_size == 24
