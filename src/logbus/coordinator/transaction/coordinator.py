"""The transaction coordinator (Kafka's `TransactionCoordinator`): InitProducerId with a
transactional id, AddPartitionsToTxn / AddOffsetsToTxn, EndTxn, the markers that end a
transaction in its partitions, the abort of transactions open past their timeout, the
expiration of idle transactional ids, and the views DescribeTransactions and
ListTransactions read.

Every method runs on the broker's event loop. Checks and `prepare_*` happen together
without an await in between, so a transactional id has at most one transition in flight;
other requests meanwhile get CONCURRENT_TRANSACTIONS, as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from logbus.coordinator.group.runtime import CoordinatorError
from logbus.coordinator.partition_writer import PartitionWriter
from logbus.coordinator.transaction.markers import MarkerSender, TxnMarkers
from logbus.coordinator.transaction.runtime import TxnConfig, TxnShard, TxnStateManager, now_ms
from logbus.coordinator.transaction.state import (
    EXPIRABLE,
    NO_PRODUCER_EPOCH,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

log = logging.getLogger(__name__)
S = TxnState
E = ErrorCode

COMPLETE_RETRY_BACKOFF_S = 0.1
COMPLETION_WAIT_S = 1.0
"""How long AddPartitionsToTxn / AddOffsetsToTxn for the next transaction waits for the
previous one's markers and Complete record before answering CONCURRENT_TRANSACTIONS."""


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TxnView:
    """One transactional id as DescribeTransactions / ListTransactions report it."""

    transactional_id: str
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_timestamp_ms: int
    partitions: frozenset[TopicPartition]


