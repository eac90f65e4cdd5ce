"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`.

The `.log` file is a concatenation of record batches exactly as the log appended them;
the indexes are sparse maps from offsets and timestamps to positions in it.

Only the active segment keeps its log file open. Older segments open it when read and
close it again when it is the least recently used of the broker's open segment files
(`open_files.OPEN_FILES`); indexes are mapped the same way. A `FileSlice` holds the file
object itself, so a slice being sent keeps its descriptor open after the segment let go.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from logbus.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    crc_is_valid,
    peek_offset_and_length,
)
from logbus.storage.errors import CorruptIndexError
from logbus.storage.file_slice import FileSlice
from logbus.storage.log_config import LogConfig
from logbus.storage.offset_index import OffsetIndex
from logbus.storage.open_files import OPEN_FILES
from logbus.storage.record_scan import Decompressor, iter_records
from logbus.storage.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from logbus.storage.transaction_index import TransactionIndex

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

_INT32_MAX = (1 << 31) - 1
_RECOVERY_CHUNK = 1 << 20
_SCAN_CHUNK = 16 * 1024


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """`<dir>/<20-digit base offset><suffix>`, Kafka's file naming."""
    return directory / f"{base_offset:020d}{suffix}"


class BatchLocation(NamedTuple):
    """Where one batch sits in a segment file."""

    base_offset: int
    last_offset: int
    position: int
    size: int


class SegmentRead(NamedTuple):
    """The result of `LogSegment.read`: the bytes to send and the first batch's offset."""

    slice: FileSlice
    first_offset: int
    position: int


class LogFile(io.FileIO):
    """A segment's open log file, shared by the segment and the `FileSlice`s read from it.

    The segment never closes it while others may hold it: it lets go of it, and the
    descriptor is closed when the last reference (the segment's or a slice's) is gone.
    """

    def __del__(self) -> None:
        # Closed explicitly, so that dropping the last reference is not reported as a
        # leaked file (ResourceWarning): letting go is how a segment closes it.
        self.close()


class _ReadWindow:
    """Buffered positional reads over a file: one pread serves many small batches."""

    def __init__(self, file: LogFile, end: int, chunk: int) -> None:
        self._file = file  # kept open while the window reads it
        self._fd = file.fileno()
        self._end = end
        self._chunk = chunk
        self._start = 0
        self._buf = b""

    def get(self, position: int, size: int) -> memoryview:
        """Up to `size` bytes at `position` (fewer at the end of the file)."""
        size = max(0, min(size, self._end - position))
        offset = position - self._start
        if offset < 0 or offset + size > len(self._buf):
            self._buf = os.pread(self._fd, max(size, self._chunk), position)
            self._start = position
            offset = 0
        return memoryview(self._buf)[offset : offset + size]


