"""Offset ranges: the unit of work of one Spark task, and how ranges are split.

An `OffsetRange` is half-open, [start, end), in one topic-partition. It is also the
`InputPartition` Spark pickles to an executor, so a retried task reads the same range.
`split_ranges` follows Spark's Kafka offset range calculator: with `minPartitions` larger
than the number of ranges, big ranges are cut into pieces in proportion to their size;
`maxRecordsPerPartition` caps every piece.
"""

from __future__ import annotations

import math

from pyspark.sql.datasource import InputPartition


class OffsetRange(InputPartition):
    """Records [start, end) of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _cut(rng: OffsetRange, pieces: int) -> list[OffsetRange]:
    pieces = max(1, min(pieces, rng.size))
    out = []
    for i in range(pieces):
        start = rng.start + rng.size * i // pieces
        end = rng.start + rng.size * (i + 1) // pieces
        out.append(OffsetRange(rng.topic, rng.partition, start, end))
    return out


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Ranges with records, cut so there are at least `min_partitions` of them (when the
    records allow) and none holds more than `max_records_per_partition`."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        ranges = [
            piece
            for r in ranges
            for piece in _cut(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        # Each range gets pieces in proportion to its share of all records, at least one.
        out.extend(_cut(r, max(1, math.ceil(r.size * min_partitions / total))))
    return out
