"""The replica manager: owns the partitions this broker hosts, applies the controller's
LeaderAndIsr and StopReplica decisions, appends produced batches as leader, and reads for
fetches, parking requests in the purgatory until they can complete.

Owned by the broker's event loop thread; not safe to share between threads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from logbus.controller.cluster_metadata import TopicMetadata
from logbus.protocol import ErrorCode
from logbus.server.purgatory import Purgatory
from logbus.server.replica.partition import AppendResult, Partition, PartitionError
from logbus.storage.errors import OffsetOutOfRangeError, StorageError
from logbus.storage.file_slice import FileSlice
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager
from logbus.types import TopicPartition

# A request's partitions are appended one after another; whenever they have held the event
# loop this long it serves other connections before the next one, so a request full of
# costly batches (a zstd batch of 1.3 KB that decompresses past its bound costs ~13 ms:
# 2,000 of them held every client for 22 s) delays only its own answer.
APPEND_TURN_S = 0.005


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    # (index of the record in its batch, message) for INVALID_RECORD (Produce v8+).
    record_errors: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[TopicMetadata], LogConfig],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        self.purgatory = Purgatory()

    # --- controller decisions -------------------------------------------------------------

    def apply_leader_and_isr(self, topic: TopicMetadata, partitions: list[int]) -> None:
        config = self.log_config_for(topic)
        for p in partitions:
            state = topic.partitions[p]
            part = self.partitions.get(TopicPartition(topic.name, p))
            if part is None:
                log = self.log_manager.get_or_create_log(topic.name, p, config, topic.topic_id)
                part = Partition(topic.name, p, topic.topic_id, log, self.broker_id)
                self.partitions[TopicPartition(topic.name, p)] = part
            if state.leader == self.broker_id:
                part.make_leader(state.leader_epoch, state.isr, state.replicas)
            else:
                part.make_follower(state.leader, state.leader_epoch, state.isr, state.replicas)
            self.purgatory.notify((topic.name, p))

    def apply_stop_replica(self, topic: str, partitions: list[int], delete: bool) -> None:
        for p in partitions:
            self.partitions.pop(TopicPartition(topic, p), None)
            self.purgatory.notify((topic, p))
        if delete:
            # Also logs that never got their partition started (their creation failed).
            self.log_manager.delete_logs(topic, partitions)

    def update_log_config(self, topic: TopicMetadata) -> None:
        config = self.log_config_for(topic)
        for (name, _p), part in self.partitions.items():
            if name == topic.name:
                part.log.config = config

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get(TopicPartition(topic, index))

    # --- produce --------------------------------------------------------------------------

    async def append_records(
        self,
        acks: int,
        timeout_ms: int,
        entries: list[tuple[str, int, memoryview | None]],
        known_partition: Callable[[str, int], bool],
    ) -> list[ProduceResult]:
        """Append each partition's batches as leader; for acks=all wait until the high
        watermark passes them (or the timeout fires: REQUEST_TIMED_OUT)."""
        now_ms = int(time.time() * 1000)
        results: list[ProduceResult] = []
        waiting: list[tuple[int, Partition, AppendResult]] = []
        turn_start = time.monotonic()
        for topic, index, records in entries:
            if time.monotonic() - turn_start > APPEND_TURN_S:
                await asyncio.sleep(0)
                turn_start = time.monotonic()
            part = self.partitions.get(TopicPartition(topic, index))
            if part is None:
                results.append(
                    ProduceResult(
                        ErrorCode.NOT_LEADER_OR_FOLLOWER
                        if known_partition(topic, index)
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                )
                continue
            if records is None:
                results.append(ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="null record set"))
                continue
            try:
                appended = part.append_as_leader(records, acks, now_ms)
            except PartitionError as exc:
                results.append(ProduceResult(exc.error, message=str(exc)))
                continue
            except StorageError as exc:
                results.append(
                    ProduceResult(
                        ErrorCode(exc.error_code),
                        message=str(exc),
                        log_start_offset=part.log.log_start_offset,
                        record_errors=getattr(exc, "record_errors", []),
                    )
                )
                continue
            self.purgatory.notify((topic, index))
            results.append(
                ProduceResult(
                    ErrorCode.NONE,
                    appended.base_offset,
                    appended.log_append_time,
                    appended.log_start_offset,
                )
            )
            if acks == -1:
                waiting.append((len(results) - 1, part, appended))
        if waiting:

            def replicated() -> bool:
                return all(p.high_watermark > a.last_offset for _i, p, a in waiting)

            if not await self.purgatory.wait_until(
                replicated, [(p.topic, p.index) for _i, p, _a in waiting], timeout_ms
            ):
                for i, part, appended in waiting:
                    if part.high_watermark <= appended.last_offset:
                        results[i] = ProduceResult(ErrorCode.REQUEST_TIMED_OUT)
        return results

    # --- fetch ----------------------------------------------------------------------------

    def read(
        self,
        request: FetchRequestPartition,
        max_bytes: int,
        min_one_message: bool,
        read_committed: bool,
    ) -> FetchResult:
        part = self.partitions.get(TopicPartition(request.topic, request.partition))
        if part is None:
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            part.ensure_leader()
            part.check_leader_epoch(request.current_leader_epoch)
        except PartitionError as exc:
            return FetchResult(exc.error)
        log = part.log
        high_watermark = part.high_watermark
        # No transactions yet: the last stable offset is the high watermark.
        last_stable = high_watermark
        bound = last_stable if read_committed else high_watermark
        try:
            info = log.read(
                request.fetch_offset,
                min(max_bytes, request.max_bytes),
                max_offset=bound,
                min_one_message=min_one_message,
            )
        except OffsetOutOfRangeError:
            return FetchResult(
                ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, last_stable, log.log_start_offset
            )
        except StorageError as exc:
            return FetchResult(
                ErrorCode(exc.error_code), high_watermark, last_stable, log.log_start_offset
            )
        return FetchResult(
            ErrorCode.NONE, high_watermark, last_stable, log.log_start_offset, info.records
        )

    def read_all(
        self, requests: list[FetchRequestPartition], max_bytes: int, read_committed: bool
    ) -> list[FetchResult]:
        """Read each partition within the response limit; the first non-empty partition
        may exceed the limits by one batch so that consumers always progress (KIP-74)."""
        results = []
        remaining = max_bytes
        first = True
        for request in requests:
            result = self.read(request, max(0, remaining), first, read_committed)
            if result.size:
                first = False
                remaining -= result.size
            results.append(result)
        return results

    async def fetch(
        self,
        requests: list[FetchRequestPartition],
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        read_committed: bool,
    ) -> list[FetchResult]:
        """Read now; if fewer than `min_bytes` are available and nothing failed, wait for
        appends to the requested partitions until `max_wait_ms` passes."""
        results = self.read_all(requests, max_bytes, read_committed)

        def satisfied() -> bool:
            nonlocal results
            results = self.read_all(requests, max_bytes, read_committed)
            return sum(r.size for r in results) >= min_bytes or any(
                r.error != ErrorCode.NONE for r in results
            )

        if (
            max_wait_ms > 0
            and sum(r.size for r in results) < min_bytes
            and not any(r.error != ErrorCode.NONE for r in results)
            and requests
        ):
            await self.purgatory.wait_until(
                satisfied,
                [(r.topic, r.partition) for r in requests],
                max_wait_ms,
                known_unmet=True,
            )
        return results
