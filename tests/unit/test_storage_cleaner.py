"""The log cleaner on real logs in a temporary directory: what a pass keeps, how it picks
logs, and that an interrupted pass never loses a retained record."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from storage_helpers import new_cleaner, open_log, records_of

from kafka_wire import wait_for
from logbus.records.batch import DELETE_HORIZON_FLAG, HEADER_SIZE, BatchHeader, compute_crc
from logbus.storage.checkpoint import OffsetCheckpointFile
from logbus.storage.cleaner import (
    PHASE_CLEANED,
    PHASE_DELETED,
    PHASE_DONE,
    PHASE_OFFSET_MAP,
    PHASE_SWAP,
    Cleaner,
    group_segments_by_size,
)
from logbus.storage.log import Log
from logbus.storage.log_cleaner import CleanerConfig, LogCleaner
from logbus.storage.log_cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager
from logbus.storage.offset_map import OffsetMap
from logbus.storage.throttler import Throttler

NOW = 10_000_000
Pair = tuple[bytes | None, bytes | None]


def batch(
    pairs: Sequence[Pair],
    *,
    timestamp: int = 1000,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One v2 batch built by kafka-python (an independent encoder)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())




def append(log: Log, pairs: Sequence[Pair], **kwargs: int) -> None:
    log.append_as_leader(batch(pairs, **kwargs), 0)
    log.high_watermark = log.log_end_offset




def batch_headers(log: Log) -> list[BatchHeader]:
    return [h for s in log.segments for _, h in s.iter_headers()]


def latest_per_key(
    expected: list[tuple[int, bytes | None, bytes | None]],
) -> list[tuple[int, bytes | None, bytes | None]]:
    last: dict[bytes | None, tuple[int, bytes | None, bytes | None]] = {}
    for item in expected:
        last[item[1]] = item
    return sorted(last.values())




def cleaner_for(log: Log) -> LogCleaner:
    return LogCleaner(
        CleanerConfig(), [log.dir.parent], lambda: [(("compacted", 0), log, log.dir.parent)]
    )


def fill(log: Log, rounds: int = 6, keys: int = 4) -> list[tuple[int, bytes | None, bytes | None]]:
    """Several segments of updates to `keys` keys; returns what was written."""
    written = []
    for r in range(rounds):
        pairs: list[Pair] = [(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)]
        first = log.log_end_offset
        append(log, pairs)
        written.extend((first + i, key, value) for i, (key, value) in enumerate(pairs))
    log.roll()
    return written


def test_a_pass_keeps_the_latest_record_of_each_key_at_its_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    written = fill(log)
    assert len(log.segments) > 3
    before = records_of(log)
    manager = cleaner_for(log)
    assert manager.clean_filthiest_log(new_cleaner(), NOW)
    after = records_of(log)
    assert after == latest_per_key(before)
    assert after == latest_per_key(written)
    # The checkpoint says where the next pass starts; nothing is dirty any more.
    checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read()
    assert checkpoint == {("compacted", 0): log.active_segment.base_offset}
    assert not manager.clean_filthiest_log(new_cleaner(), NOW)
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    # Reads through the log return the same records, and reopening changes nothing.
    log.close()
    reopened = open_log(tmp_path)
    assert records_of(reopened) == after
    assert reopened.log_end_offset == written[-1][0] + 1
    reopened.close()


def test_the_active_segment_and_data_above_the_high_watermark_are_never_cleaned(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path, segment_bytes=10_000)
    append(log, [(b"a", b"1"), (b"a", b"2")])
    append(log, [(b"a", b"3")])
    assert not cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    assert [v for _, _, v in records_of(log)] == [b"1", b"2", b"3"]
    log.roll()
    log.high_watermark = 1  # the segment is not entirely below the high watermark
    assert not cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    log.high_watermark = log.log_end_offset
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(log) == [(2, b"a", b"3")]
    log.close()


def test_tombstones_stay_until_their_delete_horizon(tmp_path: Path) -> None:
    log = open_log(tmp_path, delete_retention_ms=5000, min_cleanable_ratio=0.0)
    append(log, [(b"a", b"1"), (b"b", b"1")])
    append(log, [(b"a", None), (b"c", b"1")])
    log.roll()
    cleaner = cleaner_for(log)
    assert cleaner.clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    stamped = next(h for h in batch_headers(log) if h.base_offset == 2)
    assert stamped.attributes & DELETE_HORIZON_FLAG
    assert stamped.base_timestamp == NOW + 5000
    # Make the log dirty again; before the horizon the tombstone survives, after it goes.
    append(log, [(b"d", b"1")])
    log.roll()
    assert cleaner.clean_filthiest_log(new_cleaner(), NOW + 4999)
    assert (2, b"a", None) in records_of(log)
    append(log, [(b"e", b"1")])
    log.roll()
    assert cleaner.clean_filthiest_log(new_cleaner(), NOW + 5000)
    assert [r for r in records_of(log) if r[1] == b"a"] == []
    assert [k for _, k, _ in records_of(log)] == [b"b", b"c", b"d", b"e"]
    log.close()


def test_min_cleanable_dirty_ratio_and_max_compaction_lag(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=10_000, min_cleanable_ratio=0.5)
    append(log, [(b"k%d" % i, b"x" * 50) for i in range(20)], timestamp=1000)
    log.roll()
    cleaner = cleaner_for(log)
    assert cleaner.clean_filthiest_log(new_cleaner(), NOW)  # all dirty: ratio 1.0
    append(log, [(b"k0", b"y")], timestamp=2000)
    log.roll()
    # A small dirty tail: below the ratio, so not cleaned...
    assert not cleaner.clean_filthiest_log(new_cleaner(), NOW)
    assert (20, b"k0", b"y") in records_of(log) and records_of(log)[0][1] == b"k0"
    # ...until it is older than max.compaction.lag.ms.
    log.config = LogConfig(
        cleanup_policy="compact", segment_bytes=10_000, max_compaction_lag_ms=NOW - 2000 - 1
    )
    assert cleaner.clean_filthiest_log(new_cleaner(), NOW)
    assert [k for _, k, _ in records_of(log)].count(b"k0") == 1
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=10_000, min_compaction_lag_ms=1000)
    append(log, [(b"a", b"old")], timestamp=NOW - 5000)
    log.roll()
    append(log, [(b"a", b"young")], timestamp=NOW - 10)
    log.roll()
    append(log, [(b"a", b"newest")], timestamp=NOW)  # active
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    # Only the old segment was cleanable; the young one was not read into the map.
    assert [v for _, _, v in records_of(log)] == [b"old", b"young", b"newest"]
    log.close()


def test_producer_state_and_batch_metadata_survive_cleaning(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=10_000)
    append(log, [(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=2, base_sequence=0)
    append(log, [(b"a", b"2")], producer_id=7, producer_epoch=2, base_sequence=2)
    append(log, [(b"x", b"1")], producer_id=9, producer_epoch=0, base_sequence=0)
    append(log, [(b"a", b"3"), (b"x", b"2")])
    log.roll()
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    headers = batch_headers(log)
    by_base = {h.base_offset: h for h in headers}
    # Producer 7's first batch keeps b (sequence metadata unchanged); its last batch lost
    # its only record but stays as an empty batch, as does producer 9's.
    first = by_base[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 2, 0)
    assert first.last_offset_delta == 1 and first.record_count == 1
    last7 = by_base[2]
    assert (last7.record_count, last7.base_sequence, last7.producer_id) == (0, 2, 7)
    assert by_base[3].record_count == 0 and by_base[3].producer_id == 9
    assert records_of(log) == [(1, b"b", b"1"), (4, b"a", b"3"), (5, b"x", b"2")]
    # Reopening rebuilds producer state from the log: the next sequences still fit.
    log.close()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    reopened = open_log(tmp_path, segment_bytes=10_000)
    reopened.append_as_leader(
        batch([(b"a", b"4")], producer_id=7, producer_epoch=2, base_sequence=3), 0
    )
    entry = reopened.producer_state.last_entry(9)
    assert entry is not None and entry.last_seq == 0
    reopened.close()


def test_compressed_batches_are_rewritten_with_their_codec(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=10_000)
    one, two = b"1" * 300, b"2" * 300  # compressible, so kafka-python compresses
    append(log, [(b"a", one), (b"b", one), (b"a", two)], compression=1)
    append(log, [(b"b", two)], compression=2)
    log.roll()
    assert [h.compression for h in batch_headers(log)] == [1, 2]
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(log) == [(2, b"a", two), (3, b"b", two)]
    assert [h.compression for h in batch_headers(log)][:2] == [1, 2]
    log.close()


def test_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(8):  # one batch of one record per segment: two fit in 300 bytes, not three
        append(log, [(b"k%d" % i, b"x" * 60)])
        log.roll()
    segments = list(log.segments[:-1])
    assert len(segments) == 8 and all(2 * s.size <= 300 < 3 * s.size for s in segments)
    groups = group_segments_by_size(segments, 300, 1 << 20, log.active_segment.base_offset)
    assert groups == [segments[i : i + 2] for i in range(0, 8, 2)]
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    # Each pair was cleaned into one segment (every key is unique: every record stays).
    assert len(log.segments) - 1 == 4
    assert [s.base_offset for s in log.segments[:-1]] == [0, 2, 4, 6]
    assert [key for _offset, key, _value in records_of(log)] == [b"k%d" % i for i in range(8)]
    log.close()


def test_throttler_sleeps_to_keep_the_rate() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttler = Throttler(1000.0, check_interval_ms=100, clock=lambda: clock[0], sleep=sleep)
    clock[0] = 0.5
    throttler.maybe_throttle(2000)  # 2000 bytes in 0.5 s: 4000 B/s, twice too fast
    assert slept == [pytest.approx(1.5)]
    clock[0] += 2.0
    throttler.maybe_throttle(1000)  # 500 B/s: no sleep
    assert len(slept) == 1


class SimulatedCrash(BaseException):
    """Raised by the hook to stop a pass the way a crash would (no cleanup runs)."""


@pytest.mark.parametrize(
    "phase", [PHASE_OFFSET_MAP, PHASE_CLEANED, PHASE_SWAP, PHASE_DELETED, PHASE_DONE]
)
def test_a_pass_interrupted_at_any_phase_leaves_a_valid_log(tmp_path: Path, phase: str) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    written = fill(log, rounds=8)
    append(log, [(b"k0", b"in-active")])
    before = records_of(log)
    # What a finished pass keeps: the latest of each key below the active segment, and
    # the active segment as it is.
    expected = latest_per_key(before[:-1]) + before[-1:]

    def hook(current: str) -> None:
        if current == phase:
            raise SimulatedCrash(current)

    with pytest.raises(SimulatedCrash):
        cleaner_for(log).clean_filthiest_log(new_cleaner(hook), NOW)
    log.close(clean=False)
    reopened = Log(
        tmp_path / "compacted-0",
        LogConfig(cleanup_policy="compact", segment_bytes=300),
        recovery_point=0,
        had_clean_shutdown=False,
        now_ms=0,
    )
    after = records_of(reopened)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    # Nothing that a finished pass would keep is missing, and nothing was invented.
    assert set(expected) <= set(after) <= set(before)
    assert reopened.log_end_offset == written[-1][0] + 2
    leftovers = [
        p.name for p in reopened.dir.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
    ]
    assert leftovers == []
    # A later pass finishes the job.
    reopened.high_watermark = reopened.log_end_offset
    assert cleaner_for(reopened).clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(reopened) == expected
    reopened.close()


def test_a_full_offset_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path, min_cleanable_ratio=0.0)
    fill(log, rounds=5, keys=6)
    before = records_of(log)
    cleaner = cleaner_for(log)
    tiny = Cleaner(OffsetMap(24 * 4, 0.75), Throttler(float("inf")))  # room for 3 keys
    checkpoints = []
    for _ in range(20):
        if not cleaner.clean_filthiest_log(tiny, NOW):
            break
        checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read()
        checkpoints.append(checkpoint[("compacted", 0)])
        # Every pass leaves a log a full pass could finish: nothing retained is lost.
        assert set(latest_per_key(before)) <= set(records_of(log))
    assert len(checkpoints) > 1 and checkpoints == sorted(checkpoints)
    assert checkpoints[-1] == log.active_segment.base_offset
    assert records_of(log) == latest_per_key(before)
    log.close()


def test_keyless_records_written_before_compaction_are_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy="delete", segment_bytes=10_000)
    append(log, [(None, b"no key"), (b"a", b"1")])
    append(log, [(b"a", b"2")])
    log.roll()
    log.config = LogConfig(cleanup_policy="compact")
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(log) == [(2, b"a", b"2")]
    log.close()


def test_a_pass_over_segments_that_retention_deleted_is_abandoned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log)
    first_segment_end = log.segments[1].base_offset

    def retention_runs(phase: str) -> None:
        if phase == PHASE_CLEANED:
            log.maybe_increment_log_start_offset(first_segment_end)
            assert log.delete_old_segments(NOW) == 1

    manager = cleaner_for(log)
    assert manager.clean_filthiest_log(new_cleaner(retention_runs), NOW)
    # Nothing was swapped in, nothing left behind, nothing recorded; the next pass works.
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {}
    assert ("compacted", 0) not in manager.manager.uncleanable
    remaining = records_of(log)
    assert remaining[0][0] == first_segment_end
    assert manager.clean_filthiest_log(new_cleaner(), NOW)
    assert records_of(log) == latest_per_key(remaining)
    log.close()


def test_background_threads_clean_and_stop_for_a_deleted_partition(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy="compact", segment_bytes=10_000, min_cleanable_ratio=0.01)
    # 2 kB/s: the pass over "slow" (40 kB read to map it) is throttled for ~20 s once the
    # throttler's 300 ms check interval has passed; the one over "fast" (~1 kB) hardly is.
    cleaner_config = CleanerConfig(backoff_ms=20, max_io_bytes_per_second=2000)
    manager = LogManager(
        [tmp_path], broker_id=0, default_config=config, cleaner_config=cleaner_config
    )
    assert manager.cleaner is not None
    mapped = threading.Event()

    def past_the_check_interval(phase: str) -> None:
        # The first pass, once its offset map is built, outlasts the check interval: the
        # first batch it copies into its .cleaned segment then sleeps in the throttler.
        if phase == PHASE_OFFSET_MAP and not mapped.is_set():
            time.sleep(0.4)
            mapped.set()

    manager.cleaner.hook = past_the_check_interval
    manager.startup(now_ms=0)
    try:
        log = manager.get_or_create_log("slow", 0)
        for r in range(10):
            append(log, [(b"k%d" % k, b"%d" % r * 1000) for k in range(4)])
        log.roll()
        partition_dir = log.dir
        assert mapped.wait(30)
        wait_for(lambda: any(partition_dir.glob("*.cleaned")), timeout=30, interval=0.01)
        # Let it reach the pause. (Were it aborted just before, the bytes it read would
        # still count against the rate, and the "fast" pass would wait them out instead.)
        time.sleep(0.2)
        # Deleting the partition aborts the pass at once, even inside a throttling pause
        # (one that would otherwise last ~20 s).
        started = time.monotonic()
        assert manager.delete_log("slow", 0)
        assert time.monotonic() - started < 10
        assert manager.cleaner is not None
        assert ("slow", 0) not in manager.cleaner.manager.uncleanable
        fast = manager.get_or_create_log("fast", 0)
        written = fill(fast, rounds=4)
        checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT)
        wait_for(
            lambda: checkpoint.read().get(("fast", 0)) == fast.active_segment.base_offset,
            timeout=60,
        )
        assert records_of(fast) == latest_per_key(written)
        assert ("slow", 0) not in checkpoint.read()
    finally:
        manager.shutdown()


def test_reconfigure_restarts_the_threads_with_new_settings(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    cleaner = LogCleaner(
        CleanerConfig(num_threads=1, backoff_ms=10_000),
        [tmp_path],
        lambda: [(("compacted", 0), log, tmp_path)],
    )
    cleaner.startup()
    try:
        # Written before the new threads start, so that their first pass sees all of it
        # (a pass over half-written data may leave a rest below the cleanable ratio).
        written = fill(log)
        cleaner.reconfigure(CleanerConfig(num_threads=2, backoff_ms=10))
        assert len(cleaner._threads) == 2
        assert cleaner.await_passes(1, timeout=30)
        wait_for(lambda: records_of(log) == latest_per_key(written), timeout=30)
        cleaner.reconfigure(CleanerConfig(enable=False))
        assert cleaner._threads == []
    finally:
        cleaner.shutdown()
        log.close()


def test_a_zero_rate_does_not_throttle() -> None:
    throttler = Throttler(0.0, clock=lambda: 100.0, sleep=lambda _s: pytest.fail("slept"))
    throttler.maybe_throttle(1 << 30)
    assert throttler.total_sleep == 0


@pytest.mark.parametrize(
    ("phase", "rename"),
    [
        # The crash came while `.cleaned` files were being renamed to `.swap`: the log file
        # was renamed, its time index not yet.
        (PHASE_SWAP, (".timeindex.swap", ".timeindex.cleaned")),
        # The crash came while `.swap` suffixes were being dropped: the log file was done.
        (PHASE_DELETED, (".log.swap", ".log")),
    ],
)
def test_a_crash_in_the_middle_of_a_rename_leaves_a_valid_log(
    tmp_path: Path, phase: str, rename: tuple[str, str]
) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, rounds=8)
    before = records_of(log)

    def hook(current: str) -> None:
        if current == phase:
            raise SimulatedCrash(current)

    with pytest.raises(SimulatedCrash):
        cleaner_for(log).clean_filthiest_log(new_cleaner(hook), NOW)
    log.close(clean=False)
    (swapped,) = log.dir.glob("*" + rename[0])
    swapped.rename(swapped.with_name(swapped.name.replace(rename[0], rename[1])))
    reopened = Log(
        tmp_path / "compacted-0",
        LogConfig(cleanup_policy="compact", segment_bytes=300),
        recovery_point=0,
        had_clean_shutdown=False,
        now_ms=0,
    )
    after = records_of(reopened)
    assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})
    assert set(latest_per_key(before)) <= set(after) <= set(before)
    names = [p.name for p in reopened.dir.iterdir()]
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    for segment in reopened.segments:
        segment.sanity_check()
    reopened.close()


def test_an_unreadable_stored_batch_is_kept_as_it_is_not_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch whose records cannot be read (under a valid CRC: a disk fault, or data an
    older broker stored unchecked) neither stops the cleaner nor is lost."""
    log = open_log(tmp_path, segment_bytes=400)
    written = fill(log, rounds=2)
    garbled = bytearray(batch([(b"k0", b"garbled"), (b"k1", b"garbled")]))
    garbled[HEADER_SIZE] = 0x7E  # the first record's length runs past its end
    struct.pack_into(">I", garbled, 17, compute_crc(garbled))
    # Appended as a replica would, without record validation.
    log.append_as_leader(bytes(garbled), 0, from_client=False)
    written += fill(log, rounds=2)
    log.high_watermark = log.log_end_offset
    assert cleaner_for(log).clean_filthiest_log(new_cleaner(), NOW)
    kept = [s.read_bytes(0, s.size) for s in log.segments]
    assert any(bytes(garbled[12:]) in data for data in kept)  # as it was (offset aside)
    assert "unreadable batch" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    log.close()
