"""Crash recovery of logs on real files: damage the tail the way a crash can, restart the
LogManager without its clean-shutdown marker, and check what survives."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from logbus.records.batch import BatchHeader, crc_is_valid
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager

CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=256)


def batch(count: int = 2, *, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(i, timestamp=1_000 + i, key=b"k%d" % i, value=b"x" * 60, headers=[])
    return bytes(builder.build())


def start(path: Path) -> LogManager:
    manager = LogManager([path], broker_id=0, default_config=CONFIG)
    manager.startup(now_ms=0)
    return manager


def log_of(manager: LogManager) -> Log:
    log = manager.get_or_create_log("events", 0)
    return log


def all_batches(log: Log) -> list[tuple[BatchHeader, bytes]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        assert info.records is not None
        data = info.records.read()
        pos = 0
        while pos < len(data):
            header = BatchHeader.parse(data, pos)
            out.append((header, data[pos : pos + header.size]))
            pos += header.size
        offset = out[-1][0].next_offset
    return out


def crash_with_data(path: Path, batches: int = 40, flushed: int = 10) -> tuple[int, Path, int]:
    """Append `batches` batches (the first `flushed` flushed and checkpointed), then stop
    without a clean shutdown. Returns (log end offset, active segment file, last batch
    position in it)."""
    manager = start(path)
    log = log_of(manager)
    for i in range(batches):
        log.append_as_leader(batch(), leader_epoch=1)
        if i + 1 == flushed:
            log.flush()
            manager.checkpoint_all()
    active = log.active_segment
    last_position = list(active.iter_headers())[-1][0]
    end = log.log_end_offset
    log_path = active.log_path
    manager.shutdown(clean=False)
    assert not (path / ".kafka_cleanshutdown").exists()
    return end, log_path, last_position


def damage_torn_tail(path: Path, last_position: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 11)


def damage_bad_crc(path: Path, last_position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(last_position + 80)
        value = f.read(1)[0]
        f.seek(last_position + 80)
        f.write(bytes([value ^ 0x5A]))


def damage_zeroed_region(path: Path, last_position: int) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(last_position)
        f.write(bytes(size - last_position))


DAMAGES: dict[str, Callable[[Path, int], None]] = {
    "torn-tail": damage_torn_tail,
    "bad-crc": damage_bad_crc,
    "zeroed-region": damage_zeroed_region,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_last_batch_is_truncated(tmp_path: Path, damage: str) -> None:
    end, log_path, last_position = crash_with_data(tmp_path)
    DAMAGES[damage](log_path, last_position)

    manager = start(tmp_path)
    assert not manager.had_clean_shutdown[tmp_path.resolve()]
    log = log_of(manager)
    assert log.log_end_offset == end - 2
    assert log.active_segment.size == last_position
    batches = all_batches(log)
    assert [h.base_offset for h, _ in batches] == list(range(0, end - 2, 2))
    assert all(crc_is_valid(data, h) for h, data in batches)
    info = log.append_as_leader(batch(), leader_epoch=2)
    assert info.first_offset == end - 2
    assert all_batches(log)[-1][0].base_offset == end - 2
    manager.shutdown()

    manager = start(tmp_path)
    assert log_of(manager).log_end_offset == end
    manager.shutdown()


@pytest.mark.parametrize("garbage", [b"\x00" * 5000, os.urandom(777)], ids=["zeros", "random"])
def test_garbage_after_the_last_batch_is_removed(tmp_path: Path, garbage: bytes) -> None:
    end, log_path, _ = crash_with_data(tmp_path)
    size = os.path.getsize(log_path)
    with open(log_path, "ab") as f:
        f.write(garbage)
    manager = start(tmp_path)
    log = log_of(manager)
    assert log.log_end_offset == end
    assert os.path.getsize(log_path) == size
    assert log.append_as_leader(batch(), leader_epoch=1).first_offset == end
    manager.shutdown()


def test_unclean_restart_without_damage_keeps_everything(tmp_path: Path) -> None:
    end, log_path, _ = crash_with_data(tmp_path)
    # The crash left the active segment's indexes preallocated and zero-filled.
    index = log_path.with_suffix(".index")
    assert index.stat().st_size == CONFIG.segment_index_bytes
    manager = start(tmp_path)
    log = log_of(manager)
    assert log.log_end_offset == end
    assert len(all_batches(log)) == end // 2
    for offset in range(0, end, 7):
        info = log.read(offset, 100)
        assert info.records is not None
        header = BatchHeader.parse(info.records.read())
        assert header.base_offset <= offset <= header.last_offset
    manager.shutdown()
    assert index.stat().st_size < CONFIG.segment_index_bytes


def test_corruption_in_an_older_segment_drops_what_follows(tmp_path: Path) -> None:
    crash_with_data(tmp_path, batches=60, flushed=1)
    segments = sorted((tmp_path / "events-0").glob("*.log"))
    assert len(segments) >= 3
    second = segments[1]
    with open(second, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 8)
    manager = start(tmp_path)
    log = log_of(manager)
    assert log.log_end_offset < int(segments[2].name[:20])
    assert log.active_segment.log_path == second
    assert not segments[-1].exists()
    next_offset = log.log_end_offset
    assert log.append_as_leader(batch(), leader_epoch=1).first_offset == next_offset
    manager.shutdown()


def test_producer_state_survives_an_unclean_restart(tmp_path: Path) -> None:
    manager = start(tmp_path)
    log = log_of(manager)
    for seq in range(0, 120, 2):  # rolls a few segments, each with a snapshot
        log.append_as_leader(batch(2, producer_id=42, base_sequence=seq), leader_epoch=0)
    last = batch(2, producer_id=42, base_sequence=118)
    manager.shutdown(clean=False)

    manager = start(tmp_path)
    log = log_of(manager)
    retry = log.append_as_leader(last, leader_epoch=0)
    assert retry.duplicate and retry.first_offset == 118
    assert log.log_end_offset == 120
    assert len(log.segments) > 2
    info = log.append_as_leader(batch(2, producer_id=42, base_sequence=120), leader_epoch=0)
    assert info.first_offset == 120 and not info.duplicate
    manager.shutdown()


def test_producer_state_after_truncated_tail(tmp_path: Path) -> None:
    manager = start(tmp_path)
    log = log_of(manager)
    for seq in range(0, 10, 2):
        log.append_as_leader(batch(2, producer_id=7, base_sequence=seq), leader_epoch=0)
    log_path = log.active_segment.log_path
    manager.shutdown(clean=False)
    with open(log_path, "r+b") as f:
        f.truncate(os.path.getsize(log_path) - 5)

    manager = start(tmp_path)
    log = log_of(manager)
    assert log.log_end_offset == 8
    # The lost batch (sequence 8) is accepted again, not treated as a duplicate.
    info = log.append_as_leader(batch(2, producer_id=7, base_sequence=8), leader_epoch=0)
    assert info.first_offset == 8 and not info.duplicate
    manager.shutdown()


def test_clean_restart_trusts_the_tail_and_a_crash_after_the_start_recovers(
    tmp_path: Path,
) -> None:
    manager = start(tmp_path)
    log = log_of(manager)
    for _ in range(10):
        log.append_as_leader(batch(), leader_epoch=1)
    log_path = log.active_segment.log_path
    last_position = list(log.active_segment.iter_headers())[-1][0]
    manager.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    # A bad CRC in the last batch: only re-reading the tail (recovery) would see it.
    damage_bad_crc(log_path, last_position)

    manager = start(tmp_path)
    assert manager.had_clean_shutdown[tmp_path.resolve()]
    assert log_of(manager).log_end_offset == 20  # not recovered: the marker vouched
    # The marker vouched for that shutdown only: it is gone while the broker runs.
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    log_of(manager).append_as_leader(batch(), leader_epoch=1)
    manager.shutdown(clean=False)  # a crash after the start

    manager = start(tmp_path)
    assert not manager.had_clean_shutdown[tmp_path.resolve()]
    log = log_of(manager)
    # Re-read from the recovery point: the bad batch and the one after it are cut.
    assert log.log_end_offset == 18
    assert all(crc_is_valid(data, h) for h, data in all_batches(log))
    manager.shutdown()


def test_unclean_restart_keeps_producer_snapshots_within_the_log(tmp_path: Path) -> None:
    manager = start(tmp_path)
    log = log_of(manager)
    for seq in range(0, 10, 2):
        log.append_as_leader(batch(2, producer_id=9, base_sequence=seq), leader_epoch=0)
    manager.shutdown()  # a producer snapshot at offset 10
    snapshot = tmp_path / "events-0" / f"{10:020d}.snapshot"
    assert snapshot.exists()

    manager = start(tmp_path)
    log = log_of(manager)
    for seq in range(10, 14, 2):
        log.append_as_leader(batch(2, producer_id=9, base_sequence=seq), leader_epoch=0)
    manager.shutdown(clean=False)  # a crash: the tail is re-read from the recovery point

    manager = start(tmp_path)
    log = log_of(manager)
    assert log.log_end_offset == 14
    assert snapshot.exists()  # it still describes the log up to offset 10
    retry = log.append_as_leader(batch(2, producer_id=9, base_sequence=12), leader_epoch=0)
    assert retry.duplicate and retry.first_offset == 12
    info = log.append_as_leader(batch(2, producer_id=9, base_sequence=14), leader_epoch=0)
    assert info.first_offset == 14 and not info.duplicate
    manager.shutdown()
