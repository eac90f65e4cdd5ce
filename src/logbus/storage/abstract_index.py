"""The machinery shared by OffsetIndex and TimeIndex: a memory-mapped array of fixed-size,
big-endian entries in one file, searched by binary search.

As in Kafka, a writable index file is preallocated to `max_index_size` bytes and trimmed to
the bytes actually used when its segment becomes inactive or is closed; on open, the
number of entries is the file size divided by the entry size. The file is only mapped on
first use and unmapped again when it has been idle longest among the open segment files
(`open_files.OPEN_FILES`), so a broker with many partitions keeps few index files open
(KIP-263); no descriptor is held besides the mapping itself.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
from pathlib import Path
from typing import ClassVar

from logbus.storage.errors import CorruptIndexError
from logbus.storage.open_files import OPEN_FILES


class IndexFullError(Exception):
    """An append to an index that has no room left (the segment should have rolled)."""


class AbstractIndex:
    """One index file of a segment.

    Owns the file and its mapping. Reads and appends happen on the broker's event loop (or
    a log cleaner thread for the segments it writes); every use of the mapping, `flush`,
    `close`, `resize`, `rename` and the closing of an idle mapping take an internal lock,
    so no thread ever sees the mapping replaced or closed under it.
    """

    ENTRY_SIZE: ClassVar[int]
    _ENTRY: ClassVar[struct.Struct]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = 10 * 1024 * 1024,
        *,
        writable: bool = True,
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self._lock = threading.RLock()
        self._mmap: mmap.mmap | None = None
        self.recently_used = False
        # Entries written since the last fsync. A new length alone needs none: a wrong
        # length after a crash is found by the sanity check, and the index rebuilt.
        self._dirty = False
        try:
            length = path.stat().st_size
            exists = True
        except FileNotFoundError:
            length = 0
            exists = False
        # Whether the file was there before this object (a missing index of a non-empty
        # segment means it must be rebuilt).
        self.existed = exists
        self._corrupt_length = length % self.ENTRY_SIZE != 0
        self._entries = length // self.ENTRY_SIZE
        self._length = length
        if not exists or (writable and length == 0):
            # A new index starts empty with room for max_index_size bytes of entries.
            self._entries = 0
            self._set_length(self._round(max_index_size), create=True)
        elif writable:
            self.resize(max_index_size)

    # -- file and mapping -------------------------------------------------------------

    def _round(self, size: int) -> int:
        return max(0, size - size % self.ENTRY_SIZE)

    def _view(self) -> mmap.mmap:
        """The mapping, mapped on first use; the caller holds the lock while it uses it."""
        self.recently_used = True
        m = self._mmap
        if m is None:
            if self._length == 0:
                raise IndexFullError(f"index {self.path} has no space")
            fd = os.open(self.path, os.O_RDWR)
            try:
                m = self._mmap = mmap.mmap(fd, self._length)
            finally:
                os.close(fd)  # the mapping holds a descriptor of its own
            OPEN_FILES.opened(self)
        return m

    @property
    def is_mapped(self) -> bool:
        return self._mmap is not None

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
            OPEN_FILES.forget(self)

    def close_idle(self) -> bool:
        """Unmap the file if no other thread is using it (the open-file bound asks)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._mmap is not None:
                self._mmap.close()
                self._mmap = None
            return True
        finally:
            self._lock.release()

    def _set_length(self, new_length: int, *, create: bool = False) -> None:
        """Set the file length, keeping the entries; the caller holds the lock. The file
        is mapped again on its next use."""
        self._unmap()
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            os.ftruncate(fd, new_length)
        finally:
            os.close(fd)
        self._length = new_length

    def resize(self, new_size: int) -> bool:
        """Grow or shrink the file to `new_size` (rounded down to whole entries, never
        below the used size). Returns whether the length changed."""
        with self._lock:
            target = max(self._round(new_size), self._entries * self.ENTRY_SIZE)
            if target == self._length:
                return False
            self._set_length(target)
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries in use (on roll and on close)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def flush(self) -> None:
        """Write the entries and the file length to disk (pages written through a mapping
        since closed are still the file's, and fsync writes them too)."""
        # The fsync runs outside the lock: appends on the event loop take it for each entry,
        # and must not wait for a disk flush in a worker thread. Entries written meanwhile
        # mark the index dirty again, for the next flush.
        with self._lock:
            if not self._dirty:
                return
            self._dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            with self._lock:
                self._dirty = True
            raise

    def close(self, *, trim: bool = True) -> None:
        """Trim (unless this is a simulated crash) and release the file."""
        with self._lock:
            if trim and not self._corrupt_length:
                with contextlib.suppress(FileNotFoundError):
                    self.trim_to_valid_size()
            self._unmap()

    def rename(self, new_path: Path) -> None:
        with self._lock:
            if self.path.exists():
                os.replace(self.path, new_path)
            self.path = new_path

    def delete(self) -> None:
        self.close(trim=False)
        self.path.unlink(missing_ok=True)

    # -- entries ----------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def _raw_entry(self, slot: int) -> tuple[int, int]:
        with self._lock:
            return self._ENTRY.unpack_from(self._view(), slot * self.ENTRY_SIZE)

    def _first_and_last_raw(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The first and last entries, read without mapping the file if it is not mapped
        yet (sanity checks at load time should not keep every index open)."""
        with self._lock:
            if self._mmap is not None:
                return self._raw_entry(0), self._raw_entry(self._entries - 1)
        with open(self.path, "rb") as f:
            first = f.read(self.ENTRY_SIZE)
            f.seek((self._entries - 1) * self.ENTRY_SIZE)
            last = f.read(self.ENTRY_SIZE)
        if len(first) < self.ENTRY_SIZE or len(last) < self.ENTRY_SIZE:
            raise CorruptIndexError(f"index {self.path} is shorter than its entries")
        return self._ENTRY.unpack(first), self._ENTRY.unpack(last)

    def _write_entry(self, first: int, second: int) -> None:
        if self._entries >= self.max_entries:
            raise IndexFullError(f"index {self.path} is full ({self._entries} entries)")
        with self._lock:
            self._ENTRY.pack_into(self._view(), self._entries * self.ENTRY_SIZE, first, second)
            self._entries += 1
            self._dirty = True

    def _floor_slot(self, target: int, field: int) -> int:
        """The last slot whose entry's `field` (0 or 1) is <= target, or -1 (the field is
        non-decreasing). One lock and one mapping for the whole search."""
        with self._lock:
            hi = self._entries - 1
            if hi < 0:
                return -1
            view = self._view()
            unpack, size = self._ENTRY.unpack_from, self.ENTRY_SIZE
            if unpack(view, 0)[field] > target:
                return -1
            lo = 0
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if unpack(view, mid * size)[field] <= target:
                    lo = mid
                else:
                    hi = mid - 1
            return lo

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = max(0, min(entries, self._entries))

    def reset(self, max_index_size: int) -> None:
        """Drop every entry and make room for `max_index_size` bytes (before a rebuild)."""
        with self._lock:
            self._entries = 0
            self._corrupt_length = False
            self._set_length(self._round(max_index_size))

    def _check_length(self) -> None:
        if self._corrupt_length:
            raise CorruptIndexError(
                f"index file {self.path} has a size that is not a multiple of {self.ENTRY_SIZE}"
            )
