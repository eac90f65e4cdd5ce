"""One partition's log: the directory `<topic>-<partition>` and its segments.

The log appends whole batches (validated, offsets assigned in place), serves reads as file
slices, rolls segments by size and time, flushes by message count and time, truncates for
replication, and deletes old segments by retention.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

from logbus.storage.checkpoint import fsync_dir
from logbus.storage.errors import (
    InconsistentTopicIdError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from logbus.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from logbus.storage.log_config import LogConfig
from logbus.storage.log_info import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP,
    AppendInfo,
    FetchDataInfo,
    TimestampAndOffset,
    UnexpectedAppendOffsetError,
)
from logbus.storage.log_loader import (
    load_segments,
    new_segment,
    parse_topic_partition,
    rebuild_producer_state,
)
from logbus.storage.log_retention import (
    SegmentPredicate,
    deletable_segments,
    log_start_breached,
    retention_ms_breached,
    retention_size_breached,
)
from logbus.storage.log_validator import (
    analyze_records,
    assign_offsets,
    check_timestamps,
    recompress,
    target_codec,
)
from logbus.storage.partition_metadata import read_partition_metadata, write_partition_metadata
from logbus.storage.producer_state import (
    CompletedTxn,
    DuplicateBatch,
    ProducerBatch,
    ProducerStateManager,
    producer_batch,
)
from logbus.storage.record_scan import Decompressor, default_decompressor
from logbus.storage.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, LogSegment
from logbus.storage.transaction_index import AbortedTxn, collect_aborted_transactions

logger = logging.getLogger(__name__)

FlushListener = Callable[[float], None]
"""Called with the milliseconds each flush that wrote something took (Kafka's
LogFlushStats: the broker's metrics record them). Called from the flushing thread."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """Everything stored for one partition replica.

    Owns its segments, producer state, leader epoch cache and `partition.metadata`.
    Mutations run on the broker's event loop; `flush` may run in a thread pool, and the
    log cleaner's threads swap cleaned segments in with `replace_segments`. A lock
    guards the segment list, the end offsets and the recovery point, and the segment list
    is replaced (never changed in place) so readers always see a consistent snapshot.
    `high_watermark` is a plain field maintained by the caller (the replica manager).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = True,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
        decompress: Decompressor | None = None,
        on_flush: FlushListener | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        """`names`: the directory's listing, when the caller (loading logs at start-up)
        already has it; the directory then exists."""
        now = _now_ms() if now_ms is None else now_ms
        self.topic, self.partition = parse_topic_partition(directory)
        self._on_flush = on_flush
        self.dir = directory
        self.config = config
        # Only timestamp search and compacted-topic key checks look inside batches.
        self.decompress = decompress if decompress is not None else default_decompressor()
        self._lock = threading.RLock()
        if names is None:
            directory.mkdir(parents=True, exist_ok=True)
        self._topic_id = read_partition_metadata(directory)
        if topic_id is not None:
            self.assign_topic_id(topic_id)

        loaded = load_segments(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
            now_ms=now,
            names=names,
        )
        self._segments: tuple[LogSegment, ...] = tuple(loaded.segments)
        self._base_offsets: tuple[int, ...] = ()
        self._set_segments(loaded.segments)
        self._log_end_offset = loaded.log_end_offset
        # A checkpointed start past the recovered end means that data was lost with the tail.
        start = max(log_start_offset, self._segments[0].base_offset)
        self.log_start_offset = min(start, self._log_end_offset)
        self.recovery_point = loaded.recovery_point
        self.high_watermark = self.log_start_offset
        self.last_flush_ms = now
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # Counts truncations, so the log cleaner can tell its sources were cut under it.
        self.truncations = 0
        # Set on roll: the old segments need an fsync (done by LogManager.flush_dirty).
        self.pending_flush_offset: int | None = None
        self.leader_epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state = ProducerStateManager(directory)
        self._rebuild_producer_state(loaded.recovered_from, loaded.names)

    # -- identity and offsets -----------------------------------------------------------

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record the topic id in `partition.metadata`; a different stored id is an error."""
        if self._topic_id is not None:
            if self._topic_id != topic_id:
                raise InconsistentTopicIdError(
                    f"{self.dir} holds topic id {self._topic_id}, not {topic_id}"
                )
            return
        write_partition_metadata(self.dir, topic_id)
        self._topic_id = topic_id

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    @property
    def log_end_offset_metadata(self) -> tuple[int, int, int]:
        """(log end offset, active segment base offset, active segment size)."""
        active = self.active_segment
        return self._log_end_offset, active.base_offset, active.size

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = tuple(segments)
        self._base_offsets = tuple(segment.base_offset for segment in segments)

    def _floor_index(self, offset: int) -> int:
        return max(0, bisect_right(self._base_offsets, offset) - 1)

    # -- appends ------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        log_append_time: bool | None = None,
        max_message_bytes: int | None = None,
        compact: bool | None = None,
        from_client: bool = True,
    ) -> AppendInfo:
        """Validate the batches, check producer sequences, assign offsets and append.

        Options default to the log's config. A retried batch of an idempotent producer is
        not written again: the returned info carries its original offsets and
        `duplicate=True`. Raises the typed errors of `storage.errors`.
        """
        now = _now_ms() if now_ms is None else now_ms
        config = self.config
        use_log_append_time = config.log_append_time if log_append_time is None else log_append_time
        batches = analyze_records(
            records,
            max_message_bytes=config.max_message_bytes
            if max_message_bytes is None
            else max_message_bytes,
            from_client=from_client,
            compact=config.compact if compact is None else compact,
            topic_partition=f"{self.topic}-{self.partition}",
        )
        if not batches:
            return AppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self.log_start_offset, 0, 0)
        if from_client:
            if not use_log_append_time:
                check_timestamps(
                    batches,
                    now,
                    config.message_timestamp_before_max_ms,
                    config.message_timestamp_after_max_ms,
                )
            codec = target_codec(config)
            rewritten = None if codec is None else recompress(records, batches, *codec)
            if rewritten is not None:
                records = rewritten
                batches = analyze_records(
                    records,
                    max_message_bytes=config.max_message_bytes
                    if max_message_bytes is None
                    else max_message_bytes,
                    from_client=from_client,
                )
        if len(records) > config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes of records exceed segment.bytes {config.segment_bytes}"
            )
        view = memoryview(records)
        with self._lock:
            first_offset = self._log_end_offset
            producer_batches: list[ProducerBatch] = []
            next_offset = first_offset
            for position, header, _, _ in batches:
                if header.has_producer_id:
                    timestamp = now if use_log_append_time else header.max_timestamp
                    batch = view[position : position + header.size]
                    producer_batches.append(producer_batch(batch, header, next_offset, timestamp))
                next_offset += header.last_offset_delta + 1
            outcome = self.producer_state.prepare_append(producer_batches, from_client=from_client)
            if isinstance(outcome, DuplicateBatch):
                return AppendInfo.of_duplicate(outcome, use_log_append_time, self.log_start_offset)
            assigned = assign_offsets(
                records,
                batches,
                first_offset=first_offset,
                leader_epoch=leader_epoch,
                log_append_time_ms=now if use_log_append_time else None,
            )
            last_offset, max_timestamp = assigned.last_offset, assigned.max_timestamp
            offset_of_max = assigned.offset_of_max_timestamp
            self._append_to_segment(assigned.buffer, last_offset, max_timestamp, offset_of_max, now)
            self.producer_state.commit(outcome)
            self._complete_txns(outcome.completed)
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
            self._log_end_offset = assigned.last_offset + 1
            self._maybe_flush_by_count(now)
        append_time = now if use_log_append_time else -1
        count = last_offset - first_offset + 1
        return AppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max,
            append_time,
            self.log_start_offset,
            count,
            len(assigned.buffer),
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendInfo:
        """Append batches that already carry their offsets (replication from the leader)."""
        now = _now_ms() if now_ms is None else now_ms
        batches = analyze_records(
            records,
            max_message_bytes=max(self.config.max_message_bytes, len(records)),
            from_client=False,
        )
        if not batches:
            return AppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self.log_start_offset, 0, 0)
        with self._lock:
            expected = self._log_end_offset
            max_timestamp, offset_of_max = NO_TIMESTAMP, -1
            for info in batches:
                header = info.header
                if header.base_offset < expected:
                    raise UnexpectedAppendOffsetError(
                        f"batch at offset {header.base_offset} is below the log end {expected}"
                    )
                expected = header.next_offset
                if header.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            first = batches[0].header.base_offset
            last = batches[-1].header.last_offset
            self._append_to_segment(records, last, max_timestamp, offset_of_max, now)
            view = memoryview(records)
            for position, header, _, _ in batches:
                batch = view[position : position + header.size]
                completed = self.producer_state.replay(
                    producer_batch(batch, header, header.base_offset, header.max_timestamp)
                )
                if completed is not None:
                    self._complete_txns([completed])
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            self._log_end_offset = last + 1
            self._maybe_flush_by_count(now)
        count = sum(info.header.record_count for info in batches)
        start = self.log_start_offset
        return AppendInfo(first, last, max_timestamp, offset_of_max, -1, start, count, len(records))

    def _complete_txns(self, completed: Sequence[CompletedTxn]) -> None:
        """Index the aborted ones on the active segment (which holds their markers) with
        the LSO at completion, then let the producer state complete them."""
        state = self.producer_state
        for txn in completed:
            if txn.is_aborted:
                lso = state.lso_for_completed(txn)
                self.active_segment.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                )
            state.complete_txn(txn)
        if completed:
            # forget the completed transactions the high watermark has passed
            state.first_unstable_offset(self.high_watermark)

    # -- transactions -------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): read_committed reads stop here."""
        with self._lock:
            return self.producer_state.last_stable_offset(self.high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        with self._lock:
            return self.producer_state.first_unstable_offset(self.high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start_offset, upper_bound)."""
        segments, base_offsets = self._segments, self._base_offsets
        return collect_aborted_transactions(segments, base_offsets, start_offset, upper_bound)

    def segment_end_offset(self, base_offset: int) -> int:
        """Where the segment starting at `base_offset` ends: the next segment's base offset,
        or the log end for the active one (the bound of a read that began in it)."""
        base_offsets = self._base_offsets
        index = bisect_right(base_offsets, base_offset)
        return base_offsets[index] if index < len(base_offsets) else self._log_end_offset

    def _append_to_segment(
        self,
        data: bytes | bytearray | memoryview,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        now_ms: int,
    ) -> None:
        active = self.active_segment
        if active.should_roll(self.config, len(data), max_timestamp, last_offset, now_ms):
            active = self.roll(now_ms)
        try:
            active.append(last_offset, max_timestamp, offset_of_max_timestamp, data)
        except OSError as exc:
            raise KafkaStorageError(f"cannot append to {active.log_path}: {exc}") from exc

    def _maybe_flush_by_count(self, now_ms: int) -> None:
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush(now_ms=now_ms)

    # -- reads --------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo:
        """Up to `max_bytes` from `start_offset`, never including a batch at or past
        `max_offset` (the high watermark for consumers). With `min_one_message` the first
        batch is returned whole even if larger than `max_bytes`.

        Raises OffsetOutOfRangeError below the log start offset or above the log end.
        """
        log_end = self._log_end_offset
        segments = self._segments
        base_offsets = self._base_offsets
        if start_offset < self.log_start_offset or start_offset > log_end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {log_end}] of "
                f"{self.topic}-{self.partition}"
            )
        index = max(0, bisect_right(base_offsets, start_offset) - 1)
        empty = FetchDataInfo(None, start_offset, segments[index].base_offset, 0)
        if start_offset == log_end or (max_offset is not None and start_offset >= max_offset):
            if start_offset == log_end:
                return empty._replace(
                    segment_base_offset=segments[-1].base_offset, position=segments[-1].size
                )
            return empty
        while index < len(segments):
            segment = segments[index]
            max_position = None
            if max_offset is not None:
                is_last = index + 1 == len(segments)
                if is_last or max_offset < base_offsets[index + 1]:
                    bound = segment.translate_offset(max_offset)
                    max_position = segment.size if bound is None else bound.position
            try:
                result = segment.read(start_offset, max_bytes, max_position, min_one_message)
            except OSError as exc:
                raise KafkaStorageError(f"cannot read {segment.log_path}: {exc}") from exc
            if result is not None:
                data = result.slice if result.slice.size > 0 else None
                return FetchDataInfo(data, start_offset, segment.base_offset, result.position)
            index += 1
        return empty

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest (log end), -3 the record with the largest
        timestamp, else the first record with a timestamp >= `timestamp` (None if none)."""
        cache = self.leader_epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(
                NO_TIMESTAMP, self.log_start_offset, cache.epoch_for_offset(self.log_start_offset)
            )
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(
                NO_TIMESTAMP, self._log_end_offset, cache.latest_epoch if cache.entries else None
            )
        segments = self._segments
        if timestamp == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp_so_far)
            if best.max_timestamp_so_far < 0:
                return None
            found = best.find_offset_by_timestamp(
                best.max_timestamp_so_far, self.log_start_offset, self.decompress
            )
        else:
            found = None
            for segment in segments:
                if segment.max_timestamp_so_far >= timestamp:
                    found = segment.find_offset_by_timestamp(
                        timestamp, self.log_start_offset, self.decompress
                    )
                    if found is not None:
                        break
        if found is None:
            return None
        return TimestampAndOffset(
            found.timestamp, found.offset, cache.epoch_for_offset(found.offset)
        )

    # -- rolling and flushing -------------------------------------------------------------

    def roll(
        self, now_ms: int | None = None, expected_next_offset: int | None = None
    ) -> LogSegment:
        """Start a new active segment at the log end offset (or `expected_next_offset` if
        larger); the old one is trimmed and a producer snapshot is written."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            new_offset = max(self._log_end_offset, expected_next_offset or 0)
            active = self.active_segment
            if active.base_offset == new_offset and active.size == 0:
                return active
            active.on_become_inactive()
            self.producer_state.take_snapshot(new_offset)
            segment = new_segment(self.dir, new_offset, self.config, now, active=True)
            self._set_segments([*self._segments, segment])
            self.pending_flush_offset = new_offset
            logger.info(
                "rolled %s-%d to a new segment at offset %d", self.topic, self.partition, new_offset
            )
            return segment

    def flush(self, offset: int | None = None, *, now_ms: int | None = None) -> None:
        """fsync every segment holding data below `offset` (default: the log end offset)
        that is not flushed yet, then advance the recovery point. Safe from any thread."""
        with self._lock:
            target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
            start = self.recovery_point
            segments = self._segments
            base_offsets = self._base_offsets
        if target > start:
            flush_started = time.perf_counter()
            first = max(0, bisect_right(base_offsets, start) - 1)
            for segment in segments[first:]:
                if segment.base_offset >= target:
                    break
                try:
                    segment.flush()
                except OSError as exc:
                    raise KafkaStorageError(f"cannot flush {segment.log_path}: {exc}") from exc
            if self._on_flush is not None:
                self._on_flush((time.perf_counter() - flush_started) * 1000)
        with self._lock:
            self.recovery_point = max(self.recovery_point, min(target, self._log_end_offset))
            if self.pending_flush_offset is not None and self.pending_flush_offset <= target:
                self.pending_flush_offset = None
            self.last_flush_ms = _now_ms() if now_ms is None else now_ms

    # -- truncation and retention ---------------------------------------------------------

    def truncate_to(self, target_offset: int, *, now_ms: int | None = None) -> bool:
        """Remove everything from `target_offset` on (a follower diverged from its leader).
        Returns whether anything was removed."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate to negative offset {target_offset}")
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            if target_offset >= self._log_end_offset:
                # Nothing to remove, but an epoch that starts at the log end (this broker
                # led in it without appending) may conflict with the leader's: drop it,
                # as Kafka does.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            if target_offset < self._segments[0].base_offset:
                self.truncate_fully_and_start_at(target_offset, now_ms=now)
                return True
            keep = [s for s in self._segments if s.base_offset <= target_offset]
            drop = [s for s in self._segments if s.base_offset > target_offset]
            self._set_segments(keep)
            self._delete_segments_later(drop, now)
            active = keep[-1]
            active.truncate_to(target_offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self._log_end_offset = active.read_next_offset()
            self._after_truncation()
            return True

    def truncate_fully_and_start_at(self, new_offset: int, *, now_ms: int | None = None) -> None:
        """Drop every segment and start an empty log at `new_offset`."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            old = list(self._segments)
            self._set_segments([])
            self._delete_segments_later(old, now)
            self._set_segments([new_segment(self.dir, new_offset, self.config, now, active=True)])
            self._log_end_offset = new_offset
            self.log_start_offset = new_offset
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots_after(-1)
            self._after_truncation()

    def _after_truncation(self) -> None:
        self.truncations += 1
        end = self._log_end_offset
        self.recovery_point = min(self.recovery_point, end)
        self.high_watermark = min(self.high_watermark, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self.producer_state.delete_snapshots_after(end)
        self._rebuild_producer_state()

    def maybe_increment_log_start_offset(self, new_start_offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords); segments entirely below it are
        deleted by the next `delete_old_segments`."""
        with self._lock:
            if new_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start to {new_start_offset}, above the high watermark "
                    f"{self.high_watermark}"
                )
            if new_start_offset <= self.log_start_offset:
                return False
            self.log_start_offset = new_start_offset
            self.leader_epoch_cache.truncate_from_start(new_start_offset)
            return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Delete segments below the log start offset and, when the cleanup policy includes
        "delete", those past retention.ms or retention.bytes. Only data below the high
        watermark goes. Returns the number of segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        config = self.config
        deleted = self._delete_oldest(log_start_breached(self.log_start_offset), now)
        if config.delete and config.retention_ms >= 0:
            deleted += self._delete_oldest(retention_ms_breached(now, config.retention_ms), now)
        if config.delete and config.retention_bytes >= 0:
            predicate = retention_size_breached(self.size_in_bytes, config.retention_bytes)
            deleted += self._delete_oldest(predicate, now)
        return deleted

    def _delete_oldest(self, predicate: SegmentPredicate, now_ms: int) -> int:
        with self._lock:
            doomed = deletable_segments(
                self._segments,
                predicate,
                high_watermark=self.high_watermark,
                log_end_offset=self._log_end_offset,
            )
            if not doomed:
                return 0
            if len(doomed) == len(self._segments):
                self.roll(now_ms)  # never leave the log without an active segment
            remaining = self._segments[len(doomed) :]
            self._set_segments(list(remaining))
            self._delete_segments_later(doomed, now_ms)
            new_start = max(self.log_start_offset, remaining[0].base_offset)
            if new_start != self.log_start_offset:
                self.log_start_offset = new_start
                self.leader_epoch_cache.truncate_from_start(new_start)
            self.producer_state.delete_snapshots_before(remaining[0].base_offset)
            return len(doomed)

    def _delete_segments_later(self, segments: list[LogSegment], now_ms: int) -> None:
        """Rename to `.deleted` now, unlink after file.delete.delay.ms, so that readers
        holding a slice of them keep working."""
        due = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            try:
                segment.change_file_suffixes("", DELETED_SUFFIX)
            except OSError as exc:
                logger.warning("cannot rename %s for deletion: %s", segment.log_path, exc)
            self._pending_deletes.append((due, segment))

    def remove_deleted_segments(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Unlink the `.deleted` segments whose delay has passed (all with `force`)."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            due = [s for at, s in self._pending_deletes if force or at <= now]
            self._pending_deletes = [
                (at, s) for at, s in self._pending_deletes if not (force or at <= now)
            ]
        for segment in due:
            segment.delete()
        return len(due)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        with self._lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    # -- log cleaning ---------------------------------------------------------------------

    def replace_segments(
        self,
        new: LogSegment,
        old: list[LogSegment],
        *,
        truncations: int,
        hook: Callable[[str], None] | None = None,
        now_ms: int | None = None,
    ) -> bool:
        """Swap the cleaned segment `new` (files suffixed `.cleaned`) in for the contiguous
        segments `old`, crash-safely: `.cleaned` -> `.swap`, the old segments go to
        `.deleted` (unlinked after file.delete.delay.ms), then `.swap` -> final names. A
        crash at any point leaves files the loader completes or discards.

        Returns False (and changes nothing) if the log changed under the cleaner: a source
        segment was deleted, became the active segment, or the log was truncated.
        """
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            current = self._segments
            ids = [id(s) for s in current]
            if (
                truncations != self.truncations
                or not old
                or id(old[0]) not in ids
                or current[-1] in old
                or new.base_offset != old[0].base_offset
            ):
                return False
            first = ids.index(id(old[0]))
            if [id(s) for s in current[first : first + len(old)]] != [id(s) for s in old]:
                return False
            new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            # The `.swap` names must be durable before any old segment is renamed away:
            # after a power loss the loader must find either the old segments or the swap.
            fsync_dir(self.dir)
            if hook is not None:
                hook("swap")
            segments = list(current)
            segments[first : first + len(old)] = [new]
            self._set_segments(segments)
            self._delete_segments_later(old, now)
            if hook is not None:
                hook("deleted")
            new.change_file_suffixes(SWAP_SUFFIX, "")
            fsync_dir(self.dir)
            return True

    def last_records_of_active_producers(self) -> dict[int, int | None]:
        """producer id -> the last offset of its last data batch (None if it has none):
        the batches the cleaner keeps, even empty, so producer state survives cleaning."""
        with self._lock:
            return {
                pid: (entry.last_offset if entry.batches else None)
                for pid, entry in self.producer_state.producers.items()
            }

    # -- producer state -------------------------------------------------------------------

    def _rebuild_producer_state(
        self, reindex_from: int | None = None, names: Sequence[str] | None = None
    ) -> None:
        rebuild_producer_state(
            self.producer_state,
            self._segments,
            self.log_start_offset,
            self._log_end_offset,
            reindex_from=reindex_from,
            names=names,
        )

    def take_producer_snapshot(self) -> None:
        with self._lock:
            self.producer_state.take_snapshot(self._log_end_offset)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self, *, clean: bool = True) -> None:
        """Release every file. A clean close flushes, writes a producer snapshot and trims
        the indexes; `clean=False` only drops the handles (tests simulate a crash)."""
        with self._lock:
            if clean:
                self.flush()
                # An empty log with no producer to remember has nothing to snapshot (a
                # broker hosting thousands of idle partitions stops without writing
                # thousands of files).
                if self._log_end_offset > self.log_start_offset or self.producer_state.producers:
                    self.producer_state.take_snapshot(self._log_end_offset)
            for segment in self._segments:
                segment.close(clean=clean)
        if clean:
            self.remove_deleted_segments(force=True)
        else:
            for _, segment in self._pending_deletes:
                segment.close(clean=False)

    def rename_dir(self, new_dir: Path) -> None:
        """Move the partition directory (e.g. to its `-delete` name); handles stay valid."""
        with self._lock:
            os.replace(self.dir, new_dir)
            self.dir = new_dir
            for segment in self._segments:
                segment.move_to(new_dir)
            for _, segment in self._pending_deletes:
                segment.move_to(new_dir)
            self.producer_state.log_dir = new_dir
            self.leader_epoch_cache.move_to(new_dir / LEADER_EPOCH_CHECKPOINT)

    def delete(self) -> None:
        """Close every file and remove the directory."""
        with self._lock:
            for segment in self._segments:
                segment.close(clean=False)
            for _, segment in self._pending_deletes:
                segment.close(clean=False)
            self._pending_deletes = []
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Log({self.dir}, log_start={self.log_start_offset}, log_end={self._log_end_offset})"
