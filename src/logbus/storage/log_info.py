"""Values a `Log` returns: what an append did, what a read found, and ListOffsets answers."""

from __future__ import annotations

from typing import NamedTuple

from logbus.storage.errors import StorageError
from logbus.storage.file_slice import FileSlice
from logbus.storage.producer_state import DuplicateBatch

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
NO_TIMESTAMP = -1


class UnexpectedAppendOffsetError(StorageError):
    """A follower tried to append batches below the log end offset."""


class AppendInfo(NamedTuple):
    """What an append did (or, for a retried batch, what the original append did)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False

    @classmethod
    def of_duplicate(
        cls, batch: DuplicateBatch, log_append_time: bool, log_start_offset: int
    ) -> AppendInfo:
        """The answer to a retried batch: the offsets and time of its first append."""
        append_time = batch.timestamp if log_append_time else -1
        count = batch.last_offset - batch.first_offset + 1
        return cls(
            batch.first_offset,
            batch.last_offset,
            batch.timestamp,
            batch.last_offset,
            append_time,
            log_start_offset,
            count,
            0,
            duplicate=True,
        )


class FetchDataInfo(NamedTuple):
    """The result of `Log.read`: a slice to send (None when there is nothing) and where the
    read started (for a DelayedFetch to measure progress)."""

    records: FileSlice | None
    fetch_offset: int
    segment_base_offset: int
    position: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None
