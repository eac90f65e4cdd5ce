"""The machinery shared by OffsetIndex and TimeIndex: a memory-mapped array of fixed-size,
big-endian entries in one file, searched by binary search.

As in Kafka, a writable index file is preallocated to `max_index_size` bytes and trimmed to
the bytes actually used when its segment becomes inactive or is closed; on open, the
number of entries is the file size divided by the entry size. The file is only mapped on
first use, so loading a log with many segments opens no index files.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from logbus.storage.errors import CorruptIndexError


class IndexFullError(Exception):
    """An append to an index that has no room left (the segment should have rolled)."""


class AbstractIndex:
    """One index file of a segment.

    Owns the file and its mapping. Reads and appends happen on the broker's event loop;
    `flush`, `close`, `resize` and `rename` take an internal lock so a flush running in a
    thread pool never sees the mapping replaced or closed under it.
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
        self._fd = -1
        try:
            length = path.stat().st_size
            exists = True
        except FileNotFoundError:
            length = 0
            exists = False
        self._corrupt_length = length % self.ENTRY_SIZE != 0
        if not exists or (writable and length == 0):
            # A new index starts empty with room for max_index_size bytes of entries.
            self._entries = 0
            self._length = 0
            self._open()
            self._remap(self._round(max_index_size))
        else:
            self._entries = length // self.ENTRY_SIZE
            self._length = length
            if writable:
                self.resize(max_index_size)

    # -- file and mapping -------------------------------------------------------------

    def _round(self, size: int) -> int:
        return max(0, size - size % self.ENTRY_SIZE)

    def _open(self) -> None:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _view(self) -> mmap.mmap:
        """The mapping, opened on first use."""
        m = self._mmap
        if m is None:
            with self._lock:
                if self._mmap is None:
                    self._open()
                    if self._length == 0:
                        raise IndexFullError(f"index {self.path} has no space")
                    self._mmap = mmap.mmap(self._fd, self._length)
                m = self._mmap
        return m

    def _remap(self, new_length: int) -> None:
        """Set the file length (keeping entries) and map it again; caller holds the lock."""
        self._open()
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        os.ftruncate(self._fd, new_length)
        self._length = new_length
        if new_length > 0:
            self._mmap = mmap.mmap(self._fd, new_length)

    def resize(self, new_size: int) -> bool:
        """Grow or shrink the file to `new_size` (rounded down to whole entries, never
        below the used size). Returns whether the length changed."""
        with self._lock:
            target = max(self._round(new_size), self._entries * self.ENTRY_SIZE)
            if target == self._length:
                return False
            self._remap(target)
            return True

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries in use (on roll and on close)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def flush(self) -> None:
        """Write the mapping's dirty pages and the file length to disk."""
        with self._lock:
            if self._mmap is not None:
                self._mmap.flush()
            if self._fd >= 0:
                os.fsync(self._fd)

    def close(self, *, trim: bool = True) -> None:
        """Trim (unless this is a simulated crash) and release the file."""
        with self._lock:
            if trim and self._fd >= 0 and not self._corrupt_length:
                self.trim_to_valid_size()
            if self._mmap is not None:
                self._mmap.close()
                self._mmap = None
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

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
        return self._ENTRY.unpack_from(self._view(), slot * self.ENTRY_SIZE)

    def _first_and_last_raw(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The first and last entries, read without mapping the file if it is not mapped
        yet (sanity checks at load time should not keep every index open)."""
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
        self._ENTRY.pack_into(self._view(), self._entries * self.ENTRY_SIZE, first, second)
        self._entries += 1

    def _floor_slot(self, target: int, key: Callable[[int], int]) -> int:
        """The last slot whose key is <= target, or -1 (keys are non-decreasing)."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or key(0) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) <= target:
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
            self._remap(self._round(max_index_size))

    def _check_length(self) -> None:
        if self._corrupt_length:
            raise CorruptIndexError(
                f"index file {self.path} has a size that is not a multiple of {self.ENTRY_SIZE}"
            )
