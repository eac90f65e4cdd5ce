"""Choosing a partition for a record the way Kafka's Java client does.

Keyed records go to `toPositive(murmur2(key)) % partitions` (Kafka's
`BuiltInPartitioner.partitionForKey`), so a key lands on the same partition whichever
client wrote it. Keyless records stick to one partition per batch and move on round-robin
(KIP-480's sticky partitioning, without its load-based weighting): `StickyPartitioner`,
which the producer moves on when a batch fills, and the Spark sink (`spread`) after every
`batch.size` bytes of rows.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """32-bit MurmurHash2 with Kafka's seed, as a signed int like Java's `Utils.murmur2`."""
    buf = bytes(data)
    length = len(buf)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(buf[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = buf[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's `Utils.toPositive`: clear the sign bit (not `abs`, which overflows)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Picks partitions for keyless records: the same one until `next_batch()`, then the
    next one round-robin. Starts at a random partition so that many short-lived producers
    spread out. `spread` places many records at once, moving on after each `batch.size`
    bytes. Not shared between tasks."""

    def __init__(self, num_partitions: int, start: int | None = None, filled: int = 0) -> None:
        if num_partitions <= 0:
            raise ValueError("a topic has at least one partition")
        self.num_partitions = num_partitions
        first = random.randrange(num_partitions) if start is None else start
        self._current = first % num_partitions
        self._filled = filled  # bytes `spread` has placed on the current partition

    @property
    def current(self) -> int:
        return self._current

    @property
    def filled(self) -> int:
        return self._filled

    def next_batch(self) -> int:
        self._current = (self._current + 1) % self.num_partitions
        self._filled = 0
        return self._current

    def spread(self, sizes: npt.NDArray[np.int64], batch_size: int) -> npt.NDArray[np.int64]:
        """The partition of each of a run of records of `sizes` bytes (as the producer
        counts them, in order): `batch_size` bytes to one partition, then as many to the
        next. Computed with a few cuts, not a division per record."""
        count = self.num_partitions
        current = self._current
        before = np.cumsum(sizes)
        total = self._filled + int(before[-1])
        before -= sizes
        before += self._filled
        # Record i goes before_i // batch_size partitions further than `current`.
        moves = int(before[-1]) // batch_size
        if moves > len(sizes):  # batches smaller than records
            chosen: npt.NDArray[np.int64] = (current + before // batch_size) % count
        else:
            # The records from where `before` reaches each multiple of batch_size on go one
            # partition further.
            steps = np.searchsorted(before, np.arange(1, moves + 1) * batch_size)
            chosen = np.repeat(
                np.arange(current, current + moves + 1, dtype=np.int64),
                np.diff(steps, prepend=0, append=len(sizes)),
            )
            if current + moves >= count:
                chosen %= count
        self._current = (current + total // batch_size) % count
        self._filled = total % batch_size
        return chosen
