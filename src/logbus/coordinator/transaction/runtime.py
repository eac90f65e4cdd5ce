"""The transaction coordinator's runtime (Kafka's `TransactionStateManager`): the
transactional ids of every `__transaction_state` partition this broker leads, loaded when
it becomes leader (the coordinator epoch is the partition's leader epoch) and dropped when
it stops; the writes of prepared transitions through the `PartitionWriter`.

Owned by the broker's event loop; not thread-safe. A transition is checked and prepared
synchronously (`TxnMetadata.prepare_*` sets its pending state), so two requests never
prepare on one id at once; `append_transit` then writes it and completes it once the
record is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from logbus.coordinator.group.runtime import CoordinatorError
from logbus.coordinator.partition_writer import PartitionWriteError, PartitionWriter
from logbus.coordinator.transaction.records import (
    InvalidTxnRecord,
    decode_record,
    txn_key,
    txn_value,
)
from logbus.coordinator.transaction.state import TxnMetadata, TxnState, TxnTransit
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for
from logbus.protocol import ErrorCode
from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import iter_record_set
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The broker settings the transaction coordinator follows."""

    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    write_timeout_ms: int = 30_000  # request.timeout.ms: the wait for replication
    load_buffer_bytes: int = LOAD_CHUNK_BYTES


@dataclass(slots=True)
class TxnShard:
    """The transactional ids of one `__transaction_state` partition led here."""

    partition: int
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
    loading: bool = True


class TxnStateManager:
    """One `TxnShard` per led `__transaction_state` partition."""

    def __init__(
        self,
        writer: PartitionWriter,
        config: TxnConfig,
        *,
        num_partitions: Callable[[], int],
        on_loaded: Callable[[TxnShard], None] = lambda shard: None,
    ) -> None:
        self.writer = writer
        self.config = config
        self.num_partitions = num_partitions
        self.on_loaded = on_loaded
        """Called once a shard is loaded (the coordinator completes the transactions
        found in PrepareCommit / PrepareAbort)."""
        self.shards: dict[int, TxnShard] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        self.shards.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- leadership -------------------------------------------------------------------------

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """LeaderAndIsr for `__transaction_state`-`partition`: load or unload its ids."""
        shard = self.shards.get(partition)
        if not is_leader:
            self.unload(partition)
            return
        if shard is not None and shard.coordinator_epoch == leader_epoch:
            return
        self.unload(partition)
        shard = self.shards[partition] = TxnShard(partition, leader_epoch)
        self.spawn(self._load(shard))

    def unload(self, partition: int) -> None:
        """Forget a partition's ids: requests for them now get NOT_COORDINATOR, and
        writes and marker sends in flight find their shard gone and stop."""
        self.shards.pop(partition, None)

    async def _load(self, shard: TxnShard) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, shard.partition)
        started = time.monotonic()
        loaded: dict[str, TxnTransit | None] = {}
        try:
            offset = self.writer.log_start_offset(tp)
            while self.shards.get(shard.partition) is shard:
                data = self.writer.read_for_load(tp, offset, self.config.load_buffer_bytes)
                if not data:
                    break
                for header, batch_records in iter_record_set(data, on_unreadable=_skip):
                    offset = header.last_offset + 1
                    if header.is_control:
                        continue
                    for record in batch_records:
                        if record.key is None:
                            continue
                        try:
                            rec = decode_record(record.key, record.value)
                        except InvalidTxnRecord as exc:
                            log.warning("skipped a %s record: %s", TRANSACTION_STATE_TOPIC, exc)
                            continue
                        loaded[rec.transactional_id] = rec.transit
                await asyncio.sleep(0)
        except PartitionWriteError as exc:
            log.warning("loading %s-%d stopped: %s", TRANSACTION_STATE_TOPIC, shard.partition, exc)
            if self.shards.get(shard.partition) is shard:
                self.unload(shard.partition)
            return
        if self.shards.get(shard.partition) is not shard:
            return
        for txn_id, transit in loaded.items():
            if transit is not None:
                shard.txns[txn_id] = TxnMetadata.from_transit(txn_id, transit)
        shard.loading = False
        log.info(
            "loaded %d transactional ids of %s-%d (coordinator epoch %d) in %.0f ms",
            len(shard.txns),
            TRANSACTION_STATE_TOPIC,
            shard.partition,
            shard.coordinator_epoch,
            (time.monotonic() - started) * 1000,
        )
        self.on_loaded(shard)

    # --- lookups ----------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return txn_partition_for(transactional_id, self.num_partitions())

    def shard_for(self, transactional_id: str) -> TxnShard:
        """The shard coordinating the id; CoordinatorError NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if shard.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def is_current(self, shard: TxnShard, txn: TxnMetadata) -> bool:
        """Whether `txn` is still this broker's metadata for its id, in that epoch."""
        current = self.shards.get(shard.partition)
        return (
            current is shard
            and current.coordinator_epoch == shard.coordinator_epoch
            and shard.txns.get(txn.transactional_id) is txn
        )

    # --- writes -----------------------------------------------------------------------------

    async def append_transit(
        self, shard: TxnShard, txn: TxnMetadata, transit: TxnTransit
    ) -> ErrorCode:
        """Write a prepared transition (a tombstone for Dead) and complete it once
        committed. Errors as Kafka's `appendTransactionToLog` maps them; after a failure
        the metadata is as before (its pending state cleared)."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, shard.partition)
        timestamp = now_ms()
        value = None if transit.state is TxnState.DEAD else txn_value(transit)
        batch = build_batch([NewRecord(txn_key(txn.transactional_id), value, (), timestamp)])
        error = ErrorCode.NONE
        try:
            last_offset = self.writer.append(tp, batch, timestamp)
            if not await self.writer.wait_committed(tp, last_offset, self.config.write_timeout_ms):
                error = ErrorCode.REQUEST_TIMED_OUT
        except PartitionWriteError as exc:
            error = exc.error
        if not self.is_current(shard, txn):
            return ErrorCode.NOT_COORDINATOR
        if error is not ErrorCode.NONE:
            log.warning(
                "writing %s of %s failed: %s", transit.state.label, txn.transactional_id, error.name
            )
            txn.abort_transition()
            return _append_error(error)
        txn.complete_transition(transit)
        return ErrorCode.NONE


def _append_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed `__transaction_state` append to the coordinator's
    answer."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
    ):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _skip(header: BatchHeader, error: InvalidBatch) -> None:
    log.warning(
        "skipped unreadable batch at offset %d of %s: %s",
        header.base_offset,
        TRANSACTION_STATE_TOPIC,
        error,
    )
