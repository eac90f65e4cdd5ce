"""Segment files are opened on use and closed when idle (issue 13, KIP-263): only the active
segment keeps its log file open, at most `OPEN_FILES.capacity` other files are open, and a
file slice keeps its file readable after the segment let go of it."""

from __future__ import annotations

import gc
import os
import uuid
from pathlib import Path

import pytest
from storage_helpers import make_batch

from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager
from logbus.storage.open_files import OPEN_FILES


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def many_segments(tmp_path: Path, segments: int) -> Log:
    """A log whose every batch rolls a new segment (about 1 KiB each)."""
    log = Log(
        tmp_path / "t-0",
        LogConfig(segment_bytes=1500, index_interval_bytes=1),
        now_ms=0,
    )
    for _ in range(segments):
        log.append_as_leader(make_batch(5, value_size=150), leader_epoch=0, now_ms=0)
    return log


def test_an_idle_partition_keeps_one_descriptor(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_id=0, cluster_id="c")
    manager.startup()
    before = open_descriptors()
    manager.create_logs("idle", range(50), LogConfig(), uuid.uuid4(), leader_epoch=0)
    assert open_descriptors() - before == 50
    manager.shutdown()
    assert open_descriptors() == before


def test_only_a_bounded_number_of_segment_files_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OPEN_FILES, "capacity", 4)
    log = many_segments(tmp_path, 40)
    assert len(log.segments) >= 30
    before = open_descriptors()
    for offset in range(0, log.log_end_offset, 5):
        info = log.read(offset, 1 << 20)
        assert info.records is not None
        assert info.records.read()[:8] == offset.to_bytes(8, "big")
        del info
        assert open_descriptors() - before <= 4 + 1
    busy = [s for s in log.segments[:-1] if s.has_open_files]
    assert len(busy) <= 4
    assert log.active_segment.has_open_files
    log.close()


def test_a_slice_outlives_the_segment_letting_go_of_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OPEN_FILES, "capacity", 2)
    log = many_segments(tmp_path, 20)
    first = log.read(0, 1 << 20).records
    assert first is not None
    expected = first.read()
    for offset in range(5, log.log_end_offset, 5):  # every other segment is opened
        log.read(offset, 1 << 20)
    assert not log.segments[0].has_open_files
    assert first.read() == expected  # the slice still holds the (now unshared) file
    fd = first.file.fileno()
    del first
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)
    # The segment opens its file again when read again.
    again = log.read(0, 1 << 20).records
    assert again is not None and again.read() == expected
    del again
    log.close()


class _File:
    """A lazily opened file as the cache sees it: a flag and a close."""

    def __init__(self) -> None:
        self.recently_used = False
        self.closed = False

    def close_idle(self) -> bool:
        self.closed = True
        return True


def test_the_cache_never_keeps_more_than_its_capacity_open() -> None:
    from logbus.storage.open_files import OpenFileCache

    cache = OpenFileCache(capacity=10)
    files = [_File() for _ in range(50)]
    for f in files:
        cache.opened(f)
        assert len(cache) <= 10
    assert sum(not f.closed for f in files) == 10
    assert not files[-1].closed  # the file just opened is never the one closed
    # Many over the bound at once (a lowered capacity): the next open closes them all.
    cache = OpenFileCache(capacity=50)
    files = [_File() for _ in range(50)]
    for f in files:
        cache.opened(f)
    cache.capacity = 10
    cache.opened(_File())
    assert len(cache) == 10
