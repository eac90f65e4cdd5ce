"""Opening a partition directory: find its segments, clean up leftovers of interrupted
operations, and recover the segments a crash may have damaged.

A log cleaner swap interrupted by a crash is finished or undone as Kafka's `LogLoader`
does: `.cleaned` files are deleted (with any `.swap` file at or above them), and when all
`.swap` files are in place, the segments they replace are deleted and the suffix dropped.

After a clean shutdown only segments with broken indexes are rebuilt. After an unclean one,
every segment from the one holding the recovery point onward is re-read: the first
invalid batch and everything after it (including later segments) is removed, and the
indexes are rebuilt.

A broker may load tens of thousands of logs at start-up, so a log's directory is listed
once (by the caller, or here) and that listing serves the leftover check, the segment
scan and the producer snapshots; it is listed again only when leftovers were removed.
"""

from __future__ import annotations

import logging
import os
import random
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch
from logbus.storage.errors import CorruptIndexError
from logbus.storage.log_config import LogConfig
from logbus.storage.producer_state import ProducerStateManager, producer_batch
from logbus.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
)
from logbus.storage.transaction_index import AbortedTxn
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
# Files that an interrupted operation leaves behind.
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, SWAP_SUFFIX)


@dataclass(slots=True)
class LoadedSegments:
    segments: list[LogSegment]
    log_end_offset: int
    recovery_point: int
    bytes_truncated: int
    # The base offset of the first segment re-read after an unclean shutdown (its and
    # later segments' transaction indexes are rebuilt with the producer state).
    recovered_from: int | None = None
    # The directory's file names once leftovers were removed (before segments were
    # recovered, which adds or removes only segment files).
    names: tuple[str, ...] = ()


def new_segment(
    directory: Path, base_offset: int, config: LogConfig, now_ms: int, *, active: bool
) -> LogSegment:
    segment = LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        created_ms=now_ms,
        active=active,
    )
    jitter = min(config.segment_jitter_ms, config.segment_ms)
    # segment.jitter.ms: each segment rolls up to that much earlier, at random.
    segment.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
    return segment


def _remove_leftovers(
    directory: Path, names: Sequence[str] | None = None
) -> tuple[dict[int, set[str]], list[str]]:
    """Delete leftover files, complete an interrupted log cleaner swap, and return
    {base offset: suffixes present} and the directory's file names after that (`names`:
    its listing, when the caller has one)."""
    listing = sorted(os.listdir(directory) if names is None else names)
    swaps, changed = _remove_temp_files(directory, listing)
    _complete_swaps(directory, swaps)
    if changed or swaps:
        listing = sorted(os.listdir(directory))
    found: dict[int, set[str]] = {}
    for name in listing:
        match = _SEGMENT_FILE.match(name)
        if match:
            found.setdefault(int(match.group(1)), set()).add(match.group(2))
    orphans = [base for base, suffixes in found.items() if LOG_SUFFIX not in suffixes]
    for base_offset in orphans:
        # An index without its log file is useless.
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (directory / f"{base_offset:020d}{suffix}").unlink(missing_ok=True)
        del found[base_offset]
    if orphans:
        listing = sorted(os.listdir(directory))
    return found, listing


def _remove_temp_files(directory: Path, names: Sequence[str]) -> tuple[list[Path], bool]:
    """Delete `.deleted`, `.tmp` and `.cleaned` files and the `.swap` files of a swap that
    had not finished renaming its `.cleaned` files (those at or above the lowest `.cleaned`
    base offset), as Kafka's loader does. Returns the `.swap` files that remain, and
    whether any file was deleted."""
    swaps: list[Path] = []
    min_cleaned: int | None = None
    changed = False
    for name in names:
        if not name.endswith(_LEFTOVER_SUFFIXES):
            continue  # the common case: a segment, index, snapshot or checkpoint file
        path = directory / name
        if name.endswith((DELETED_SUFFIX, ".tmp")):
            changed = True
            path.unlink(missing_ok=True)
        elif name.endswith(CLEANED_SUFFIX):
            base = _base_offset_of(name)
            if base is not None:
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            logger.info("deleting unfinished log cleaner output %s", path)
            changed = True
            path.unlink(missing_ok=True)
        else:
            swaps.append(path)
    valid: list[Path] = []
    for path in swaps:
        base = _base_offset_of(path.name)
        if base is None or (min_cleaned is not None and base >= min_cleaned):
            logger.warning("deleting %s, part of a swap that never completed", path)
            changed = True
            path.unlink(missing_ok=True)
        else:
            valid.append(path)
    return valid, changed


def _complete_swaps(directory: Path, swaps: list[Path]) -> None:
    """Finish a swap whose `.swap` files were all in place: the segments they replace
    (every non-swap file with a base offset in [first swap base, swap end offset)) are
    deleted, then the `.swap` suffix is dropped."""
    if not swaps:
        return
    low, high = None, None
    for path in swaps:
        if not path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        base = int(path.name[:20])
        end = _next_offset_of(path, base)
        low = base if low is None else min(low, base)
        high = end if high is None else max(high, end)
    if low is not None and high is not None:
        for name in sorted(os.listdir(directory)):
            match = _SEGMENT_FILE.match(name)  # segment files only, never snapshots
            if match and low <= int(match.group(1)) < high:
                logger.info("deleting %s, replaced by a cleaned segment", directory / name)
                (directory / name).unlink(missing_ok=True)
    for path in swaps:
        logger.info("completing the swap of %s", path)
        os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))


