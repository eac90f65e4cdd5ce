"""The consumer's public values: records, committed offsets, the rebalance listener, and
the errors only a consumer raises."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, NamedTuple

from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

Header = tuple[str, bytes | None]

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class ConsumerRecord(NamedTuple):
    """One record as `poll()` returns it. `timestamp_type` is 0 (CreateTime) or 1
    (LogAppendTime); `key` and `value` are deserialized (bytes by default, None for a
    null); `headers` is a tuple of (name, value) pairs."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[Header, ...]


class PartitionColumns(NamedTuple):
    """Consecutive records of one partition as `poll_columns()` returns them: item i of
    each list belongs to record i (`offsets`, `timestamps`, `keys`, `values`, bytes or
    None); `timestamp_type` 0 (CreateTime) or 1 (LogAppendTime) for all; `headers` a tuple
    of (name, value) pairs per record, or None when no record has any."""

    topic: str
    partition: int
    offsets: list[int]
    timestamps: list[int]
    timestamp_type: int
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[Header, ...]] | None


class OffsetAndMetadata(NamedTuple):
    """A committed offset (the next record to read) and the metadata stored with it."""

    offset: int
    metadata: str = ""


class ConsumerRebalanceListener:
    """Hooks called when a subscribed consumer's partitions change (Kafka's
    ConsumerRebalanceListener). Override any; each may be a plain function or, with the
    asyncio consumer, a coroutine function. They run inside `poll()` (or `close()`), so a
    blocking consumer's hooks run in the thread that polls and may call the consumer.

    - `on_partitions_revoked`: before a rebalance (eager assignors: all partitions; with
      cooperative-sticky: only those moving away), while they may still be committed.
    - `on_partitions_assigned`: after a rebalance, with the partitions newly assigned.
    - `on_partitions_lost`: partitions that are already someone else's (the member was
      dropped from the group); by default it calls `on_partitions_revoked`.
    """

    def on_partitions_revoked(
        self, revoked: Sequence[TopicPartition]
    ) -> Awaitable[None] | None:
        return None

    def on_partitions_assigned(
        self, assigned: Sequence[TopicPartition]
    ) -> Awaitable[None] | None:
        return None

    def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> Awaitable[None] | None:
        return self.on_partitions_revoked(lost)


class OffsetOutOfRangeError(KafkaError):
    """A partition's position is outside its log and auto.offset.reset is "none"."""

    def __init__(self, partitions: dict[TopicPartition, int]) -> None:
        self.partitions = partitions
        where = ", ".join(f"{tp.topic}-{tp.partition} at {o}" for tp, o in partitions.items())
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"offsets out of range with no "
                         f"reset policy: {where}")


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and auto.offset.reset is "none"."""

    def __init__(self, partitions: Sequence[TopicPartition]) -> None:
        self.partitions = list(partitions)
        where = ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions)
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"no committed offset and no reset policy for: {where}")


class CommitFailedError(KafkaError):
    """A commit refused because the group rebalanced away this member's partitions."""


class IllegalStateError(RuntimeError):
    """A call the consumer's current state does not allow (our caller's mistake)."""
