"""The coordinators' `PartitionWriter` over this broker's replica manager (Kafka's
`CoordinatorPartitionWriter`): appends as leader, wakes fetches and producers waiting on
the partition, reads batches to the log end for a load, waits for the high watermark."""

from __future__ import annotations

from logbus.coordinator.partition_writer import PartitionWriteError
from logbus.protocol import ErrorCode
from logbus.server.replica.partition import Partition, PartitionError
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.storage.errors import StorageError
from logbus.types import TopicPartition


class CoordinatorPartitionWriter:
    """Implements `logbus.coordinator.partition_writer.PartitionWriter`."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def _partition(self, tp: TopicPartition) -> Partition:
        part = self.replica_manager.partition(tp.topic, tp.partition)
        if part is None:
            raise PartitionWriteError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp} is not hosted here")
        return part

    def append(self, tp: TopicPartition, batch: bytes, timestamp_ms: int) -> int:
        part = self._partition(tp)
        if not part.is_leader:
            raise PartitionWriteError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{tp} is led elsewhere")
        try:
            # the coordinator's origin (Kafka's AppendOrigin.COORDINATOR): no client
            # sequence or timestamp checks, e.g. for a TxnOffsetCommit's batch
            appended = part.append_as_leader(
                memoryview(batch), -1, timestamp_ms, from_client=False
            )
        except PartitionError as exc:
            raise PartitionWriteError(exc.error, str(exc)) from exc
        except StorageError as exc:
            # the log's own code (MESSAGE_TOO_LARGE for a commit past max.message.bytes);
            # a failure without one is the disk's
            code = exc.error_code if exc.error_code >= 0 else ErrorCode.KAFKA_STORAGE_ERROR
            raise PartitionWriteError(ErrorCode(code), str(exc)) from exc
        self.replica_manager.purgatory.notify(tp)
        return appended.last_offset

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self._partition(tp).log.log_start_offset

    def read_for_load(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        part = self._partition(tp)
        log_end = part.log.log_end_offset
        if offset >= log_end:
            return b""
        info = part.log.read(offset, max_bytes, max_offset=log_end, min_one_message=True)
        if info.records is None or info.records.size == 0:
            return b""
        return info.records.read()

    async def wait_committed(self, tp: TopicPartition, offset: int, timeout_ms: int) -> bool:
        part = self._partition(tp)

        def committed() -> bool:
            return part.high_watermark > offset

        if committed():
            return True
        return await self.replica_manager.purgatory.wait_until(committed, [tp], timeout_ms)
