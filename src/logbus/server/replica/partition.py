"""One partition hosted by this broker: its log, its leadership state (leader epoch, ISR)
and its high watermark.

A single broker is a cluster of size one: the ISR is the leader alone and the high
watermark follows the log end offset at every append. Owned by the event loop thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from logbus.protocol import ErrorCode
from logbus.storage.errors import OffsetOutOfRangeError
from logbus.storage.log import Log

HIGH_WATERMARK = -1  # DeleteRecords: delete everything below the high watermark


class PartitionError(Exception):
    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int


class Partition:
    def __init__(self, topic: str, index: int, topic_id: UUID, log: Log, broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def make_leader(
        self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...]
    ) -> None:
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas
        self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        self._maybe_advance_high_watermark()

    def make_follower(
        self, leader_id: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...]
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.replicas = replicas

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's fencing of clients with a stale or future view of leadership (KIP-320)."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def ensure_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def append_as_leader(
        self, records: memoryview, required_acks: int, now_ms: int
    ) -> AppendResult:
        self.ensure_leader()
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.index}",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms=now_ms)
        self._maybe_advance_high_watermark()
        return AppendResult(
            info.first_offset, info.last_offset, info.log_append_time, self.log.log_start_offset
        )

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (HIGH_WATERMARK: the high
        watermark); returns the new low watermark. The segments wholly below it go at the
        next retention check."""
        self.ensure_leader()
        log = self.log
        name = f"{self.topic}-{self.index}"
        if not log.config.delete:
            raise PartitionError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {name} can not be deleted due to the configured policy",
            )
        target = self.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"The offset {target} for partition {name} is not valid",
            )
        try:
            log.maybe_increment_log_start_offset(target)
        except OffsetOutOfRangeError as exc:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE, str(exc)) from exc
        return log.log_start_offset

    def _maybe_advance_high_watermark(self) -> None:
        # The ISR is this broker alone until replication arrives: everything appended is
        # replicated to the whole ISR.
        if self.isr == (self.broker_id,) or not self.isr:
            self.log.high_watermark = self.log.log_end_offset
