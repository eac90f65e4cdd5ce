"""The log cleaner's key -> latest offset map (Kafka's `SkimpyOffsetMap`).

Keys are stored as their 16-byte MD5 digests, so every entry has the same size whatever
the key's length, and the capacity follows Kafka's arithmetic: one slot per 24 bytes
(digest plus offset) of `log.cleaner.dedupe.buffer.size` / `log.cleaner.threads`, of
which `log.cleaner.io.buffer.load.factor` may be filled. Python's per-entry overhead makes
the real memory use a few times larger than the configured buffer.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16
_ENTRY_SIZE = HASH_SIZE + 8


class OffsetMap:
    """A bounded map from key digest to the latest offset seen for that key.

    Owned by one cleaner thread; not safe to share.
    """

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(1, memory // _ENTRY_SIZE)
        self.max_entries = max(1, int(self.slots * load_factor))
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._offsets = {}
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def put(self, key: bytes | memoryview, offset: int) -> None:
        self._offsets[hashlib.md5(key).digest()] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes | memoryview) -> int:
        """The latest offset of `key`, or -1 if it is not in the map."""
        return self._offsets.get(hashlib.md5(key).digest(), -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset
