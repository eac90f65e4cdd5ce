"""`<base offset>.timeindex`: maps timestamps to offsets in a segment.

Each 12-byte entry is (int64 timestamp, int32 offset relative to the segment's base
offset). An entry is only added when the segment's largest timestamp so far grows, so
timestamps are strictly increasing and offsets non-decreasing; entry (t, o) says no record
before offset o has a timestamp >= t.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from logbus.storage.abstract_index import AbstractIndex
from logbus.storage.errors import CorruptIndexError

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """The time index of one segment (see `AbstractIndex` for ownership and threads)."""

    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qi")

    def entry(self, slot: int) -> TimestampOffset:
        timestamp, relative = self._raw_entry(slot)
        return TimestampOffset(timestamp, self.base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if `timestamp` is larger than the last entry's.

        `skip_full_check` lets the final entry of a segment be written into the slot that
        `is_full` keeps in reserve for it, as Kafka does when a segment becomes inactive.
        """
        last = self.last_entry
        if timestamp <= last.timestamp:
            return False
        if self._entries > 0 and offset < last.offset:
            raise ValueError(f"time index offset {offset} is below the last one {last.offset}")
        relative = offset - self.base_offset
        if relative < 0 or relative >= 1 << 31:
            raise ValueError(f"offset {offset} cannot be indexed relative to {self.base_offset}")
        if not skip_full_check and self._entries >= self.max_entries - 1:
            return False
        if self._entries >= self.max_entries:
            # A trimmed (inactive) index still takes its final entry.
            self.resize((self._entries + 1) * self.ENTRY_SIZE)
        self._write_entry(timestamp, relative)
        return True

    @property
    def is_full(self) -> bool:
        # One slot stays free for the entry written when the segment is rolled or closed.
        return self._entries >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset)."""
        slot = self._floor_slot(target_timestamp, 0)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        with self._lock:
            slot = self._floor_slot(offset - self.base_offset - 1, 1)
            self._truncate_to_entries(slot + 1)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the entries cannot be valid (e.g. a zero-filled tail)."""
        self._check_length()
        if self._entries == 0:
            return
        first, last = self._first_and_last_raw()
        if first[1] < 0 or last[1] < 0:
            raise CorruptIndexError(f"time index {self.path} has a negative relative offset")
        if self._entries > 1 and (last[0] <= first[0] or last[1] < first[1]):
            raise CorruptIndexError(f"time index {self.path} entries are not increasing")
