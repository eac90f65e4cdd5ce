"""One pass of log compaction over one log (Kafka's `Cleaner`).

A pass reads the dirty section [first dirty offset, first uncleanable offset) into an
`OffsetMap` of key -> latest offset, then recopies every segment from the start of the
log up to the end of what was mapped, group by group (a group of segments becomes one
cleaned segment no larger than segment.bytes and the index limit), keeping a record only
if it is the latest for its key. Tombstones (null values) are kept until their batch's
delete horizon (KIP-534: the first pass that sees a tombstone stamps its batch with
now + delete.retention.ms in the base timestamp and sets attribute bit 6; a later pass
after the horizon drops them). Records keep their offsets, batches keep their producer
id, epoch, base sequence and last offset delta; a batch left without records is dropped,
except the last batch of a producer that still has state and the last batch of the
pass, which stay as empty batches. Each group is swapped in with `Log.replace_segments`.

Transactions (Kafka's rules, `cleaner_transactions.py`): records of aborted transactions
are removed (and never enter the offset map, so they shadow no earlier record); a
transaction marker is kept while records of its transaction remain, then until the
delete horizon its batch is stamped with passes, as a tombstone. Nothing at or after the
last stable offset is cleaned (the first uncleanable offset is bounded by it).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from logbus.records.batch import (
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    peek_offset_and_length,
)
from logbus.records.builder import build_batch
from logbus.records.reader import decode_batch
from logbus.records.record import Record
from logbus.storage.cleaner_transactions import CleanedTransactions
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.storage.offset_map import OffsetMap
from logbus.storage.record_scan import read_control_marker
from logbus.storage.segment import CLEANED_SUFFIX, LogSegment
from logbus.storage.throttler import Throttler
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1

# Phases at which a test hook may interrupt a pass (to prove crash safety).
PHASE_OFFSET_MAP = "offset-map"
PHASE_CLEANED = "cleaned"
PHASE_SWAP = "swap"
PHASE_DELETED = "deleted"
PHASE_DONE = "done"

PhaseHook = Callable[[str], None]


class CleaningAbortedError(Exception):
    """The pass stopped early (shutdown, the log was deleted or changed under it)."""


@dataclass(slots=True)
class LogToClean:
    """A log chosen for cleaning and its dirty range; sizes are measured when built."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    needs_compaction_now: bool = False
    clean_bytes: int = field(init=False)
    cleanable_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        # As Kafka counts them, a segment holding the first dirty offset is both clean and
        # cleanable.
        clean = cleanable = 0
        segments = self.log.segments
        for i, segment in enumerate(segments):
            if segment.base_offset < self.first_dirty_offset:
                clean += segment.size
            end = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if segment.base_offset >= self.first_uncleanable_offset:
                break
            if end is None or end > self.first_dirty_offset:
                cleanable += segment.size
        self.clean_bytes, self.cleanable_bytes = clean, cleanable

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    map_messages_read: int = 0


class _SourceBatch(NamedTuple):
    header: BatchHeader
    data: memoryview


class _SegmentReader:
    """Reads whole batches of a segment through a file handle of its own, so the log
    may rename, close or delete the segment while the cleaner reads it."""

    def __init__(self, path: Path, size: int, chunk: int) -> None:
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise CleaningAbortedError(f"{path} is gone") from exc
        self._size = size
        self._chunk = max(chunk, HEADER_SIZE)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> _SegmentReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def batches(self, start: int = 0) -> Iterator[_SourceBatch]:
        position = start
        buffer = b""
        buffer_start = position
        while position + LOG_OVERHEAD <= self._size:
            offset = position - buffer_start
            if offset + LOG_OVERHEAD > len(buffer):
                buffer = os.pread(self._fd, self._chunk, position)
                buffer_start, offset = position, 0
            _, length = peek_offset_and_length(buffer, offset)
            size = length + LOG_OVERHEAD
            if position + size > self._size:
                raise InvalidBatch(f"batch at position {position} runs past the segment end")
            if offset + size > len(buffer):
                buffer = os.pread(self._fd, max(size, self._chunk), position)
                buffer_start, offset = position, 0
            view = memoryview(buffer)[offset : offset + size]
            yield _SourceBatch(BatchHeader.parse(view), view)
            position += size


