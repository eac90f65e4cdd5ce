"""Partition sizes for the topic pages, from every broker's log dirs (DescribeLogDirs):
a partition's size is its leader's copy (each replica holds the same batches, so that is
what the partition takes once; AKHQ shows the same), a topic's size the sum of its
partitions'. Brokers that do not answer (or a principal without Describe on the cluster)
leave sizes out: the page shows "-" there, never an error."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from logbus.client.admin import Admin, AdminBatchError, LogDirDescription
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition

logger = logging.getLogger(__name__)

# Sizes decorate the page; a broker slow to answer must not hold it up for long.
SIZES_TIMEOUT_MS = 5000
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")

Sizes = dict[TopicPartition, dict[int, int]]
"""Each partition's size in bytes on each broker holding a replica of it."""


def _collect(found: dict[int, dict[str, LogDirDescription]]) -> Sizes:
    sizes: Sizes = {}
    for broker_id, dirs in found.items():
        for described in dirs.values():
            for tp, replica in described.replicas.items():
                if not replica.is_future:
                    sizes.setdefault(tp, {})[broker_id] = replica.size
    return sizes


async def replica_sizes(admin: Admin, partitions: Sequence[TopicPartition] | None = None) -> Sizes:
    """The size of every replica of `partitions` (of every partition when None) on the
    brokers that answered."""
    try:
        found = await admin.describe_log_dirs(partitions=partitions, timeout_ms=SIZES_TIMEOUT_MS)
    except AdminBatchError as exc:
        logger.info("partition sizes incomplete: %s", exc)
        found = dict(exc.results)
    except KafkaError as exc:
        logger.info("no partition sizes: %s", exc)
        return {}
    return _collect(found)


def partition_size(sizes: Sizes, tp: TopicPartition, leader: int) -> int | None:
    """The leader's copy of a partition (None when its leader did not say)."""
    return sizes.get(tp, {}).get(leader)


def topic_size(sizes: Sizes, topic: str, leaders: dict[int, int]) -> int | None:
    """The sum of a topic's partitions' sizes (`leaders`: partition -> leader); None when
    no partition's size is known."""
    known = [
        size
        for p, leader in leaders.items()
        if (size := partition_size(sizes, TopicPartition(topic, p), leader)) is not None
    ]
    return sum(known) if known else None


def human_bytes(size: int | None) -> str:
    """A size as people read it: 0 B, 512 B, 1.5 KiB, 20.0 MiB; "-" when unknown."""
    if size is None:
        return "-"
    value = float(size)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
