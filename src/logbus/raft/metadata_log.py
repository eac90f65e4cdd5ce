"""The replicated log of the quorum: `__cluster_metadata-0` in Kafka's on-disk layout (a
storage `Log`: segments, indexes, leader-epoch-checkpoint) plus its snapshots.

The entry point is `ReplicatedLog` (Kafka's `KafkaMetadataLog`): what the Raft client
needs of a log — append as leader or follower, the end offset and the epoch of its last
record, the end offset of an epoch (to find where a follower diverged), truncation, reads,
and snapshots that move the log start forward.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

from logbus.protocol import schema
from logbus.raft.snapshots import (
    LEADER_CHANGE,
    SnapshotId,
    control_key,
    latest_snapshot,
    list_snapshots,
    read_snapshot_records,
    snapshot_path,
    write_snapshot,
    write_snapshot_bytes,
)
from logbus.records.batch import iter_batches
from logbus.records.builder import build_batch
from logbus.records.reader import decode_batch
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig

__all__ = [
    "METADATA_PARTITION_DIR",
    "METADATA_TOPIC",
    "CommittedRecord",
    "EpochEndOffset",
    "ReplicatedLog",
]

METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_PARTITION_DIR: Final = f"{METADATA_TOPIC}-0"


class EpochEndOffset(NamedTuple):
    """The largest epoch at or below a requested one, and where it ends."""

    epoch: int
    end_offset: int


class CommittedRecord(NamedTuple):
    """One record below the high watermark: its offset, the epoch of its batch, and its
    value (None for a control record, which the state machine only counts)."""

    offset: int
    epoch: int
    value: bytes | None


class ReplicatedLog:
    """The metadata partition of one voter. Owned by its RaftClient on one event loop;
    not safe to share between threads."""

    def __init__(self, metadata_log_dir: Path, *, segment_bytes: int = 8 * 1024 * 1024) -> None:
        self.dir = metadata_log_dir / METADATA_PARTITION_DIR
        config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1, file_delete_delay_ms=0)
        self.log = Log(self.dir, config, had_clean_shutdown=False)
        self.snapshot_id = latest_snapshot(self.dir)
        if self.snapshot_id is not None and self.log.log_start_offset < self.snapshot_id.end_offset:
            if self.log.log_end_offset < self.snapshot_id.end_offset:
                self.log.truncate_fully_and_start_at(self.snapshot_id.end_offset)
            else:
                self.log.high_watermark = self.snapshot_id.end_offset
                self.log.maybe_increment_log_start_offset(self.snapshot_id.end_offset)
        self.log.high_watermark = self.log.log_start_offset

    # -- positions -----------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def set_high_watermark(self, offset: int) -> None:
        """Move the high watermark forward (never back: a new leader may not know yet
        how far its predecessor committed), capped at the log end."""
        self.log.high_watermark = max(self.log.high_watermark, min(offset, self.end_offset))

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record (the snapshot's when the log holds none)."""
        latest = self.log.leader_epoch_cache.latest_epoch
        if latest >= 0:
            return latest
        return self.snapshot_id.epoch if self.snapshot_id is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        """Kafka's `endOffsetForEpoch`: the largest epoch <= `epoch` and its end offset;
        a snapshot covers epochs below the log's first entry."""
        snapshot = self.snapshot_id
        if snapshot is not None and (
            epoch < snapshot.epoch
            or (epoch == snapshot.epoch and self.log.leader_epoch_cache.latest_epoch < 0)
        ):
            return EpochEndOffset(snapshot.epoch, snapshot.end_offset)
        found_epoch, end = self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)
        if found_epoch < 0:
            if snapshot is not None:
                return EpochEndOffset(snapshot.epoch, snapshot.end_offset)
            return EpochEndOffset(0, self.start_offset)
        return EpochEndOffset(found_epoch, end)

    # -- appends -------------------------------------------------------------------

    def append_as_leader(self, values: Sequence[bytes], epoch: int) -> tuple[int, int]:
        """Append one batch of records in `epoch`; (first offset, last offset)."""
        batch = build_batch([(None, v) for v in values], partition_leader_epoch=epoch)
        info = self.log.append_as_leader(batch, epoch, from_client=False)
        self.log.flush()
        return info.first_offset, info.last_offset

    def append_leader_change(
        self, epoch: int, leader_id: int, voters: Sequence[int], granting: Sequence[int]
    ) -> int:
        """The control record a new leader writes first in its epoch; its offset."""
        value = schema.message("LeaderChangeMessage").encode(
            {
                "version": 0,
                "leader_id": leader_id,
                "voters": [{"voter_id": v} for v in voters],
                "granting_voters": [{"voter_id": v} for v in granting],
            },
            0,
        )
        batch = build_batch(
            [(control_key(LEADER_CHANGE), value)], is_control=True, partition_leader_epoch=epoch
        )
        info = self.log.append_as_leader(batch, epoch, from_client=False)
        self.log.flush()
        return info.first_offset

    def append_as_follower(self, records: bytes) -> None:
        if records:
            self.log.append_as_follower(records)
            self.log.flush()

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.log.flush()

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from `offset` (at least one), up to the log end."""
        info = self.log.read(offset, max_bytes, min_one_message=True)
        return b"" if info.records is None else info.records.read()

    def read_committed(self, offset: int, max_bytes: int = 1024 * 1024) -> list[CommittedRecord]:
        """The committed records from `offset` on (at least one batch when there is one,
        about `max_bytes` of them); empty at the high watermark."""
        high_watermark = self.high_watermark
        if offset >= high_watermark:
            return []
        data = self.read(offset, max_bytes)
        view = memoryview(data)
        found = []
        for position, header in iter_batches(data):
            if header.base_offset >= high_watermark:
                break
            _, records = decode_batch(view[position : position + header.size])
            found += [
                CommittedRecord(
                    r.offset,
                    header.partition_leader_epoch,
                    None if header.is_control else bytes(r.value or b""),
                )
                for r in records
                if offset <= r.offset < high_watermark
            ]
        return found

    # -- snapshots -----------------------------------------------------------------

    def epoch_of(self, end_offset: int) -> int:
        """The epoch of the record at `end_offset - 1`."""
        found = self.log.leader_epoch_cache.epoch_for_offset(end_offset - 1)
        if found is not None:
            return found
        return self.snapshot_id.epoch if self.snapshot_id is not None else 0

    def create_snapshot(self, end_offset: int, values: Sequence[bytes]) -> SnapshotId:
        """Write a snapshot of the state below `end_offset` (which must be committed) and
        move the log start there."""
        if end_offset > self.high_watermark:
            raise ValueError(
                f"snapshot end {end_offset} is above the high watermark {self.high_watermark}"
            )
        snapshot_id = SnapshotId(end_offset, self.epoch_of(end_offset))
        write_snapshot(self.dir, snapshot_id, values, timestamp_ms=time.time_ns() // 1_000_000)
        self._adopt_snapshot(snapshot_id)
        return snapshot_id

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot fetched from the leader replaces the whole log."""
        write_snapshot_bytes(self.dir, snapshot_id, data)
        self.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self.snapshot_id = snapshot_id
        self.log.high_watermark = snapshot_id.end_offset
        self._delete_older_snapshots()

    def _adopt_snapshot(self, snapshot_id: SnapshotId) -> None:
        self.snapshot_id = snapshot_id
        self.log.maybe_increment_log_start_offset(snapshot_id.end_offset)
        self.log.delete_old_segments()
        self._delete_older_snapshots()

    def _delete_older_snapshots(self) -> None:
        for old in list_snapshots(self.dir):
            if self.snapshot_id is not None and old < self.snapshot_id:
                snapshot_path(self.dir, old).unlink(missing_ok=True)

    def snapshot_bytes(self, snapshot_id: SnapshotId) -> bytes:
        return snapshot_path(self.dir, snapshot_id).read_bytes()

    def snapshot_values(self) -> list[bytes]:
        """The records of the latest snapshot (none without one)."""
        if self.snapshot_id is None:
            return []
        return read_snapshot_records(self.dir, self.snapshot_id)

    def close(self) -> None:
        self.log.close()
