"""A bound on the segment files a broker keeps open (KIP-263: indexes are loaded lazily).

Index files are mapped, and the log files of segments that are no longer active are
opened, only when they are used. Each one that is open is remembered here; when more
than `capacity` are open, the one used least recently is closed again (the clock, or
"second chance", approximation of LRU: a use only sets a flag, so the hot paths pay a
plain attribute write). The active segment's log file stays open and is not counted.

`OPEN_FILES` is shared by every log of the process. A file is closed outside this
module's lock, and only if its owner is not busy with it (a non-blocking try), so
closing never waits for, or deadlocks with, a reader or a flush in another thread.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from typing import Final, Protocol


def _soft_descriptor_limit() -> int | None:
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _share_of_limit(most: int) -> int:
    """`most`, or a quarter of the descriptor limit if that is smaller."""
    soft = _soft_descriptor_limit()
    return most if soft is None else max(16, min(most, soft // 4))


# Each counted file costs one descriptor (an index mapping or a log file).
DEFAULT_CAPACITY: Final = _share_of_limit(1024)
# Descriptors kept free for connections, checkpoints and the counted files when the broker
# decides whether it can host more partitions.
RESERVED_DESCRIPTORS: Final = _share_of_limit(2048)


class LazyFile(Protocol):
    """Something holding a file open that can be reopened on its next use."""

    recently_used: bool

    def close_idle(self) -> bool:
        """Close the file unless it is busy right now; True if it was closed (or was
        not open any more)."""


class OpenFileCache:
    """The set of lazily opened files, at most `capacity` of them (safe between threads)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[int, LazyFile] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, owner: LazyFile) -> None:
        """`owner` has just opened its file: count it, and close the least recently used
        files beyond the capacity."""
        owner.recently_used = True
        victims: list[LazyFile] = []
        with self._lock:
            self._open[id(owner)] = owner
            self._open.move_to_end(id(owner))
            # Every entry is looked at about twice: once to clear its flag, once to close.
            budget = 2 * len(self._open) + 2
            while len(self._open) > self.capacity and budget > 0:
                budget -= 1
                key, oldest = next(iter(self._open.items()))
                self._open.move_to_end(key)
                if oldest is owner:
                    continue
                if oldest.recently_used:
                    oldest.recently_used = False
                else:
                    del self._open[key]
                    victims.append(oldest)
        for victim in victims:
            if not victim.close_idle():
                # Busy (a flush or a read in another thread): it stays open and counted.
                with self._lock:
                    self._open[id(victim)] = victim

    def forget(self, owner: LazyFile) -> None:
        """Stop counting `owner`: it closed its file itself (deleted or closed), or keeps
        it open for good (the active segment's log file)."""
        with self._lock:
            self._open.pop(id(owner), None)


OPEN_FILES = OpenFileCache()


def spare_descriptors() -> int | None:
    """How many more file descriptors this process may open and still keep
    `RESERVED_DESCRIPTORS` free (its soft RLIMIT_NOFILE minus those open now), or None
    where that cannot be told. Each partition a broker hosts keeps one open."""
    soft = _soft_descriptor_limit()
    if soft is None:
        return None
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        return None
    return soft - in_use - RESERVED_DESCRIPTORS
