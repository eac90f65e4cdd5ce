"""The leader epoch cache of one partition, persisted in `leader-epoch-checkpoint` (KIP-101).

It records, for each leader epoch, the first offset written in that epoch, so a follower
can ask where an epoch ended (OffsetsForLeaderEpoch) and truncate to the right place.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from logbus.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from logbus.storage.errors import CorruptCheckpointError

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochCache:
    """Epoch -> start offset entries, in increasing order of both.

    Owns its checkpoint file, rewritten after every change. Safe to share between threads
    (an internal lock guards the entries).
    """

    def __init__(self, path: Path) -> None:
        self._file = LeaderEpochCheckpointFile(path)
        self._lock = threading.Lock()
        try:
            entries = self._file.read()
        except CorruptCheckpointError:
            logger.warning("ignoring corrupt leader epoch checkpoint %s", path)
            entries = []
        self._entries = _monotonic(entries)

    @property
    def path(self) -> Path:
        return self._file.path

    def move_to(self, path: Path) -> None:
        """Follow the partition directory when it is renamed."""
        self._file = LeaderEpochCheckpointFile(path)

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; no-op if nothing changes.

        Entries that conflict with the new one (an epoch >= it, or a start offset >= it)
        are dropped first, so the cache stays monotonic in both fields.
        """
        if epoch < 0:
            return
        with self._lock:
            if self._entries:
                last = self._entries[-1]
                if last.epoch == epoch and last.start_offset <= start_offset:
                    return
            kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
            if len(kept) != len(self._entries):
                logger.info(
                    "leader epoch %d at %d replaces entries %s",
                    epoch,
                    start_offset,
                    self._entries[len(kept) :],
                )
            kept.append(EpochEntry(epoch, start_offset))
            self._entries = kept
            self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch.

        The end offset of an epoch is the start offset of the next larger epoch, or the log
        end offset for the latest epoch; the returned epoch is the largest known epoch <=
        the requested one. Unknown (newer than every entry, or undefined) epochs give
        (-1, -1).
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._entries[-1].epoch:
                return requested_epoch, log_end_offset
            later = [e for e in self._entries if e.epoch > requested_epoch]
            if not later:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            earlier = [e for e in self._entries if e.epoch <= requested_epoch]
            if not earlier:
                return requested_epoch, later[0].start_offset
            return earlier[-1].epoch, later[0].start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which `offset` was written, if known."""
        with self._lock:
            found: int | None = None
            for entry in self._entries:
                if entry.start_offset > offset:
                    break
                found = entry.epoch
            return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget offsets below `start_offset`: the epoch covering it now starts there."""
        with self._lock:
            before = [e for e in self._entries if e.start_offset <= start_offset]
            if not before:
                return
            after = self._entries[len(before) :]
            covering = before[-1]
            moved = EpochEntry(covering.epoch, start_offset)
            new_entries = [moved, *after]
            if new_entries != self._entries:
                self._entries = new_entries
                self._flush()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        self._file.write(self._entries)


def _monotonic(entries: list[EpochEntry]) -> list[EpochEntry]:
    """Keep only entries increasing in both epoch and start offset."""
    out: list[EpochEntry] = []
    for entry in entries:
        if out and (entry.epoch <= out[-1].epoch or entry.start_offset < out[-1].start_offset):
            continue
        out.append(entry)
    return out
