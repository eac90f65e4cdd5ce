"""Which logs need cleaning, which are being cleaned, and where cleaning got to
(Kafka's `LogCleanerManager`).

Each log dir's `cleaner-offset-checkpoint` holds, per compacted partition, the first dirty
offset: everything below it was cleaned by an earlier pass. A log is cleanable when its
dirty bytes are more than min.cleanable.dirty.ratio of its cleanable bytes, or when a
dirty segment is older than max.compaction.lag.ms; the filthiest goes first. The active
segment, data at or above the high watermark and segments younger than
min.compaction.lag.ms are never cleaned.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from logbus.storage.checkpoint import OffsetCheckpointFile, TopicPartition
from logbus.storage.cleaner import CleaningAbortedError, LogToClean
from logbus.storage.errors import CorruptCheckpointError
from logbus.storage.log import Log

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

_IN_PROGRESS = "in-progress"
_ABORTED = "aborted"
_PAUSED = "paused"

# (topic-partition, log, log dir) of every log the broker holds.
LogsView = Callable[[], list[tuple[TopicPartition, Log, Path]]]


class LogCleanerManager:
    """The cleaning state of every partition, shared by the cleaner threads and the log
    manager; every method is thread-safe (one lock, one condition)."""

    def __init__(self, log_dirs: list[Path], logs: LogsView) -> None:
        self._checkpoints = {
            d: OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT) for d in log_dirs
        }
        self._logs = logs
        self._lock = threading.RLock()
        self._paused = threading.Condition(self._lock)
        # tp -> in-progress / aborted / paused (with a count of pauses)
        self._state: dict[TopicPartition, tuple[str, int]] = {}
        self.uncleanable: set[TopicPartition] = set()
        # Set while a pass is asked to stop: throttled cleaner threads wake up at once.
        self.interrupt = threading.Event()

    # -- checkpoints -------------------------------------------------------------------

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Forget an offline dir's checkpoint (Kafka's `handleLogDirFailure`): its file can
        no longer be read, and the logs of the other dirs must still be cleaned."""
        with self._lock:
            self._checkpoints.pop(log_dir, None)

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        with self._lock:
            for checkpoint in self._checkpoints.values():
                try:
                    out.update(checkpoint.read())
                except CorruptCheckpointError as exc:
                    logger.warning("ignoring %s: %s", checkpoint.path, exc)
        return out

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None remove) one partition's first dirty offset; entries of
        partitions no longer held are dropped."""
        with self._lock:
            checkpoint = self._checkpoints.get(log_dir)
            if checkpoint is None:
                return
            try:
                current = checkpoint.read()
            except CorruptCheckpointError:
                current = {}
            held = {entry[0] for entry in self._logs()}
            entries = {k: v for k, v in current.items() if k in held}
            if offset is None:
                entries.pop(tp, None)
            else:
                entries[tp] = offset
            checkpoint.write(entries)

    # -- choosing a log -------------------------------------------------------------------

    def grab_filthiest_log(self, now_ms: int) -> LogToClean | None:
        """The compacted log most in need of cleaning, marked in progress; None if no log
        passes its min.cleanable.dirty.ratio (or max.compaction.lag.ms)."""
        with self._lock:
            checkpoints = self.all_checkpoints()
            candidates: list[LogToClean] = []
            for tp, log, log_dir in self._logs():
                if not log.config.compact or tp in self._state or tp in self.uncleanable:
                    continue
                first_dirty, first_uncleanable, reset = cleanable_offsets(
                    log, checkpoints.get(tp), now_ms
                )
                if reset:
                    self.update_checkpoint(log_dir, tp, first_dirty)
                needs_now = max_compaction_delay(log, first_dirty, now_ms) > 0
                ltc = LogToClean(tp, log, first_dirty, first_uncleanable, needs_now)
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            cleanable = [
                ltc
                for ltc in candidates
                if (ltc.needs_compaction_now and ltc.cleanable_bytes > 0)
                or ltc.cleanable_ratio > ltc.log.config.min_cleanable_ratio
            ]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda ltc: ltc.cleanable_ratio)
            self._state[filthiest.topic_partition] = (_IN_PROGRESS, 0)
            return filthiest

    def done_cleaning(self, tp: TopicPartition, log_dir: Path, end_offset: int | None) -> None:
        """Record the pass's end (None: nothing to record) and release the partition."""
        with self._lock:
            state = self._state.get(tp, (_IN_PROGRESS, 0))[0]
            if state == _ABORTED:
                self._state[tp] = (_PAUSED, 1)
                if not any(s == _ABORTED for s, _ in self._state.values()):
                    self.interrupt.clear()
                self._paused.notify_all()
                return
            if end_offset is not None:
                self.update_checkpoint(log_dir, tp, end_offset)
            self._state.pop(tp, None)

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        with self._lock:
            self.uncleanable.add(tp)

    # -- aborting and pausing -------------------------------------------------------------

    def check_aborted(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._state.get(tp, ("", 0))[0] == _ABORTED:
                raise CleaningAbortedError(f"cleaning of {tp[0]}-{tp[1]} was aborted")

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop any pass over `tp` (waiting for it to stop) and keep it from starting."""
        with self._lock:
            state, count = self._state.get(tp, ("", 0))
            if state == "":
                self._state[tp] = (_PAUSED, 1)
            elif state == _IN_PROGRESS:
                self._state[tp] = (_ABORTED, 0)
                self.interrupt.set()
            elif state == _PAUSED:
                self._state[tp] = (_PAUSED, count + 1)
            while self._state.get(tp, ("", 0))[0] != _PAUSED:
                self._paused.wait(0.1)

    def resume(self, tp: TopicPartition) -> None:
        with self._lock:
            state, count = self._state.get(tp, ("", 0))
            if state != _PAUSED:
                return
            if count <= 1:
                self._state.pop(tp, None)
            else:
                self._state[tp] = (_PAUSED, count - 1)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop any pass over `tp` and let later passes run (the log is going away)."""
        with self._lock:
            self.abort_and_pause(tp)
            self.resume(tp)
            self.uncleanable.discard(tp)


def cleanable_offsets(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint was reset).

    The checkpoint is reset to the log start when it is below it or past the log end (a
    truncated log). Cleaning stops before the active segment, before the segment holding
    the last stable offset (at most the high watermark), and before the first segment
    with a record younger than min.compaction.lag.ms; the bound is always a segment's
    base offset.
    """
    start = log.log_start_offset
    first_dirty, reset = start if checkpoint is None else checkpoint, False
    if first_dirty < start or first_dirty > log.log_end_offset:
        if checkpoint is not None:
            logger.warning(
                "resetting the first dirty offset of %s to %d (checkpoint %d is invalid)",
                log.dir.name,
                start,
                first_dirty,
            )
        first_dirty, reset = start, True
    segments = log.segments
    bound = segments[-1].base_offset
    # Never past the last stable offset (at most the high watermark): open transactions
    # and markers not yet replicated stay as they are.
    stable = log.last_stable_offset
    lag = max(log.config.min_compaction_lag_ms, 0)
    for i, segment in enumerate(segments[:-1]):
        segment_end = segments[i + 1].base_offset
        if segment_end > stable:
            bound = min(bound, segment.base_offset)
            break
        if lag > 0 and segment_end > first_dirty and segment.largest_timestamp > now_ms - lag:
            bound = min(bound, segment.base_offset)
            break
    return first_dirty, max(first_dirty, bound), reset


def max_compaction_delay(log: Log, first_dirty: int, now_ms: int) -> int:
    """How far past max.compaction.lag.ms the oldest dirty segment is (0 if it is not)."""
    lag = max(log.config.max_compaction_lag_ms, 0)
    if now_ms - lag <= 0:
        return 0
    segments = log.segments
    earliest = None
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= first_dirty:
            continue
        ts = segment.first_batch_timestamp()
        if ts > 0 and (earliest is None or ts < earliest):
            earliest = ts
    if earliest is None:
        return 0
    until = now_ms - lag
    return until - earliest if earliest < until else 0
