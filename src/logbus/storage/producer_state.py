"""Idempotent and transactional producer state of one partition (KIP-98).

For each producer id the broker remembers the epoch, the sequence ranges and offsets of
the last five batches (to answer a retried batch with its original offsets), the last
timestamp, the coordinator epoch of the last transaction marker and the first offset of
the open transaction. All checks use batch-header fields only.

Snapshots `<20-digit offset>.snapshot` hold the state for every batch below that offset,
in Kafka's format (version 1): int16 version, uint32 CRC32C of the rest, then an int32
count of entries, each: int64 producer id, int16 epoch, int32 last sequence, int64 last
offset, int32 offset delta, int64 timestamp, int32 coordinator epoch, int64 first offset
of the open transaction (-1 if none). Only the last batch of each producer survives a
snapshot, as in Kafka.

Sequence rules, following Kafka 2.5+ (KIP-360): a batch from a producer id the log does not
know is accepted whatever its sequence, since retention or DeleteRecords may have removed
the producer's earlier batches; UNKNOWN_PRODUCER_ID is therefore never returned. A new,
larger epoch must start at sequence 0; within an epoch, the first sequence must follow the
last one (wrapping at 2**31).
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from logbus.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from logbus.records.crc32c import crc32c
from logbus.storage.checkpoint import write_atomically
from logbus.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from logbus.storage.record_scan import read_control_marker

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
BATCHES_TO_RETAIN = 5
_INT32_MAX = (1 << 31) - 1

_SNAPSHOT_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_path(log_dir: Path, offset: int) -> Path:
    return log_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class BatchMetadata(NamedTuple):
    """What is kept of one producer batch: enough to recognise and answer a retry."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        if self.last_seq == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.last_seq - self.offset_delta) % (_INT32_MAX + 1)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id (mutable; copied before a tentative update)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp


class ProducerBatch(NamedTuple):
    """One batch of an append, as the producer state sees it."""

    header: BatchHeader
    base_offset: int  # the offset assigned by the log
    max_timestamp: int  # after LogAppendTime rewriting
    coordinator_epoch: int | None = None  # set for transaction markers
    is_abort: bool | None = None  # set for transaction markers


def producer_batch(
    batch: memoryview, header: BatchHeader, base_offset: int, max_timestamp: int
) -> ProducerBatch:
    """The producer view of one batch; `batch` (its bytes) is only read for a transaction
    marker, whose record carries the coordinator epoch."""
    coordinator_epoch = None
    is_abort = None
    if header.is_control and len(batch) >= header.size:
        marker = read_control_marker(batch, header)
        if marker is not None:
            coordinator_epoch = marker.coordinator_epoch
            is_abort = marker.is_abort
    return ProducerBatch(header, base_offset, max_timestamp, coordinator_epoch, is_abort)


class DuplicateBatch(NamedTuple):
    """A retried batch: the append is answered with the original batch's offsets."""

    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker in this partition: its first data offset, the
    marker's offset, and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class PendingProducerUpdate(NamedTuple):
    """Validated new entries, applied with `ProducerStateManager.commit` once written,
    and the transactions the append's markers complete."""

    entries: dict[int, ProducerStateEntry]
    end_offset: int
    completed: tuple[CompletedTxn, ...] = ()


