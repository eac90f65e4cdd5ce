"""`<base offset>.index`: maps offsets to byte positions in a segment's log file.

Each 8-byte entry is (int32 offset relative to the segment's base offset, int32 position).
Entries are sparse (one per `index.interval.bytes` of appended data) and strictly
increasing in both fields; a lookup returns the floor entry, from which the segment scans
forward batch by batch.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbus.storage.abstract_index import AbstractIndex
from logbus.storage.errors import CorruptIndexError

_INT32_MAX = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """The offset index of one segment (see `AbstractIndex` for ownership and threads)."""

    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">ii")

    def entry(self, slot: int) -> OffsetPosition:
        relative, position = self._raw_entry(slot)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    @property
    def last_offset(self) -> int:
        return self.last_entry.offset

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must grow and fit in 31 bits relative to the base."""
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} cannot be indexed relative to {self.base_offset}")
        if self._entries > 0:
            last = self.last_entry
            if offset <= last.offset or position <= last.position:
                raise ValueError(
                    f"index entry ({offset}, {position}) is not after the last one {tuple(last)}"
                )
        self._write_entry(relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        slot = self._floor_slot(target_offset - self.base_offset, 0)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        with self._lock:
            slot = self._floor_slot(offset - self.base_offset, 0)
            if slot < 0:
                self._truncate_to_entries(0)
            elif self.entry(slot).offset == offset:
                self._truncate_to_entries(slot)
            else:
                self._truncate_to_entries(slot + 1)

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexError if the file cannot be a valid index (for example the
        zero-filled tail a crash leaves in a preallocated file)."""
        self._check_length()
        if self._entries == 0:
            return
        (first_rel, first_pos), (last_rel, last_pos) = self._first_and_last_raw()
        if first_rel < 0 or last_rel < 0:
            raise CorruptIndexError(f"index {self.path} has a negative relative offset")
        if self._entries > 1 and (last_rel <= first_rel or last_pos <= first_pos):
            raise CorruptIndexError(f"index {self.path} entries are not increasing")
        if log_size is not None and last_pos >= log_size:
            raise CorruptIndexError(f"index {self.path} points past the end of its log")
