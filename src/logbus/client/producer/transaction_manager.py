"""The transactional producer's state (Kafka's TransactionManager, KIP-98).

A producer with `transactional.id` gets its producer id and epoch from its transaction
coordinator (`initialize`, fencing any earlier producer with the same id), then runs
transactions: `begin` (local), sends (the sender asks `send_allowed` before draining a
partition; a partition new to the transaction is first added with AddPartitionsToTxn, a
few at a time), `send_offsets` (AddOffsetsToTxn, then TxnOffsetCommit to the group's
coordinator), `commit` (everything flushed, then EndTxn commit) or `abort` (unsent
batches dropped, what is in flight waited for, then EndTxn abort).

Errors sort as Kafka's do: fenced and authorization errors are fatal (every later call
raises them; only close is left); a failed send or offset commit makes the transaction
abortable (commit raises, abort is allowed and starts the next one clean, with a bumped
epoch when the broker lost the producer's sequence, KIP-360); CONCURRENT_TRANSACTIONS,
COORDINATOR_LOAD_IN_PROGRESS and lost connections are retried with a backoff,
NOT_COORDINATOR finds the coordinator again.

Everything here runs on the producer's event loop; the sender calls `send_allowed` and
`batch_failed` with the accumulator's lock held, so those do no I/O.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.coordinator_lookup import coordinator, coordinator_id
from logbus.client.errors import (
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
)
from logbus.client.requests.find_coordinator import TRANSACTION_KEY
from logbus.client.requests.group_membership import MemberIdentity
from logbus.client.requests.producer_id import NO_PRODUCER, ProducerIdAndEpoch
from logbus.client.requests.transactions import (
    TxnOffset,
    add_offsets_to_txn,
    add_partitions_to_txn,
    end_txn,
    init_transactional_id,
    txn_offset_commit,
)
from logbus.client.types import ConsumerGroupMetadata, TopicPartition
from logbus.protocol import ErrorCode

if TYPE_CHECKING:
    from logbus.client.producer.sender import Sender

log = logging.getLogger(__name__)
T = TypeVar("T")


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


# Coordinator errors after which the same request goes again after a backoff.
_RETRY = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.OPERATION_NOT_ATTEMPTED,
    }
)
# ... and after which the coordinator is looked up again first.
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_FATAL = frozenset(
    {
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
    }
)
# Errors that mean the broker no longer knows the producer's sequence: abortable, and
# the abort bumps the epoch (KIP-360).
_NEEDS_BUMP = frozenset(
    {
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    }
)
_CONCURRENT_BACKOFF_MAX = 0.02
_GROUP_FENCED = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}
)


class TransactionManager:
    """One transactional producer's transaction state; see the module docstring."""

    def __init__(
        self,
        transactional_id: str,
        timeout_ms: int,
        cluster: Cluster,
        *,
        retry_backoff: float,
        retry_backoff_max: float,
        delivery_timeout: float,
    ) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.cluster = cluster
        self.sender: Sender | None = None
        self.state = TxnState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.partitions: set[TopicPartition] = set()  # added to the current transaction
        self.pending: set[TopicPartition] = set()  # to add before their batches go
        self.started = False  # the coordinator knows of the transaction (partitions, offsets)
        self.bump_required = False
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._delivery_timeout = delivery_timeout
        self._coordinator: int | None = None
        self._adding: asyncio.Task[None] | None = None

    @property
    def producer(self) -> ProducerIdAndEpoch:
        return NO_PRODUCER if self.sender is None else self.sender.producer

    # --- checks before local operations -----------------------------------------------

    def error_for(self, what: str) -> KafkaError:
        """The error a method called now (`what` it does) raises."""
        if self.state is TxnState.FATAL_ERROR and self.last_error is not None:
            return self.last_error
        if self.state is TxnState.ABORTABLE_ERROR and self.last_error is not None:
            return TransactionAbortableError(
                self.last_error.code,
                f"cannot {what}: the transaction failed and must be aborted "
                f"({self.last_error})",
            )
        if self.state is TxnState.UNINITIALIZED:
            return InvalidTxnStateError(f"cannot {what} before init_transactions()")
        return InvalidTxnStateError(f"cannot {what} in state {self.state.value}")

    def check_send(self) -> None:
        """Records may be sent only inside a transaction."""
        if self.state is not TxnState.IN_TRANSACTION:
            raise self.error_for("send")

    def begin(self) -> None:
        if self.state is not TxnState.READY:
            raise self.error_for("begin a transaction")
        self.state = TxnState.IN_TRANSACTION

    # --- the sender's hooks (accumulator lock held; no I/O) ---------------------------

    def send_allowed(self, tp: TopicPartition) -> bool:
        """May a batch of `tp` go now? A partition not yet in the transaction is queued to
        be added (`maybe_add_partitions` starts that)."""
        if tp in self.partitions:
            return True
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.pending.add(tp)
        return False

    def records_appended(self, tps: Iterable[TopicPartition]) -> None:
        """Records of `tps` were buffered (on the event loop): the partitions new to the
        transaction are added now, as the Java producer adds a partition when a record
        for it is appended, not once its batch is ready to go; partitions appended
        before the AddPartitionsToTxn request leaves share it."""
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            return
        new = [tp for tp in tps if tp not in self.partitions]
        if new:
            self.pending.update(new)
            self.maybe_add_partitions()

    def partition_buffered(self, tp: TopicPartition) -> bool:
        """Records of `tp` are about to be buffered (on the event loop): a partition new
        to the transaction is queued to be added, as the Java producer adds a partition
        on its first append. Returns whether an AddPartitionsToTxn was started for it
        (none was in flight): the caller then yields once before encoding the records,
        so that the request leaves first and its round trip overlaps the encoding
        instead of holding the batch after it. Partitions queued while a request is in
        flight go together in the next one."""
        if tp in self.partitions or tp in self.pending or self.state not in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
        ):
            return False
        self.pending.add(tp)
        if self._adding is not None:
            return False
        self.maybe_add_partitions()
        return True

    def maybe_add_partitions(self) -> None:
        """Start adding the partitions waiting to be added, unless that is under way."""
        if self.pending and self._adding is None and self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
        ):
            self._adding = asyncio.get_running_loop().create_task(
                self._add_partitions(), name="logbus-add-partitions-to-txn"
            )

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction can only be
        aborted (or, fenced, the producer is done)."""
        if isinstance(error, TransactionAbortedError):
            return
        if not isinstance(error, KafkaError):
            error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
        if error.code == ErrorCode.INVALID_PRODUCER_EPOCH:
            # A partition leader's answer, not the coordinator's (KIP-588): the coordinator
            # bumped the epoch when it aborted a timed-out transaction. Abortable; the
            # abort then bumps the epoch again, after which the producer goes on.
            self.bump_required = True
            self._abortable(error)
            return
        self.fail(error)

    # --- errors ----------------------------------------------------------------------

    def fail(self, error: KafkaError) -> KafkaError:
        """Record `error` as Kafka sorts it (fatal or abortable); the error to raise."""
        code = error.code
        if code in _FENCED or isinstance(error, ProducerFencedError):
            fatal: KafkaError = (
                error
                if isinstance(error, ProducerFencedError)
                else ProducerFencedError(
                    f"producer id {self.producer.producer_id} epoch {self.producer.epoch} "
                    f"of transactional id '{self.transactional_id}' was fenced "
                    f"by a newer producer ({error})",
                    code,
                )
            )
            return self._fatal(fatal)
        if code in _FATAL:
            return self._fatal(error)
        if code in _NEEDS_BUMP:
            self.bump_required = True
        return self._abortable(error)

    def _abortable(self, error: KafkaError) -> KafkaError:
        if self.state in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTABLE_ERROR,
        ):
            if self.state is not TxnState.ABORTABLE_ERROR:
                log.info("transaction of '%s' failed: %s", self.transactional_id, error)
                self.last_error = error
            self.state = TxnState.ABORTABLE_ERROR
            if isinstance(error, TransactionAbortableError):
                return error
            return TransactionAbortableError(
                error.code, f"the transaction failed and must be aborted: {error}"
            )
        return error

    def _fatal(self, error: KafkaError) -> KafkaError:
        if self.state is not TxnState.FATAL_ERROR:
            log.warning("transactional producer '%s': %s", self.transactional_id, error)
            self.state = TxnState.FATAL_ERROR
            self.last_error = error
        return self.last_error or error

    # --- requests to the coordinators --------------------------------------------------

    async def _call(
        self,
        request: Callable[[Connection], Awaitable[T]],
        deadline: float,
        what: str,
    ) -> T:
        """`request` on the transaction coordinator, again (after a backoff) while it
        answers a retriable error or the connection breaks, until `deadline`."""
        attempt = 0
        while True:
            try:
                conn = await self._coordinator_connection(deadline)
                return await request(conn)
            except KafkaError as exc:
                if exc.code in _REDISCOVER or isinstance(exc, KafkaConnectionError):
                    self._coordinator = None
                elif exc.code not in _RETRY:
                    raise
                last = exc
            attempt += 1
            delay = min(self._retry_backoff * 2 ** min(attempt - 1, 10), self._retry_backoff_max)
            if time.monotonic() + delay > deadline:
                raise KafkaTimeoutError(f"{what} did not complete in time (last error: {last})")
            await asyncio.sleep(delay)

    async def _coordinator_connection(self, deadline: float) -> Connection:
        if self._coordinator is None:
            self._coordinator = await coordinator_id(
                self.cluster,
                self.transactional_id,
                wait=max(deadline - time.monotonic(), 0.0),
                key_type=TRANSACTION_KEY,
            )
        md = self.cluster.metadata
        if md is None or self._coordinator not in md.brokers:
            await self.cluster.refresh([])
        return await self.cluster.node(self._coordinator)

    # --- the user's operations ---------------------------------------------------------

    async def initialize(self, seconds: float) -> None:
        """InitProducerId for the transactional id (KIP-98): this producer's id and epoch;
        an earlier producer with the same id is fenced, and its open transaction
        aborted by the coordinator. Called again after a timeout, it carries on."""
        if self.state not in (TxnState.UNINITIALIZED, TxnState.INITIALIZING):
            raise self.error_for("initialize transactions again")
        self.state = TxnState.INITIALIZING
        await self._init_producer_id(NO_PRODUCER, time.monotonic() + seconds)
        self.state = TxnState.READY

    async def _init_producer_id(self, current: ProducerIdAndEpoch, deadline: float) -> None:
        txn_id, timeout_ms = self.transactional_id, self.timeout_ms
        try:
            producer = await self._call(
                lambda conn: init_transactional_id(conn, txn_id, timeout_ms, current),
                deadline,
                "InitProducerId",
            )
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            raise self._fatal(
                ProducerFencedError(str(exc), exc.code) if exc.code in _FENCED else exc
            ) from None
        assert self.sender is not None
        self.sender.reset_producer(producer)
        self.bump_required = False
        log.info(
            "transactional id '%s': producer id %d epoch %d",
            txn_id,
            producer.producer_id,
            producer.epoch,
        )

    async def _add_partitions(self) -> None:
        deadline = time.monotonic() + self._delivery_timeout
        txn_id = self.transactional_id
        attempt = 0
        try:
            while self.pending and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
                request = functools.partial(
                    _add_partitions_request, txn_id, self.producer, sorted(self.pending)
                )
                results = await self._call(request, deadline, "AddPartitionsToTxn")
                retry: KafkaError | None = None
                for tp, error in results.items():
                    if error is None:
                        self.partitions.add(tp)
                        self.pending.discard(tp)
                        self.started = True
                    elif error.code in _RETRY or error.code in _REDISCOVER:
                        if error.code in _REDISCOVER:
                            self._coordinator = None
                        retry = error
                    else:
                        self.fail(error)
                        return
                if self.sender is not None:
                    # The batches of the partitions added go now, not once the ones
                    # queued meanwhile are added too.
                    self.sender.wakeup()
                if retry is None:
                    attempt = 0
                    continue
                # The previous transaction's markers are still being written: ask again
                # soon (Kafka's client waits 20 ms; this starts at 1 ms and doubles up to
                # that, so short transactions do not wait longer than the markers take).
                delay = (
                    min(0.001 * 2**attempt, _CONCURRENT_BACKOFF_MAX, self._retry_backoff)
                    if retry.code == ErrorCode.CONCURRENT_TRANSACTIONS
                    else self._retry_backoff
                )
                attempt += 1
                if time.monotonic() + delay > deadline:
                    self.fail(KafkaTimeoutError(f"AddPartitionsToTxn: {retry}"))
                    return
                await asyncio.sleep(delay)
        except KafkaError as exc:
            self.fail(exc)
        finally:
            self._adding = None
            if self.sender is not None:
                self.sender.wakeup()

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, TxnOffset],
        group: ConsumerGroupMetadata,
        seconds: float,
    ) -> None:
        """The consumer's offsets, committed if and only if the transaction commits:
        AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to the
        group's coordinator (fenced there if the member left its generation)."""
        if self.state is not TxnState.IN_TRANSACTION:
            raise self.error_for("send offsets to the transaction")
        if not offsets:
            return  # nothing to commit: the coordinators are not asked (as Kafka's client)
        deadline = time.monotonic() + seconds
        txn_id, producer = self.transactional_id, self.producer
        try:
            await self._call(
                lambda conn: add_offsets_to_txn(conn, txn_id, producer, group.group_id),
                deadline,
                "AddOffsetsToTxn",
            )
            self.started = True
            await self._commit_offsets(offsets, group, deadline)
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            raise self.fail(exc) from None

    async def _commit_offsets(
        self,
        offsets: Mapping[TopicPartition, TxnOffset],
        group: ConsumerGroupMetadata,
        deadline: float,
    ) -> None:
        member = MemberIdentity(group.member_id, group.generation_id, group.group_instance_id)
        left = dict(offsets)
        attempt = 0
        while left:
            last: KafkaError
            try:
                conn = await coordinator(
                    self.cluster, group.group_id, wait=max(deadline - time.monotonic(), 0.0)
                )
                results = await txn_offset_commit(
                    conn, self.transactional_id, group.group_id, self.producer, left, member
                )
            except KafkaConnectionError as exc:
                results = dict.fromkeys(left, exc)
            for tp, error in results.items():
                if error is None:
                    left.pop(tp, None)
                    continue
                if error.code in _GROUP_FENCED:
                    raise TransactionAbortableError(
                        error.code,
                        f"offsets of group '{group.group_id}' cannot be committed: the "
                        f"member is no longer in generation {group.generation_id} ({error})",
                    )
                if not (
                    error.code in _RETRY
                    or error.code in _REDISCOVER
                    or isinstance(error, KafkaConnectionError)
                ):
                    raise error
                last = error
            if left:
                attempt += 1
                delay = min(self._retry_backoff * 2 ** min(attempt - 1, 10),
                            self._retry_backoff_max)
                if time.monotonic() + delay > deadline:
                    raise KafkaTimeoutError(f"TxnOffsetCommit did not complete ({last})")
                await asyncio.sleep(delay)

    async def commit(self, flush: Callable[[], Awaitable[None]], seconds: float) -> None:
        """Flush every record of the transaction, then EndTxn(commit). A record that
        failed makes the transaction abortable instead (raised here)."""
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            raise self.error_for("commit the transaction")
        self.state = TxnState.COMMITTING
        deadline = time.monotonic() + seconds
        try:
            async with asyncio.timeout(seconds):
                await flush()
                while self._adding is not None and self.state is TxnState.COMMITTING:
                    await asyncio.shield(self._adding)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"commit_transaction: records not delivered within {seconds:g}s"
            ) from None
        if self.state is not TxnState.COMMITTING:
            raise self.error_for("commit the transaction")
        await self._end(True, deadline)
        self._complete()

    async def abort(self, seconds: float) -> None:
        """Drop what is unsent, wait for what is in flight, then EndTxn(abort); the epoch
        is bumped afterwards when the broker lost the producer's sequence."""
        if self.state not in (
            TxnState.IN_TRANSACTION,
            TxnState.COMMITTING,
            TxnState.ABORTING,
            TxnState.ABORTABLE_ERROR,
        ):
            raise self.error_for("abort the transaction")
        self.state = TxnState.ABORTING
        deadline = time.monotonic() + seconds
        sender = self.sender
        assert sender is not None
        sender.drop_unsent(TransactionAbortedError("the transaction was aborted"))
        try:
            async with asyncio.timeout(seconds):
                if self._adding is not None:
                    await asyncio.shield(self._adding)
                waiters = [b.waiter() for b in sender.pending_batches()]
                if waiters:
                    await asyncio.gather(*waiters)
        except TimeoutError:
            raise KafkaTimeoutError(
                f"abort_transaction: requests in flight not answered within {seconds:g}s"
            ) from None
        if self.state is TxnState.FATAL_ERROR:
            raise self.error_for("abort the transaction")
        await self._end(False, deadline)
        if self.bump_required:
            await self._init_producer_id(self.producer, deadline)
        self._complete()

    async def _end(self, committed: bool, deadline: float) -> None:
        if not self.started:
            return  # nothing reached the coordinator: nothing to end there
        txn_id, producer = self.transactional_id, self.producer
        try:
            await self._call(
                lambda conn: end_txn(conn, txn_id, producer, committed),
                deadline,
                "EndTxn",
            )
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            error = self.fail(exc)
            if self.state is TxnState.ABORTABLE_ERROR and not committed:
                raise self._fatal(exc) from None
            raise error from None

    def _complete(self) -> None:
        self.partitions.clear()
        self.pending.clear()
        self.started = False
        self.last_error = None
        self.state = TxnState.READY

    async def close(self) -> None:
        task = self._adding
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _add_partitions_request(
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: list[TopicPartition],
    conn: Connection,
) -> dict[TopicPartition, KafkaError | None]:
    return await add_partitions_to_txn(conn, transactional_id, producer, partitions)