class ProducerStateManager:
    """The producer id -> state map of one partition, and its snapshot files.

    Owned by one `Log` and used under that log's lock; not safe to share between threads
    on its own.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._producers: dict[int, ProducerStateEntry] = {}
        # Every batch below this offset has been applied.
        self.map_end_offset = 0
        # producer id -> first offset of its open transaction (Kafka's ongoingTxns).
        self._ongoing: dict[int, int] = {}
        # Completed transactions whose marker may be above the high watermark, by first
        # offset: they stay unstable until the high watermark passes their marker.
        self._unreplicated: dict[int, CompletedTxn] = {}

    # -- lookups ----------------------------------------------------------------------

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return self._ongoing

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any."""
        return min(self._ongoing.values()) if self._ongoing else None

    def first_unstable_offset(self, high_watermark: int | None = None) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker the
        high watermark has not passed yet (those below `high_watermark` are forgotten)."""
        if self._unreplicated and high_watermark is not None:
            done = [k for k, t in self._unreplicated.items() if t.last_offset < high_watermark]
            for k in done:
                del self._unreplicated[k]
        first = min(self._ongoing.values()) if self._ongoing else None
        if self._unreplicated:
            unreplicated = min(self._unreplicated)
            first = unreplicated if first is None else min(first, unreplicated)
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first unstable offset, high watermark)."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def lso_for_completed(self, txn: CompletedTxn) -> int:
        """The last stable offset once `txn` completes (written to the txnindex), as
        Kafka computes it: the first offset of another producer's open transaction, else
        the offset after the marker."""
        firsts = [f for pid, f in self._ongoing.items() if pid != txn.producer_id]
        return min(firsts) if firsts else txn.last_offset + 1

    def complete_txn(self, txn: CompletedTxn) -> None:
        self._unreplicated[txn.first_offset] = txn

    def _track(self, entry: ProducerStateEntry) -> None:
        if entry.current_txn_first_offset is None:
            self._ongoing.pop(entry.producer_id, None)
        else:
            self._ongoing[entry.producer_id] = entry.current_txn_first_offset

    # -- appends ----------------------------------------------------------------------

    def prepare_append(
        self, batches: Sequence[ProducerBatch], *, from_client: bool
    ) -> PendingProducerUpdate | DuplicateBatch:
        """Validate the producer batches of one append and compute the new state.

        Returns a DuplicateBatch if a batch repeats one of a producer's last five; raises
        InvalidProducerEpochError or OutOfOrderSequenceError (client appends only for the
        sequence check), InvalidTxnStateError. Nothing changes until `commit`.
        """
        updated: dict[int, ProducerStateEntry] = {}
        completed: list[CompletedTxn] = []
        end_offset = self.map_end_offset
        for batch in batches:
            header = batch.header
            last_offset = batch.base_offset + header.last_offset_delta
            end_offset = max(end_offset, last_offset + 1)
            if not header.has_producer_id:
                continue
            pid = header.producer_id
            current = self._producers.get(pid)
            if from_client and current is not None:
                duplicate = current.find_duplicate(
                    header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if duplicate is not None:
                    return DuplicateBatch(
                        duplicate.first_offset, duplicate.last_offset, duplicate.timestamp
                    )
            entry = updated.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updated[pid] = entry
            done = _apply(entry, batch, validate=True, from_client=from_client)
            if done is not None:
                completed.append(done)
        return PendingProducerUpdate(updated, end_offset, tuple(completed))

    def commit(self, update: PendingProducerUpdate) -> None:
        """Apply a prepared update; the caller indexes and then completes (`complete_txn`)
        the transactions it ended."""
        self._producers.update(update.entries)
        for entry in update.entries.values():
            self._track(entry)
        self.map_end_offset = max(self.map_end_offset, update.end_offset)

    def replay(self, batch: ProducerBatch) -> CompletedTxn | None:
        """Apply a batch read back from the log, without validation (loading, recovery,
        replication). Returns the transaction a marker completes; the caller indexes it
        if needed and calls `complete_txn`."""
        header = batch.header
        self.map_end_offset = max(
            self.map_end_offset, batch.base_offset + header.last_offset_delta + 1
        )
        if not header.has_producer_id:
            return None
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = self._producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        done = _apply(entry, batch, validate=False, from_client=False)
        self._track(entry)
        return done

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `expiration_ms` with no open transaction."""
        expired = [
            pid
            for pid, e in self._producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def reset(self, offset: int = 0) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.map_end_offset = offset

    # -- snapshots --------------------------------------------------------------------

    def snapshot_offsets(self, names: Iterable[str] | None = None) -> list[int]:
        """The offsets of the snapshots in the log's directory (`names`: its listing,
        when the caller has a current one)."""
        out = []
        if names is None:
            try:
                names = os.listdir(self.log_dir)
            except FileNotFoundError:
                return []
        for name in names:
            match = _SNAPSHOT_NAME.match(name)
            if match:
                out.append(int(match.group(1)))
        return sorted(out)

    def take_snapshot(self, offset: int | None = None) -> Path:
        """Write the current state as `<offset>.snapshot` (default: the map end offset)."""
        at = self.map_end_offset if offset is None else offset
        path = snapshot_path(self.log_dir, at)
        write_atomically(path, encode_snapshot(self._producers.values()))
        return path

    def load(
        self,
        log_end_offset: int,
        names: Iterable[str] | None = None,
        *,
        at_most: int | None = None,
    ) -> int | None:
        """Load the newest valid snapshot at or below `log_end_offset` and `at_most`
        (`names`: the log directory's current listing, when the caller has one).

        Snapshots above the log end are deleted, as are corrupt ones; those between
        `at_most` and the log end stay (they still describe the log up to their offset).
        Returns the snapshot's offset (the caller replays the log from there), or None
        when the state starts empty.
        """
        self.reset()
        for offset in reversed(self.snapshot_offsets(names)):
            path = snapshot_path(self.log_dir, offset)
            if offset > log_end_offset:
                path.unlink(missing_ok=True)
                continue
            if at_most is not None and offset > at_most:
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except (CorruptSnapshotError, OSError) as exc:
                logger.warning("deleting unreadable producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self._producers = {e.producer_id: e for e in entries}
            for entry in entries:
                self._track(entry)
            self.map_end_offset = offset
            return offset
        return None

    def delete_snapshots_before(self, offset: int) -> None:
        for at in self.snapshot_offsets():
            if at < offset:
                snapshot_path(self.log_dir, at).unlink(missing_ok=True)

    def delete_snapshots_after(self, offset: int) -> None:
        for at in self.snapshot_offsets():
            if at > offset:
                snapshot_path(self.log_dir, at).unlink(missing_ok=True)


def _apply(
    entry: ProducerStateEntry, batch: ProducerBatch, *, validate: bool, from_client: bool
) -> CompletedTxn | None:
    """Update `entry` with one batch; returns the transaction a marker completes."""
    header = batch.header
    epoch = header.producer_epoch
    if validate:
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {entry.producer_id} wrote with epoch {epoch}, "
                f"older than its current epoch {entry.producer_epoch}"
            )
        if from_client and not header.is_control:
            _check_sequence(entry, epoch, header.base_sequence)
    if header.is_control:
        return _apply_marker(entry, batch, validate=validate)
    last_offset = batch.base_offset + header.last_offset_delta
    entry.add_batch(
        epoch, header.last_sequence, last_offset, header.last_offset_delta, batch.max_timestamp
    )
    if header.is_transactional:
        if entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = batch.base_offset
    elif entry.current_txn_first_offset is not None and validate:
        raise InvalidTxnStateError(
            f"producer {entry.producer_id} wrote a non-transactional batch inside a transaction"
        )
    return None


def _apply_marker(
    entry: ProducerStateEntry, batch: ProducerBatch, *, validate: bool
) -> CompletedTxn | None:
    """A COMMIT or ABORT marker (Kafka's `appendEndTxnMarker`): a marker from an older
    coordinator epoch than the last one is fenced; it ends the producer's open
    transaction, if it has one."""
    header = batch.header
    coordinator_epoch = batch.coordinator_epoch
    if (
        validate
        and coordinator_epoch is not None
        and coordinator_epoch < entry.coordinator_epoch
    ):
        raise TransactionCoordinatorFencedError(
            f"marker for producer {entry.producer_id} from coordinator epoch "
            f"{coordinator_epoch}, older than {entry.coordinator_epoch}"
        )
    entry.update_epoch(header.producer_epoch)
    if coordinator_epoch is not None:
        entry.coordinator_epoch = coordinator_epoch
    entry.last_timestamp = batch.max_timestamp
    first = entry.current_txn_first_offset
    entry.current_txn_first_offset = None
    if first is None or batch.is_abort is None:
        return None
    return CompletedTxn(entry.producer_id, first, batch.base_offset, batch.is_abort)


def _check_sequence(entry: ProducerStateEntry, epoch: int, first_seq: int) -> None:
    if epoch != entry.producer_epoch:
        if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceError(
                f"producer {entry.producer_id} started epoch {epoch} at sequence {first_seq}, not 0"
            )
        return
    last_seq = entry.last_seq
    in_sequence = first_seq == last_seq + 1 or (first_seq == 0 and last_seq == _INT32_MAX)
    if entry.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence:
        raise OutOfOrderSequenceError(
            f"producer {entry.producer_id} sent sequence {first_seq} after {last_seq}"
        )


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Serialize producer entries in Kafka's snapshot format (version 1)."""
    items = list(entries)
    body = bytearray(_COUNT.pack(len(items)))
    for e in items:
        last = e.batches[-1] if e.batches else BatchMetadata(NO_SEQUENCE, -1, 0, e.last_timestamp)
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            last.last_seq,
            last.last_offset,
            last.offset_delta,
            last.timestamp,
            e.coordinator_epoch,
            txn,
        )
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot file; raise CorruptSnapshotError if it is not valid."""
    if len(data) < _SNAPSHOT_HEADER.size + _COUNT.size:
        raise CorruptSnapshotError("producer snapshot is too short")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown producer snapshot version {version}")
    body = memoryview(data)[_SNAPSHOT_HEADER.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("producer snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or len(body) != _COUNT.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"producer snapshot length does not match its {count} entries")
    out = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(body[_COUNT.size :]):
        pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn = fields
        entry = ProducerStateEntry(
            pid,
            epoch,
            coordinator_epoch=coordinator_epoch,
            last_timestamp=timestamp,
            current_txn_first_offset=None if txn < 0 else txn,
        )
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        out.append(entry)
    return out
