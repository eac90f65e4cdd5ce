"""What a coordinator runtime needs from the log of its internal topic's partitions (the
shape of Kafka's coordinator runtime `PartitionWriter`, plus the reads its loader does).

The coordinators never touch the replica manager or the storage layer: the broker hands
their runtime an implementation (`logbus.server.coordinator_partition_writer`), so a
coordinator can be driven by anything that appends and reads record batches.
"""

from __future__ import annotations

from typing import Protocol

from logbus.protocol import ErrorCode
from logbus.types import TopicPartition


class PartitionWriteError(Exception):
    """An append, read or wait the partition could not serve, with the Kafka error the log
    reported (NOT_LEADER_OR_FOLLOWER when this broker does not lead the partition,
    KAFKA_STORAGE_ERROR for a failed disk, ...). The runtime maps it to its answer."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


class PartitionWriter(Protocol):
    """Appends to and reads from the partitions this broker leads. Every method raises
    `PartitionWriteError` when the partition is not led here (or the log fails)."""

    def append(self, tp: TopicPartition, batch: bytes, timestamp_ms: int) -> int:
        """Append one record batch as the partition's leader; the offset of its last
        record."""
        ...

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The first offset a load reads from."""
        ...

    def read_to_log_end(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        """Whole record batches from `offset` up to the log end (at least one batch when
        there is one, even past `max_bytes`); b"" at the log end. A load reads the leader's
        whole log, as Kafka's does: a new leader's high watermark can lag what the
        previous leader acknowledged, and those records are committed all the same once
        its followers fetch them."""
        ...

    async def wait_committed(self, tp: TopicPartition, offset: int, timeout_ms: int) -> bool:
        """Wait until the record at `offset` is committed (the high watermark passed it);
        False when `timeout_ms` ran out first."""
        ...