class LogSegment:
    """The files of one segment and what is known about them in memory.

    Owns the log file handle (shared, read-only, with `FileSlice`s it hands out) and both
    indexes. The active segment keeps its log file open; an inactive one opens it on use
    and lets the open-file bound close it when idle. Appends, reads and truncation run on
    the broker's event loop; `flush` may run in a thread pool, and `flush`, `close`, suffix
    changes, truncation and the closing of an idle file serialize on an internal lock.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        created_ms: int = 0,
        active: bool = True,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.created_ms = created_ms
        # Subtracted from segment.ms when deciding to roll (segment.jitter.ms).
        self.roll_jitter_ms = 0
        self._suffix = suffix
        self._lock = threading.RLock()
        self._closed = False
        self.recently_used = False
        # The active segment's log file stays open; others are opened on use.
        self._pinned = active
        self._file: LogFile | None = None
        if active:
            log_file = self._log_file()
            self._size = os.fstat(log_file.fileno()).st_size
        else:
            self._size = self.log_path.stat().st_size
        index_path = segment_file(directory, base_offset, INDEX_SUFFIX + suffix)
        time_index_path = segment_file(directory, base_offset, TIME_INDEX_SUFFIX + suffix)
        self.offset_index = OffsetIndex(
            index_path,
            base_offset,
            max_index_size,
            writable=active,
        )
        self.time_index = TimeIndex(
            time_index_path,
            base_offset,
            max_index_size,
            writable=active,
        )
        # Known from the indexes' own look-ups (one stat each), not asked again.
        self._missing_indexes = [
            index.path for index in (self.offset_index, self.time_index) if not index.existed
        ]
        self.txn_index = TransactionIndex(
            segment_file(directory, base_offset, TXN_INDEX_SUFFIX + suffix)
        )
        self.bytes_since_last_index_entry = 0
        # Loaded lazily: both need reads that loading a large log should not pay for.
        self._max_timestamp: TimestampOffset | None = None
        self._rolling_timestamp: int | None = None if self._size > 0 else NO_TIMESTAMP

    # -- names and sizes --------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, LOG_SUFFIX + self._suffix)

    @property
    def size(self) -> int:
        return self._size

    def _log_file(self) -> LogFile:
        """The open log file, opened now if it is not; callers keep the returned object
        for as long as they use its descriptor."""
        self.recently_used = True
        f = self._file
        if f is not None:
            return f
        with self._lock:
            if self._closed:
                raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
            f = self._file
            if f is None:
                fd = os.open(self.log_path, os.O_RDWR | (os.O_CREAT if self._pinned else 0), 0o644)
                f = self._file = LogFile(fd, "r+")
                if not self._pinned:
                    OPEN_FILES.opened(self)
            return f

    def close_idle(self) -> bool:
        """Let go of the log file of an inactive segment unless another thread is busy
        with the segment (the open-file bound asks)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self._pinned:
                self._file = None
            return True
        finally:
            self._lock.release()

    @property
    def has_open_files(self) -> bool:
        """Whether the log file or an index is open now (for tests and diagnostics)."""
        return self._file is not None or self.offset_index.is_mapped or self.time_index.is_mapped

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_modified_ms(self) -> int:
        try:
            return int(self.log_path.stat().st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index is missing or cannot be valid."""
        if self._size > 0 and self._missing_indexes:
            raise CorruptIndexError(f"index file {self._missing_indexes[0]} is missing")
        self.offset_index.sanity_check(self._size)
        self.time_index.sanity_check()

    # -- timestamps -------------------------------------------------------------------

    @property
    def max_timestamp_so_far(self) -> int:
        return self._largest_timestamp_entry().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._largest_timestamp_entry().offset

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime if there is none (retention)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    def _largest_timestamp_entry(self) -> TimestampOffset:
        if self._max_timestamp is None:
            # Every batch before the last offset index entry is covered by the last time
            # index entry; the batches from there on are scanned.
            best = self.time_index.last_entry if self.time_index.entries else None
            if best is None:
                best = TimestampOffset(NO_TIMESTAMP, self.base_offset)
            for _, header in self.iter_headers(self.offset_index.last_entry.position):
                if header.max_timestamp > best.timestamp:
                    best = TimestampOffset(header.max_timestamp, header.last_offset)
            self._max_timestamp = best
        return self._max_timestamp

    def first_batch_timestamp(self) -> int:
        """The max timestamp of the first batch (-1 for an empty segment)."""
        return self._first_batch_timestamp()

    def set_last_modified(self, ms: int) -> None:
        """Set the log file's mtime (a cleaned segment keeps its sources' age)."""
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def _first_batch_timestamp(self) -> int:
        if self._rolling_timestamp is None:
            self._rolling_timestamp = NO_TIMESTAMP
            for _, header in self.iter_headers(0):
                self._rolling_timestamp = header.max_timestamp
                break
        return self._rolling_timestamp

    def should_roll(
        self,
        config: LogConfig,
        messages_size: int,
        max_timestamp: int,
        max_offset: int,
        now_ms: int,
    ) -> bool:
        """Whether an append of `messages_size` bytes (largest timestamp and offset given)
        must go to a new segment: segment.bytes, segment.ms counted from the first batch's
        timestamp (or the creation time of an empty segment), full indexes, or offsets too
        far from the base offset to index."""
        if self._size > config.segment_bytes - messages_size:
            return True
        if self._size > 0:
            first = self._first_batch_timestamp()
            waited = max_timestamp - first if first >= 0 else now_ms - self.created_ms
            if waited > config.segment_ms - self.roll_jitter_ms:
                return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > _INT32_MAX
        )

    # -- appends ----------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Write whole batches at the end of the file and index them every
        `index_interval_bytes`."""
        size = len(records)
        if size == 0:
            return
        if largest_offset - self.base_offset > _INT32_MAX:
            raise ValueError(f"offset {largest_offset} is too far from base {self.base_offset}")
        position = self._size
        log_file = self._log_file()
        fd = log_file.fileno()
        try:
            view = memoryview(records)
            written = 0
            while written < size:
                written += os.pwrite(fd, view[written:], position + written)
        except OSError:
            # Leave no partial batch behind that a later append would not overwrite.
            os.ftruncate(fd, position)
            raise
        self._size = position + size
        if position == 0:
            self._rolling_timestamp = largest_timestamp
        current = self._largest_timestamp_entry()
        if largest_timestamp > current.timestamp:
            current = self._max_timestamp = TimestampOffset(
                largest_timestamp, offset_of_max_timestamp
            )
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(current.timestamp, current.offset)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    # -- reads ------------------------------------------------------------------------

    def iter_headers(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `start_position`; stops at anything that
        is not a whole v2 batch (only possible in a segment not yet recovered)."""
        end = self._size if end_position is None else min(end_position, self._size)
        window = _ReadWindow(self._log_file(), end, _SCAN_CHUNK)
        position = start_position
        while position + HEADER_SIZE <= end:
            try:
                header = BatchHeader.parse(window.get(position, HEADER_SIZE))
            except InvalidBatch:
                logger.warning("unreadable batch at position %d of %s", position, self.log_path)
                return
            if position + header.size > end:
                return
            yield position, header
            position += header.size

    def read_bytes(self, position: int, size: int) -> bytes:
        f = self._log_file()
        return os.pread(f.fileno(), size, position)

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The first batch whose last offset is >= `offset`, or None."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for position, header in self.iter_headers(start):
            if header.last_offset >= offset:
                return BatchLocation(header.base_offset, header.last_offset, position, header.size)
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> SegmentRead | None:
        """Bytes from the batch containing `start_offset`, at most `max_size` of them (or
        the whole first batch with `min_one_message`) and none at or past `max_position`.

        The slice may end inside a batch, as Kafka's fetch responses do. Returns None when
        no batch in this segment reaches `start_offset`.
        """
        location = self.translate_offset(start_offset)
        if location is None:
            return None
        end = self._size if max_position is None else min(max_position, self._size)
        limit = max(max_size, location.size) if min_one_message else max_size
        size = max(0, min(end - location.position, limit))
        return SegmentRead(
            FileSlice(self._log_file(), location.position, size),
            location.base_offset,
            location.position,
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch, or the base offset if the segment is empty."""
        next_offset = self.base_offset
        for _, header in self.iter_headers(self.offset_index.last_entry.position):
            next_offset = header.next_offset
        return next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0, decompress: Decompressor | None = None
    ) -> TimestampOffset | None:
        """The first record at or after `starting_offset` with a timestamp >= `timestamp`.

        When a compressed batch cannot be decompressed here, its first offset stands in
        for the record (never later than the exact answer).
        """
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for batch_position, header in self.iter_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            first = max(header.base_offset, starting_offset)
            if header.is_log_append_time:
                return TimestampOffset(header.max_timestamp, first)
            data = memoryview(self.read_bytes(batch_position, header.size))
            try:
                records = iter_records(data, header, decompress)
                if records is None:
                    return TimestampOffset(header.max_timestamp, first)
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return TimestampOffset(record.timestamp, record.offset)
            except ValueError:
                logger.warning(
                    "unreadable records in batch at %d of %s", batch_position, self.log_path
                )
                return TimestampOffset(header.max_timestamp, first)
        return None

    # -- recovery and truncation ------------------------------------------------------

    def recover(self, max_message_size: int) -> int:
        """Re-read every batch, rebuild both indexes and cut the file at the first batch
        that is torn, oversized, not v2, fails its CRC or goes back in offsets.

        Returns the number of bytes truncated.
        """
        with self._lock:
            self.offset_index.reset(self.max_index_size)
            self.time_index.reset(self.max_index_size)
            self._missing_indexes = []
            log_file = self._log_file()
            window = _ReadWindow(log_file, self._size, _RECOVERY_CHUNK)
            valid = 0
            last_index_position = 0
            next_offset = self.base_offset
            max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
            first_ts = NO_TIMESTAMP
            while valid < self._size:
                header = self._valid_batch_at(window, valid, next_offset, max_message_size)
                if header is None:
                    break
                if header.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
                if valid - last_index_position > self.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid)
                    self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                    last_index_position = valid
                if valid == 0:
                    first_ts = header.max_timestamp
                valid += header.size
                next_offset = header.next_offset
            truncated = self._size - valid
            if truncated:
                logger.warning(
                    "truncating %s at byte %d: %d invalid bytes", self.log_path, valid, truncated
                )
                os.ftruncate(log_file.fileno(), valid)
                self._size = valid
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            self._max_timestamp = max_ts
            self._rolling_timestamp = first_ts
            self.bytes_since_last_index_entry = valid - last_index_position
            return truncated

    def _valid_batch_at(
        self, window: _ReadWindow, position: int, min_offset: int, max_message_size: int
    ) -> BatchHeader | None:
        head = window.get(position, LOG_OVERHEAD)
        if len(head) < LOG_OVERHEAD:
            return None
        _, length = peek_offset_and_length(head)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or size > max_message_size:
            return None
        data = window.get(position, size)
        if len(data) < size:
            return None
        try:
            header = BatchHeader.parse(data)
        except InvalidBatch:
            return None
        if (
            header.base_offset < min_offset
            or header.last_offset_delta < 0
            or header.last_offset - self.base_offset > _INT32_MAX
            or not crc_is_valid(data, header)
        ):
            return None
        return header

    def truncate_to(self, offset: int) -> int:
        """Remove every batch from the one containing `offset` on; returns bytes removed."""
        with self._lock:
            location = self.translate_offset(offset)
            if location is None:
                return 0
            self.offset_index.truncate_to(offset)
            self.time_index.truncate_to(offset)
            self.txn_index.truncate_to(offset)
            self.offset_index.resize(self.max_index_size)
            self.time_index.resize(self.max_index_size)
            removed = self._size - location.position
            log_file = self._log_file()
            os.ftruncate(log_file.fileno(), location.position)
            self._size = location.position
            self._max_timestamp = None
            self._rolling_timestamp = None if self._size > 0 else NO_TIMESTAMP
            self.bytes_since_last_index_entry = self._size - self.offset_index.last_entry.position
            return removed

    # -- lifecycle --------------------------------------------------------------------

    def resize_indexes(self, size: int) -> None:
        """Give both indexes room for appends and keep the log file open: the segment
        becomes the active one."""
        with self._lock:
            self._pinned = True
            OPEN_FILES.forget(self)
            self._log_file()
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """Record the final largest timestamp and trim the indexes (on roll); the log file
        is now closed when idle."""
        with self._lock:
            current = self._largest_timestamp_entry()
            self.time_index.maybe_append(current.timestamp, current.offset, skip_full_check=True)
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()
            self._pinned = False
            if self._file is not None:
                OPEN_FILES.opened(self)

    def flush(self) -> None:
        """fsync the log file and both indexes (safe from any thread)."""
        with self._lock:
            if self._closed:
                return
            log_file = self._log_file()
            os.fsync(log_file.fileno())
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def close(self, *, clean: bool = True) -> None:
        """Release the files; `clean=False` skips the final index work (a simulated crash)."""
        with self._lock:
            if self._closed:
                return
            if clean and self._max_timestamp is not None:
                self.time_index.maybe_append(
                    self._max_timestamp.timestamp, self._max_timestamp.offset, skip_full_check=True
                )
            self.offset_index.close(trim=clean)
            self.time_index.close(trim=clean)
            self._closed = True
            # Slices still being sent keep the file open until they are done.
            self._file = None
            OPEN_FILES.forget(self)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. "" -> ".deleted"; handles stay valid."""
        with self._lock:
            if self._suffix != old_suffix:
                raise ValueError(f"segment suffix is {self._suffix!r}, not {old_suffix!r}")
            old_log = self.log_path
            self._suffix = new_suffix
            os.replace(old_log, self.log_path)
            self.offset_index.rename(
                segment_file(self.directory, self.base_offset, INDEX_SUFFIX + new_suffix)
            )
            self.time_index.rename(
                segment_file(self.directory, self.base_offset, TIME_INDEX_SUFFIX + new_suffix)
            )
            self.txn_index.rename(
                segment_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX + new_suffix)
            )

    def move_to(self, directory: Path) -> None:
        """Follow the partition directory after it was renamed (handles stay valid)."""
        with self._lock:
            self.directory = directory
            self.offset_index.path = directory / self.offset_index.path.name
            self.time_index.path = directory / self.time_index.path.name
            self.txn_index.path = directory / self.txn_index.path.name

    def delete(self) -> None:
        """Close and unlink every file of the segment."""
        with self._lock:
            self.close(clean=False)
            self.log_path.unlink(missing_ok=True)
            self.offset_index.delete()
            self.time_index.delete()
            self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self._size})"
