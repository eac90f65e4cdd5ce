"""The `__consumer_offsets` topic as the group coordinator sees it: its name and which of
its partitions coordinates a group (Kafka's `GroupCoordinatorService.partitionFor`)."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_int(n: int) -> int:
    """`n` wrapped to a signed 32-bit int, as Java's int arithmetic overflows."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def java_abs(n: int) -> int:
    """Kafka's `Utils.abs`: the absolute value, 0 for Integer.MIN_VALUE."""
    return 0 if n == -(1 << 31) else abs(n)


def offsets_partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates `group_id`:
    `Utils.abs(groupId.hashCode) % partitions`, as Kafka computes it (not the hash's low
    31 bits: for a negative hash the two differ)."""
    return java_abs(java_string_hash(group_id)) % partitions