class TransactionCoordinator:
    def __init__(
        self,
        writer: PartitionWriter,
        config: TxnConfig,
        *,
        num_partitions: Callable[[], int],
        markers: MarkerSender,
        new_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        self.config = config
        self.markers = markers
        self.new_producer_id = new_producer_id
        self.manager = TxnStateManager(
            writer, config, num_partitions=num_partitions, on_loaded=self._complete_prepared
        )
        self._loops: list[asyncio.Task[None]] = []
        # ids whose markers and Complete record are being written: set once that ends
        self._completing: dict[str, asyncio.Event] = {}

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loops = [
            loop.create_task(
                self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out)
            ),
            loop.create_task(
                self._every(self.config.remove_expired_interval_ms, self.expire_transactional_ids)
            ),
        ]

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.manager.stop()
        for done in self._completing.values():  # held requests find their shard gone
            done.set()
        self._completing.clear()

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        self.manager.on_leadership(partition, is_leader, leader_epoch)

    def unload(self, partition: int) -> None:
        self.manager.unload(partition)

    def partition_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    @staticmethod
    async def _every(interval_ms: int, action: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                action()
            except Exception:
                log.exception("transaction coordinator task %s failed", action.__name__)

    # --- InitProducerId ---------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitResult:
        """InitProducerId with a transactional id (validated by the caller): the next epoch
        of the id's producer, fencing the previous one. `expected` is the (producer id,
        epoch) a v3+ client sends to recover (KIP-360)."""
        try:
            shard = self.manager.shard_for(transactional_id)
            if transactional_id not in shard.txns:
                producer_id = await self.new_producer_id()
                shard = self.manager.shard_for(transactional_id)
                shard.txns.setdefault(
                    transactional_id,
                    TxnMetadata.new(transactional_id, producer_id, timeout_ms, now_ms()),
                )
            txn = shard.txns[transactional_id]
            rotated_id: int | None = None
            while True:
                needs_rotation = (
                    not txn.pending
                    and txn.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and txn.epoch_exhausted
                    and (expected is None or expected[1] == txn.producer_epoch)
                )
                if not needs_rotation or rotated_id is not None:
                    break
                rotated_id = await self.new_producer_id()
                shard = self.manager.shard_for(transactional_id)
                if shard.txns.get(transactional_id) is not txn:
                    return InitResult(E.CONCURRENT_TRANSACTIONS)
            result = self._prepare_init(txn, timeout_ms, expected, rotated_id)
        except CoordinatorError as exc:
            return InitResult(exc.error)
        if isinstance(result, ErrorCode):
            return InitResult(result)
        if result.state is S.PREPARE_EPOCH_FENCE:
            # Abort the open transaction first; the client retries and then gets the
            # epoch after the fence (CONCURRENT_TRANSACTIONS until the abort completes).
            error = await self.end_txn(
                transactional_id,
                result.producer_id,
                result.producer_epoch,
                False,
                from_client=False,
            )
            return InitResult(E.CONCURRENT_TRANSACTIONS if error is E.NONE else error)
        error = await self.manager.append_transit(shard, txn, result)
        if error is not E.NONE:
            return InitResult(error)
        return InitResult(E.NONE, result.producer_id, result.producer_epoch)

    @staticmethod
    def _prepare_init(
        txn: TxnMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        rotated_id: int | None,
    ) -> TxnTransit | ErrorCode:
        if txn.pending:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.last_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return E.PRODUCER_FENCED
        if txn.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if txn.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if rotated_id is not None:
                return txn.prepare_producer_id_rotation(
                    rotated_id, timeout_ms, now_ms(), expected is not None
                )
            transit = txn.prepare_increment_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms()
            )
            return E.PRODUCER_FENCED if transit is None else transit
        if txn.state is S.ONGOING:
            return txn.prepare_fence_epoch()
        return E.UNKNOWN_SERVER_ERROR  # Dead, PrepareEpochFence: never stored as a state

    # --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    def _checked(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[TxnShard, TxnMetadata]:
        shard = self.manager.shard_for(transactional_id)
        txn = shard.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            raise CoordinatorError(E.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != epoch:
            raise CoordinatorError(E.PRODUCER_FENCED)
        return shard, txn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> ErrorCode:
        deadline: float | None = None
        while True:
            try:
                shard, txn = self._checked(transactional_id, producer_id, epoch)
            except CoordinatorError as exc:
                return exc.error
            if not (txn.pending or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
                break
            # The previous transaction is ending: Kafka answers CONCURRENT_TRANSACTIONS
            # and the client asks again after a backoff (20 ms for Kafka's clients, far
            # longer than the markers take). The answer waits instead, a little, for its
            # Complete record, so the next transaction starts as soon as Kafka would let
            # it; the checks are made again then.
            done = self._completing.get(transactional_id)
            if done is None:
                return E.CONCURRENT_TRANSACTIONS
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + COMPLETION_WAIT_S
            try:
                async with asyncio.timeout_at(deadline):
                    await done.wait()
            except TimeoutError:
                return E.CONCURRENT_TRANSACTIONS
        if txn.state is S.ONGOING and partitions <= txn.partitions:
            return E.NONE
        transit = txn.prepare_add_partitions(partitions, now_ms())
        return await self.manager.append_transit(shard, txn, transit)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ `verify_only`: whether each partition is in the ongoing
        transaction (INVALID_TXN_STATE when it is not)."""
        try:
            _shard, txn = self._checked(transactional_id, producer_id, epoch)
        except CoordinatorError as exc:
            return dict.fromkeys(partitions, exc.error)
        return {
            tp: E.NONE if txn.state is S.ONGOING and tp in txn.partitions else E.INVALID_TXN_STATE
            for tp in partitions
        }

    # --- EndTxn -----------------------------------------------------------------------------

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        committed: bool,
        *,
        from_client: bool = True,
    ) -> ErrorCode:
        """Commit or abort: PrepareCommit / PrepareAbort written (the answer), then the
        markers sent and CompleteCommit / CompleteAbort written in the background."""
        try:
            shard = self.manager.shard_for(transactional_id)
        except CoordinatorError as exc:
            return exc.error
        txn = shard.txns.get(transactional_id)
        prepared = self._prepare_end(txn, producer_id, epoch, committed, from_client)
        if isinstance(prepared, ErrorCode):
            if txn is not None and txn.pending_state is S.PREPARE_EPOCH_FENCE and not from_client:
                txn.abort_transition()
            return prepared
        assert txn is not None
        transit, is_fence = prepared
        error = await self.manager.append_transit(shard, txn, transit)
        if error is not E.NONE:
            if is_fence and self.manager.is_current(shard, txn):
                txn.has_failed_epoch_fence = True
            return error
        if not self.manager.is_current(shard, txn):
            return E.NOT_COORDINATOR
        if txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        if txn.pending:
            return E.CONCURRENT_TRANSACTIONS
        wanted = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if txn.state is not wanted:
            return E.INVALID_TXN_STATE
        self._send_markers(shard, txn, txn.prepare_complete(now_ms()))
        return E.NONE

    @staticmethod
    def _prepare_end(
        txn: TxnMetadata | None, producer_id: int, epoch: int, committed: bool, from_client: bool
    ) -> tuple[TxnTransit, bool] | ErrorCode:
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if (from_client and epoch != txn.producer_epoch) or epoch < txn.producer_epoch:
            return E.PRODUCER_FENCED
        if txn.pending and (from_client or txn.pending_state is not S.PREPARE_EPOCH_FENCE):
            return E.CONCURRENT_TRANSACTIONS  # only the coordinator's abort ends a fence
        state = txn.state
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            is_fence = False
            if next_state is S.PREPARE_ABORT and txn.pending_state is S.PREPARE_EPOCH_FENCE:
                txn.apply_epoch_fence(epoch)
                is_fence = True
            return txn.prepare_abort_or_commit(next_state, now_ms()), is_fence
        if state is S.COMPLETE_COMMIT:
            return E.NONE if committed else E.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return E.NONE if not committed else E.INVALID_TXN_STATE
        if state is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if committed else E.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not committed else E.INVALID_TXN_STATE
        return E.INVALID_TXN_STATE  # Empty (Dead and PrepareEpochFence are never stored)

    # --- markers ----------------------------------------------------------------------------

    def _send_markers(self, shard: TxnShard, txn: TxnMetadata, complete: TxnTransit) -> None:
        markers = TxnMarkers(
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            coordinator_epoch=shard.coordinator_epoch,
            committed=complete.state is S.COMPLETE_COMMIT,
            partitions=frozenset(txn.partitions),
        )
        done = self._completing[txn.transactional_id] = asyncio.Event()
        self.manager.spawn(self._complete(shard, txn, markers, complete, done))

    async def _complete(
        self,
        shard: TxnShard,
        txn: TxnMetadata,
        markers: TxnMarkers,
        complete: TxnTransit,
        done: asyncio.Event,
    ) -> None:
        try:
            await self._write_markers_then_complete(shard, txn, markers, complete)
        finally:
            done.set()
            if self._completing.get(txn.transactional_id) is done:
                del self._completing[txn.transactional_id]

    async def _write_markers_then_complete(
        self, shard: TxnShard, txn: TxnMetadata, markers: TxnMarkers, complete: TxnTransit
    ) -> None:
        if markers.partitions:
            error = await self.markers.write_markers(
                markers, lambda: self.manager.is_current(shard, txn)
            )
            if error is not E.NONE:
                log.warning(
                    "markers of %s not written (%s): left to the next coordinator",
                    txn.transactional_id,
                    error.name,
                )
                return
        while True:
            error = await self.manager.append_transit(shard, txn, complete)
            if error is not E.COORDINATOR_NOT_AVAILABLE:
                break
            await asyncio.sleep(COMPLETE_RETRY_BACKOFF_S)
            if not self.manager.is_current(shard, txn):
                return
            complete = txn.prepare_complete(now_ms())
        if error is not E.NONE:
            log.warning(
                "%s of %s not written: %s", complete.state.label, txn.transactional_id, error.name
            )

    def _complete_prepared(self, shard: TxnShard) -> None:
        """After a load: transactions found in PrepareCommit / PrepareAbort get their
        markers (again) and their Complete record."""
        for txn in list(shard.txns.values()):
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and not txn.pending:
                self._send_markers(shard, txn, txn.prepare_complete(now_ms()))

    # --- timers -----------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """Abort every ongoing transaction open longer than its timeout, fencing its
        producer (its epoch is bumped)."""
        now = now_ms()
        for shard in list(self.manager.shards.values()):
            if shard.loading:
                continue
            for txn in list(shard.txns.values()):
                if (
                    txn.state is S.ONGOING
                    and not txn.pending
                    and txn.start_timestamp_ms + txn.timeout_ms < now
                ):
                    try:
                        fence = txn.prepare_fence_epoch()
                    except IllegalTransition:  # the last epoch: nothing left to fence with
                        log.error(
                            "cannot abort timed-out %s at epoch %d",
                            txn.transactional_id,
                            txn.producer_epoch,
                        )
                        continue
                    log.info(
                        "aborting %s: open longer than %d ms", txn.transactional_id, txn.timeout_ms
                    )
                    self.manager.spawn(self._end_quietly(txn, fence))

    async def _end_quietly(self, txn: TxnMetadata, fence: TxnTransit) -> None:
        error = await self.end_txn(
            txn.transactional_id, fence.producer_id, fence.producer_epoch, False, from_client=False
        )
        if error is not E.NONE:
            log.warning("abort of timed-out %s failed: %s", txn.transactional_id, error.name)

    def expire_transactional_ids(self) -> None:
        """Remove ids idle for transactional.id.expiration.ms (a tombstone each)."""
        now = now_ms()
        for shard in list(self.manager.shards.values()):
            if shard.loading:
                continue
            for txn in list(shard.txns.values()):
                if (
                    txn.state in EXPIRABLE
                    and not txn.pending
                    and txn.last_update_timestamp_ms + self.config.id_expiration_ms <= now
                ):
                    self.manager.spawn(self._expire(shard, txn, txn.prepare_dead()))

    async def _expire(self, shard: TxnShard, txn: TxnMetadata, dead: TxnTransit) -> None:
        written = await self.manager.append_transit(shard, txn, dead)
        if written is E.NONE and shard.txns.get(txn.transactional_id) is txn:
            del shard.txns[txn.transactional_id]

    # --- views ------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnView:
        """Raises CoordinatorError: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        TRANSACTIONAL_ID_NOT_FOUND."""
        shard = self.manager.shard_for(transactional_id)
        txn = shard.txns.get(transactional_id)
        if txn is None or txn.state is S.DEAD:
            raise CoordinatorError(E.TRANSACTIONAL_ID_NOT_FOUND)
        return _view(txn)

    def list_transactions(
        self, states: frozenset[TxnState] | None, producer_ids: frozenset[int], min_duration_ms: int
    ) -> list[TxnView]:
        """Every id coordinated here, filtered; COORDINATOR_LOAD_IN_PROGRESS while a
        partition loads."""
        if any(s.loading for s in self.manager.shards.values()):
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        now = now_ms()
        views = []
        for shard in list(self.manager.shards.values()):
            for txn in shard.txns.values():
                if txn.state is S.DEAD:
                    continue
                if states is not None and txn.state not in states:
                    continue
                if producer_ids and txn.producer_id not in producer_ids:
                    continue
                # Kafka's filter: running for longer than it since its start time
                if min_duration_ms >= 0 and now - txn.start_timestamp_ms <= min_duration_ms:
                    continue
                views.append(_view(txn))
        return views


def _view(txn: TxnMetadata) -> TxnView:
    return TxnView(
        txn.transactional_id,
        txn.state,
        txn.producer_id,
        txn.producer_epoch,
        txn.timeout_ms,
        txn.start_timestamp_ms,
        frozenset(txn.partitions),
    )