class Cleaner:
    """Cleans one log at a time with its own offset map and throttler (one per cleaner
    thread; not safe to share). `check_done` raises CleaningAbortedError to stop a pass;
    `hook` is called at each phase (tests interrupt passes through it)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        throttler: Throttler,
        *,
        io_buffer_size: int = 512 * 1024,
        check_done: Callable[[TopicPartition], None] | None = None,
        hook: PhaseHook | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.throttler = throttler
        self.io_buffer_size = max(io_buffer_size, 4096)
        self._check_done = check_done
        self.hook = hook

    def _phase(self, phase: str) -> None:
        if self.hook is not None:
            self.hook(phase)

    def _checkpoint(self, tp: TopicPartition) -> None:
        if self._check_done is not None:
            self._check_done(tp)

    # -- a pass ---------------------------------------------------------------------------

    def clean(self, cleanable: LogToClean, now_ms: int | None = None) -> tuple[int, CleanerStats]:
        """Clean the log; returns the first offset not cleaned (the next first dirty offset)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        log = cleanable.log
        config = log.config
        truncations = log.truncations
        stats = CleanerStats()
        segments = list(log.segments[:-1])  # never the active segment
        upper = cleanable.first_uncleanable_offset
        self._build_offset_map(cleanable, segments, stats)
        # Never behind where the pass started, even if nothing could be mapped.
        end_offset = max(self.offset_map.latest_offset + 1, cleanable.first_dirty_offset)
        self._phase(PHASE_OFFSET_MAP)
        to_clean = [s for s in segments if s.base_offset < end_offset]
        active_producers = log.last_records_of_active_producers()
        for group in group_segments_by_size(
            to_clean, config.segment_bytes, config.segment_index_bytes, upper
        ):
            self._clean_group(
                cleanable, group, config, now, stats, active_producers, upper, truncations
            )
        self._phase(PHASE_DONE)
        return end_offset, stats

    def _build_offset_map(
        self, cleanable: LogToClean, segments: list[LogSegment], stats: CleanerStats
    ) -> None:
        offset_map = self.offset_map
        offset_map.clear()
        start, end = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
        dirty = [
            (segment, (segments[i + 1].base_offset if i + 1 < len(segments) else end))
            for i, segment in enumerate(segments)
            if segment.base_offset < end
            and (i + 1 == len(segments) or segments[i + 1].base_offset > start)
        ]
        txns = CleanedTransactions(cleanable.log.collect_aborted_transactions(start, end))
        for segment, next_start in dirty:
            self._checkpoint(cleanable.topic_partition)
            if self._map_segment(cleanable, segment, start, stats, txns):
                logger.debug("offset map full in segment %d", segment.base_offset)
                return
            offset_map.update_latest_offset(next_start - 1)

    def _map_segment(
        self,
        cleanable: LogToClean,
        segment: LogSegment,
        start: int,
        stats: CleanerStats,
        txns: CleanedTransactions,
    ) -> bool:
        """Add the keys of one segment; returns True if the map filled up."""
        offset_map = self.offset_map
        position = segment.offset_index.lookup(start).position
        with _SegmentReader(segment.log_path, segment.size, self.io_buffer_size) as reader:
            for batch in reader.batches(position):
                self.throttler.maybe_throttle(batch.header.size)
                header = batch.header
                if header.last_offset < start:
                    continue
                if header.is_control:
                    txns.on_control_batch(header, _control_type(batch))
                elif not txns.on_data_batch(header):
                    for record in _readable_records(batch.data, header, segment.log_path):
                        stats.map_messages_read += 1
                        if record.key is None or record.offset < start:
                            continue
                        if offset_map.is_full:
                            return True
                        offset_map.put(record.key, record.offset)
                offset_map.update_latest_offset(header.last_offset)
                self._checkpoint(cleanable.topic_partition)
        return False

    # -- one group --------------------------------------------------------------------------

    def _clean_group(
        self,
        cleanable: LogToClean,
        group: list[LogSegment],
        config: LogConfig,
        now_ms: int,
        stats: CleanerStats,
        active_producers: dict[int, int | None],
        upper: int,
        truncations: int,
    ) -> None:
        log = cleanable.log
        cleaned = LogSegment(
            log.dir,
            group[0].base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            created_ms=now_ms,
            active=True,
            suffix=CLEANED_SUFFIX,
        )
        segments = log.segments
        after = [s.base_offset for s in segments if s.base_offset > group[-1].base_offset]
        group_end = min(after[0] if after else upper, upper)
        txns = CleanedTransactions(
            log.collect_aborted_transactions(group[0].base_offset, group_end)
        )
        try:
            for segment in group:
                self._clean_into(
                    cleanable, segment, cleaned, config, now_ms, stats, active_producers, upper,
                    txns,
                )
            cleaned.txn_index.replace(txns.retained_aborted)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms)
            self._phase(PHASE_CLEANED)
            logger.info(
                "swapping in cleaned segment %d for %d segment(s) of %s",
                cleaned.base_offset,
                len(group),
                log.dir.name,
            )
            if not log.replace_segments(
                cleaned, group, truncations=truncations, hook=self.hook, now_ms=now_ms
            ):
                raise CleaningAbortedError(f"{log.dir.name} changed while it was cleaned")
        except Exception:
            if not any(s is cleaned for s in log.segments):
                cleaned.delete()
            raise
        except BaseException:
            # A simulated crash (tests) or an interpreter exit: leave the files on disk as
            # a crash would, for the loader to complete or discard.
            if not any(s is cleaned for s in log.segments):
                cleaned.close(clean=False)
            raise

    def _clean_into(
        self,
        cleanable: LogToClean,
        source: LogSegment,
        dest: LogSegment,
        config: LogConfig,
        now_ms: int,
        stats: CleanerStats,
        active_producers: dict[int, int | None],
        upper: int,
        txns: CleanedTransactions,
    ) -> None:
        with _SegmentReader(source.log_path, source.size, self.io_buffer_size) as reader:
            for batch in reader.batches():
                self._checkpoint(cleanable.topic_partition)
                self.throttler.maybe_throttle(batch.header.size)
                stats.bytes_read += batch.header.size
                kept = self._filter_batch(
                    batch, config, now_ms, stats, active_producers, upper, txns
                )
                if kept is None:
                    continue
                header = BatchHeader.parse(kept)
                dest.append(header.last_offset, header.max_timestamp, header.last_offset, kept)
                stats.bytes_written += len(kept)
                self.throttler.maybe_throttle(len(kept))

    def _filter_batch(
        self,
        batch: _SourceBatch,
        config: LogConfig,
        now_ms: int,
        stats: CleanerStats,
        active_producers: dict[int, int | None],
        upper: int,
        txns: CleanedTransactions,
    ) -> bytes | memoryview | None:
        """The batch as it should be rewritten (the original bytes if unchanged), or None."""
        header = batch.header
        if header.is_control:
            return _filter_marker(batch, config, now_ms, txns)
        aborted = txns.on_data_batch(header)
        last_of_producer = header.has_producer_id and (
            active_producers.get(header.producer_id, -2) == header.last_offset
        )
        retain_empty = last_of_producer or header.next_offset == upper
        has_horizon = bool(header.attributes & DELETE_HORIZON_FLAG)
        try:
            records = decode_batch(batch.data)[1]
        except InvalidBatch as exc:
            logger.warning("kept unreadable batch at offset %d as it is: %s",
                           header.base_offset, exc)
            return batch.data
        stats.messages_read += len(records)
        kept: list[Record] = []
        tombstones = False
        for record in records:
            if aborted:
                continue
            if self._should_retain(record, header, has_horizon, now_ms, stats):
                kept.append(record)
                tombstones = tombstones or record.value is None
        stats.messages_written += len(kept)
        needs_horizon = tombstones and not has_horizon
        if kept and len(kept) == len(records) and not needs_horizon:
            return batch.data
        if kept:
            horizon: int | None = None
            if needs_horizon:
                horizon = now_ms + config.delete_retention_ms
            elif has_horizon:
                horizon = header.base_timestamp
            return build_batch(
                kept,
                base_offset=header.base_offset,
                compression=header.compression,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                is_transactional=header.is_transactional,
                log_append_time=header.is_log_append_time,
                partition_leader_epoch=header.partition_leader_epoch,
                max_timestamp=header.max_timestamp if header.is_log_append_time else None,
                last_offset_delta=header.last_offset_delta,
                delete_horizon_ms=horizon,
            )
        if retain_empty:
            return build_batch(
                [],
                base_offset=header.base_offset,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                is_transactional=header.is_transactional,
                log_append_time=header.is_log_append_time,
                partition_leader_epoch=header.partition_leader_epoch,
                base_timestamp=header.max_timestamp,
                max_timestamp=header.max_timestamp,
                last_offset_delta=header.last_offset_delta,
            )
        return None

    def _should_retain(
        self,
        record: Record,
        header: BatchHeader,
        has_horizon: bool,
        now_ms: int,
        stats: CleanerStats,
    ) -> bool:
        offset_map = self.offset_map
        if record.offset > offset_map.latest_offset:
            return True  # beyond what this pass mapped
        if record.key is None:
            stats.invalid_messages += 1
            return False
        if record.offset < offset_map.get(record.key):
            return False  # a later record has this key
        if record.value is not None:
            return True
        return not has_horizon or now_ms < header.base_timestamp


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose log bytes fit in `max_size`, whose index bytes fit in
    `max_index_size` and whose offsets fit the 32-bit relative offsets of one segment."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_index_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            last_offset = (
                segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            )
            if (
                log_size + candidate.size > max_size
                or index_size + candidate.offset_index.size_in_bytes > max_index_size
                or time_index_size + candidate.time_index.size_in_bytes > max_index_size
                or (candidate.size > 0 and last_offset - group[0].base_offset > _INT32_MAX)
            ):
                break
            group.append(candidate)
            log_size += candidate.size
            index_size += candidate.offset_index.size_in_bytes
            time_index_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def _control_type(batch: _SourceBatch) -> int | None:
    marker = read_control_marker(batch.data, batch.header)
    return None if marker is None else marker.control_type


def _filter_marker(
    batch: _SourceBatch, config: LogConfig, now_ms: int, txns: CleanedTransactions
) -> bytes | memoryview | None:
    """A transaction marker: kept while its transaction may still have records here;
    then stamped with a delete horizon, and removed once that has passed."""
    header = batch.header
    if not txns.on_control_batch(header, _control_type(batch)):
        return batch.data
    if header.attributes & DELETE_HORIZON_FLAG:
        return None if header.base_timestamp <= now_ms else batch.data
    try:
        records = decode_batch(batch.data)[1]
    except InvalidBatch:
        return batch.data
    return build_batch(
        records,
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        is_control=True,
        log_append_time=header.is_log_append_time,
        partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=now_ms + config.delete_retention_ms,
    )


def _readable_records(data: memoryview | bytes, header: BatchHeader, where: Path) -> list[Record]:
    """The records of a stored batch; none (and a log line) if it cannot be read: stored
    data left corrupt by a disk fault or an older broker is kept, never a crash."""
    try:
        return decode_batch(data)[1]
    except InvalidBatch as exc:
        logger.warning("unreadable batch at offset %d of %s: %s", header.base_offset, where, exc)
        return []