def _next_offset_of(path: Path, base_offset: int) -> int:
    """The offset after the last whole batch of a segment file (read without opening it
    as a segment, which would create missing index files)."""
    next_offset = base_offset
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while position + HEADER_SIZE <= size:
            try:
                header = BatchHeader.parse(os.pread(f.fileno(), HEADER_SIZE, position))
            except InvalidBatch:
                break
            if position + header.size > size:
                break
            next_offset = header.next_offset
            position += header.size
    return next_offset


def _base_offset_of(name: str) -> int | None:
    head = name[:20]
    return int(head) if len(name) > 20 and head.isdigit() and name[20] == "." else None


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    had_clean_shutdown: bool,
    now_ms: int,
    names: Sequence[str] | None = None,
) -> LoadedSegments:
    """Open (and where needed recover) every segment of `directory`; the last one is made
    ready for appends. An empty directory gets one segment at `log_start_offset`.
    `names`: the directory's listing, when the caller already has it."""
    found, listing = _remove_leftovers(directory, names)
    base_offsets = sorted(found)
    segments = [new_segment(directory, base, config, now_ms, active=False) for base in base_offsets]

    first_to_recover = len(segments)
    if not had_clean_shutdown and segments:
        first_to_recover = 0
        for i, segment in enumerate(segments):
            if segment.base_offset <= recovery_point:
                first_to_recover = i

    truncated = 0
    for segment in segments[:first_to_recover]:
        try:
            segment.sanity_check()
        except CorruptIndexError as exc:
            logger.warning("rebuilding indexes of %s: %s", segment.log_path, exc)
            truncated += segment.recover(config.max_message_bytes)

    kept = segments[:first_to_recover]
    recovered_from = None
    for i in range(first_to_recover, len(segments)):
        segment = segments[i]
        if recovered_from is None:
            recovered_from = segment.base_offset
        segment.txn_index.reset()
        removed = segment.recover(config.max_message_bytes)
        kept.append(segment)
        truncated += removed
        if removed:
            for later in segments[i + 1 :]:
                logger.warning("deleting %s, which follows a corrupt batch", later.log_path)
                truncated += later.size
                later.delete()
            break

    if not kept:
        kept = [new_segment(directory, log_start_offset, config, now_ms, active=True)]
    active = kept[-1]
    active.resize_indexes(config.segment_index_bytes)
    log_end_offset = active.read_next_offset()
    if had_clean_shutdown:
        new_recovery_point = log_end_offset
    else:
        new_recovery_point = min(recovery_point, log_end_offset)
    return LoadedSegments(
        kept, log_end_offset, new_recovery_point, truncated, recovered_from, tuple(listing)
    )


_RENAMED = re.compile(r"(.+)\.[0-9a-f]{32}-(?:delete|future|stray)")


def parse_topic_partition(directory: Path) -> TopicPartition:
    """`<topic>-<partition>` (the topic may itself contain '-'), also under the names of a
    log being deleted, a future log (AlterReplicaLogDirs) or a stray one:
    `<topic>-<partition>.<uuid hex>-delete|-future|-stray`."""
    name = directory.name
    renamed = _RENAMED.fullmatch(name)
    if renamed is not None:
        name = renamed.group(1)
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{directory.name!r} is not a <topic>-<partition> directory name")
    return TopicPartition(topic, int(partition))


def rebuild_producer_state(
    state: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_start_offset: int,
    log_end_offset: int,
    *,
    reindex_from: int | None = None,
    names: Sequence[str] | None = None,
) -> None:
    """Load the newest producer snapshot at or below the log end and replay the batches
    after it (from the log start when there is no snapshot); only headers are read, and
    whole batches only for transaction markers. `names`: the log directory's current
    listing, when the caller has one.

    With `reindex_from` (recovery after an unclean shutdown), replay starts at or below
    that offset and the aborted transactions whose markers lie at or after it are written
    again to their segments' transaction indexes (emptied by `load_segments`). Snapshots
    above it but within the recovered log are left in place, as Kafka's loader leaves
    them: the log they describe is still there, and deleting them cost a file-system
    write per log at every start after a crash."""
    snapshot_offset = state.load(log_end_offset, names, at_most=reindex_from)
    start = log_start_offset if snapshot_offset is None else snapshot_offset
    if snapshot_offset is None:
        state.reset(start)
    base_offsets = [s.base_offset for s in segments]
    first = max(0, bisect_right(base_offsets, start) - 1)
    for segment in segments[first:]:
        location = segment.translate_offset(start)
        if location is None:
            continue
        for position, header in segment.iter_headers(location.position):
            if header.last_offset < start:
                continue
            batch = memoryview(b"")
            if header.is_control and header.has_producer_id:
                batch = memoryview(segment.read_bytes(position, header.size))
            done = state.replay(
                producer_batch(batch, header, header.base_offset, header.max_timestamp)
            )
            if done is None:
                continue
            if done.is_aborted and reindex_from is not None and done.last_offset >= reindex_from:
                lso = state.lso_for_completed(done)
                segment.txn_index.append(
                    AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso)
                )
            state.complete_txn(done)
    state.map_end_offset = log_end_offset
