"""The producer's background task (Kafka's Sender): drains ready batches from the
accumulator, one Produce request per broker carrying every ready partition it leads,
several requests in flight per broker, and settles each batch from its response.

Ordering and idempotence (KIP-98, KIP-360): a batch gets its producer id, epoch and
sequence numbers when first drained and keeps them across retries, so the broker drops a
resent batch it already holds. A partition with a batch to retry sends nothing new until
its requests in flight have come back; then its failed batches go again in sequence
order. A batch that fails for good leaves a gap in its partition's sequence, so the
producer then asks for a bumped epoch, which restarts every partition's sequence at 0.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from logbus.client.metadata import ClusterMetadata
from logbus.client.metrics import ProducerMetrics
from logbus.client.producer.accumulator import ProducerBatch, RecordAccumulator
from logbus.client.producer.buffer_pool import BufferPool
from logbus.client.producer.transaction_manager import TransactionManager, TxnState
from logbus.client.requests.produce import produce_many
from logbus.client.requests.producer_id import (
    NO_PRODUCER,
    ProducerIdAndEpoch,
    init_producer_id,
)
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.records.batch import NO_SEQUENCE
from logbus.records.builder import restamp_batch
from logbus.records.compression import CompressionType

log = logging.getLogger(__name__)

_SEQUENCE_LIMIT = 1 << 31
# Errors after which the producer's view of the partition's leader is stale.
_STALE_METADATA = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
# Errors after which the broker no longer knows our producer id and epoch as we do.
_SEQUENCE_LOST = frozenset(
    {ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_EPOCH}
)


@dataclass(frozen=True, slots=True)

class SenderSettings:
    acks: int
    idempotent: bool
    linger: float
    batch_size: int
    max_request_size: int
    max_in_flight: int
    retries: int
    delivery_timeout: float
    request_timeout_ms: int
    retry_backoff: float
    retry_backoff_max: float
    reconnect_backoff: float
    reconnect_backoff_max: float
    metadata_max_age: float
    compression: CompressionType
    compression_level: int | None
    max_block: float = 60.0  # how long start() waits for a producer id


class PartitionState:
    """What the sender tracks for one partition: its next sequence number, its batches
    sent but not yet settled (in sequence order) and those waiting to be sent again."""

    __slots__ = ("in_flight", "next_sequence", "retry", "unacked")

    def __init__(self) -> None:
        self.next_sequence = 0
        self.in_flight = 0
        self.unacked: deque[ProducerBatch] = deque()
        self.retry: list[ProducerBatch] = []


@dataclass
class _SendPlan:
    """One pass over the partitions (`Sender._send_ready`): the batches to send per
    leader and their bytes, whether more is ready than one pass sends, and the shortest
    wait until something may become ready."""

    groups: dict[int, dict[TopicPartition, ProducerBatch]] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    more: bool = False
    wait: float = float("inf")

    def wait_for(self, delay: float) -> None:
        self.wait = min(self.wait, delay)


class Sender:
    """Owns the sending task and the requests it has in flight. Started by `start()`,
    stopped by `stop()`; lives on the producer's event loop (`wakeup` may be called
    from any thread)."""

    def __init__(
        self,
        cluster: Cluster,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        settings: SenderSettings,
        topics: set[str],
    ) -> None:
        self.cluster = cluster
        self.accumulator = accumulator
        self.pool = pool
        self.settings = settings
        self.topics = topics
        self.producer = NO_PRODUCER
        self.states: dict[TopicPartition, PartitionState] = {}
        self.flushing = 0
        self.expedite: set[TopicPartition] = set()
        self._wakeup = asyncio.Event()
        self._in_flight: dict[int, int] = {}
        self._requests: set[asyncio.Task[None]] = set()
        self._needs_bump = False
        self._need_metadata = False
        self._metadata_retry_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.on_metadata: Callable[[ClusterMetadata], None] | None = None
        # A transactional producer's: gets the producer id, lets partitions be sent to
        # once added to the transaction, and learns of every batch that fails.
        self.txn: TransactionManager | None = None
        self.metrics: ProducerMetrics | None = None  # recorded per request and batch

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if self.settings.idempotent and self.txn is None:
            self.producer = await self._init_producer_id(
                NO_PRODUCER, time.monotonic() + self.settings.max_block
            )
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="logbus-producer-sender"
        )

    async def _init_producer_id(
        self, current: ProducerIdAndEpoch, deadline: float
    ) -> ProducerIdAndEpoch:
        """InitProducerId, asked again after a backoff while the broker answers a
        retriable code (COORDINATOR_LOAD_IN_PROGRESS while it cannot reserve ids, say) or
        the connection breaks, as Kafka's producer does, until `deadline`."""
        s = self.settings
        attempt = 0
        while True:
            try:
                conn = await self.cluster.bootstrap()
                return await init_producer_id(conn, current)
            except KafkaError as exc:
                if not (exc.retriable or isinstance(exc, KafkaConnectionError)):
                    raise
                last = exc
            attempt += 1
            delay = min(s.retry_backoff * 2 ** min(attempt - 1, 10), s.retry_backoff_max)
            if time.monotonic() + delay > deadline:
                raise KafkaTimeoutError(f"InitProducerId did not succeed in time ({last})")
            log.debug("InitProducerId: %s; asking again in %.3f s", last, delay)
            await asyncio.sleep(delay)

    def wakeup(self) -> None:
        """Have the sending task look at the accumulator again (from any thread)."""
        if threading.get_ident() == self._loop_thread or self._loop is None:
            self._wakeup.set()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wakeup.set)

    async def stop(self) -> None:
        """Stop sending; requests in flight are cancelled (their batches stay unsettled)."""
        tasks = [*self._requests]
        if self._task is not None:
            tasks.append(self._task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None

    def reset_producer(self, producer: ProducerIdAndEpoch) -> None:
        """A new producer id or epoch from the transaction manager: every partition's
        sequence starts again at 0 (nothing is in flight then)."""
        self.producer = producer
        for state in self.states.values():
            state.next_sequence = 0
        self._needs_bump = False

    def drop_unsent(self, error: BaseException) -> None:
        """Fail every batch not yet sent (an aborted transaction's, Kafka's
        abortUndrainedBatches); batches in flight or waiting for a retry go on."""
        dropped: list[ProducerBatch] = []
        with self.accumulator.lock:
            for tp, queue in self.accumulator.batches.items():
                while queue:
                    batch = queue.popleft()
                    self.pool.release(batch.reserved)
                    dropped.append(batch)
                self.expedite.discard(tp)
        for batch in dropped:
            batch.fail(error)

    def pending_batches(self) -> list[ProducerBatch]:
        """Every batch not yet settled: unsent, in flight or waiting to be retried."""
        batches = self.accumulator.all_batches()
        for state in self.states.values():
            batches.extend(state.unacked)
        return batches

    # --- the loop -----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            now = time.monotonic()
            try:
                await self._maybe_refresh_metadata(now)
                if self._needs_bump and not self._requests:
                    await self._bump_epoch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep sending what can be sent; try again later
                log.debug("producer metadata or producer id request failed: %r", exc)
                self._metadata_retry_at = now + self.settings.retry_backoff
            txn = self.txn
            if txn is not None and txn.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
                # Nothing more of a failed transaction is sent (Kafka's sender aborts
                # the undrained batches with the transaction's error).
                self.drop_unsent(txn.error_for("send"))
            now = time.monotonic()
            expired: list[tuple[ProducerBatch, KafkaTimeoutError]] = []
            try:
                with self.accumulator.lock:
                    expired = self._expire(now)
                    delay = self._send_ready(now)
            except Exception:  # a bug: say so, and do not spin on it
                log.exception("the producer's sender failed; retrying")
                delay = self.settings.retry_backoff
            # Failed outside the lock: their callbacks may send records.
            for batch, error in expired:
                batch.fail(error)
                if txn is not None:
                    txn.batch_failed(error)
            if txn is not None:
                txn.maybe_add_partitions()
            if delay is None or delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)

    async def _maybe_refresh_metadata(self, now: float) -> None:
        stale = now - self.cluster.metadata_at >= self.settings.metadata_max_age
        if not (self._need_metadata or stale) or now < self._metadata_retry_at or not self.topics:
            return
        self._need_metadata = False
        self._metadata_retry_at = now + self.settings.retry_backoff
        md = await self.cluster.refresh(sorted(self.topics), allow_auto_topic_creation=True)
        if self.on_metadata is not None:
            self.on_metadata(md)

    def request_metadata(self) -> None:
        self._need_metadata = True
        self.wakeup()

    def _leader(self, tp: TopicPartition) -> int | None:
        md = self.cluster.metadata
        if md is None:
            return None
        info = md.topics.get(tp.topic)
        part = None if info is None else info.partitions.get(tp.partition)
        if part is None or part.leader < 0:
            return None
        return part.leader

    def _send_ready(self, now: float) -> float | None:
        """Start a request to every broker that has ready batches and room in flight.
        Returns seconds until something may next become ready (None: nothing pending)."""
        s = self.settings
        plan = _SendPlan()
        if self.topics:  # refresh metadata at least every metadata.max.age.ms
            plan.wait = max(self.cluster.metadata_at + s.metadata_max_age - now, s.retry_backoff)
        if self._needs_bump:
            plan.wait = s.retry_backoff  # the bump failed or waits for requests in flight
        for tp, queue in self.accumulator.batches.items():
            state = self.states.get(tp)
            if state is None:
                state = self.states[tp] = PartitionState()
            # Wake up to expire batches that reach delivery.timeout.ms.
            if queue:
                plan.wait_for(queue[0].created + s.delivery_timeout - now)
            for waiting in state.retry:
                plan.wait_for(waiting.created + s.delivery_timeout - now)
            from_retry = bool(state.retry)
            batch = (self._retry_due(state, now, plan) if from_retry
                     else self._head_due(tp, queue, state, now, plan))
            if batch is not None:
                self._add_to_request(tp, queue, state, batch, from_retry, now, plan)
        for node, group in plan.groups.items():
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
            task = asyncio.get_running_loop().create_task(self._produce(node, group))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        if plan.more:
            return 0.0
        if plan.wait == float("inf"):
            return None
        return max(plan.wait, 0.0)

    def _retry_due(
        self, state: PartitionState, now: float, plan: _SendPlan
    ) -> ProducerBatch | None:
        """The partition's first batch to retry, if it may be resent now."""
        if state.in_flight:
            return None  # resend in order once everything sent has come back
        first = state.retry[0]
        if first.retry_at > now:
            plan.wait_for(first.retry_at - now)
            return None
        return None if self._needs_bump else first

    def _head_due(
        self,
        tp: TopicPartition,
        queue: deque[ProducerBatch],
        state: PartitionState,
        now: float,
        plan: _SendPlan,
    ) -> ProducerBatch | None:
        """The partition's oldest batch, if it is ready to go (full, lingered long enough,
        flushed or expedited) and may be sent now."""
        s = self.settings
        if not queue or self._needs_bump:
            return None
        if self.txn is not None and not self.txn.send_allowed(tp):
            return None  # added to the transaction first (AddPartitionsToTxn)
        head = queue[0]
        ready = (
            head.encoded
            or len(queue) > 1
            or head.size >= s.batch_size
            or self.flushing
            or tp in self.expedite
            or now - head.created >= s.linger
        )
        if not ready:
            plan.wait_for(head.created + s.linger - now)
            return None
        if s.max_in_flight == 1 and state.in_flight:
            return None  # one batch at a time keeps order without idempotence
        return head

    def _add_to_request(
        self,
        tp: TopicPartition,
        queue: deque[ProducerBatch],
        state: PartitionState,
        batch: ProducerBatch,
        from_retry: bool,
        now: float,
        plan: _SendPlan,
    ) -> None:
        """Put `batch` into the request to its leader, if the leader is known, reachable,
        has room in flight and the request has room for it."""
        s = self.settings
        leader = self._leader(tp)
        if leader is None:
            self._need_metadata = True
            plan.wait_for(s.retry_backoff)
            return
        backoff = self.cluster.backoff_remaining(leader)
        if backoff > 0:
            plan.wait_for(backoff)
            return
        if self._in_flight.get(leader, 0) >= s.max_in_flight:
            return  # the response wakes us
        group = plan.groups.get(leader)
        if group is None:
            group = plan.groups[leader] = {}
            plan.sizes[leader] = 0
        elif tp in group or plan.sizes[leader] + batch.size > s.max_request_size:
            plan.more = True
            return
        if from_retry:
            state.retry.pop(0)
        else:
            queue.popleft()
            if not queue:
                self.expedite.discard(tp)
            self._seal(batch, state)
            state.unacked.append(batch)
            if len(queue) > 1 or (queue and queue[0].size >= s.batch_size):
                plan.more = True
        assert batch.data is not None
        plan.sizes[leader] += len(batch.data)
        state.in_flight += 1
        group[tp] = batch

    def _seal(self, batch: ProducerBatch, state: PartitionState) -> None:
        s = self.settings
        sequence = NO_SEQUENCE
        if s.idempotent:
            sequence = state.next_sequence
            state.next_sequence = (sequence + batch.count) % _SEQUENCE_LIMIT
        batch.seal(
            s.compression,
            s.compression_level,
            self.producer.producer_id,
            self.producer.epoch,
            sequence,
            self.txn is not None,
        )

    # --- requests -----------------------------------------------------------------------

    async def _produce(self, node: int, group: dict[TopicPartition, ProducerBatch]) -> None:
        s = self.settings
        results: Mapping[Any, Any] | None
        try:
            try:
                conn = await self.cluster.node(node)
            except KafkaError as exc:  # gone from the metadata, say: find the new leader
                if isinstance(exc, KafkaConnectionError):
                    raise
                raise KafkaConnectionError(f"no connection to broker {node}: {exc}") from exc
            payload: dict[TopicPartition, bytearray | memoryview] = {
                tp: batch.data for tp, batch in group.items() if batch.data is not None
            }
            started = time.monotonic()
            results = await produce_many(
                conn,
                payload,
                s.acks,
                timeout_ms=s.request_timeout_ms,
                transactional_id=None if self.txn is None else self.txn.transactional_id,
            )
            if self.metrics is not None:
                _record_request(self.metrics, group, (time.monotonic() - started) * 1000)
        except KafkaError as exc:
            if isinstance(exc, KafkaConnectionError):
                self._need_metadata = True
            results = dict.fromkeys(group, exc)
        except (ValueError, TypeError) as exc:  # an undecodable response (ProtocolError)
            error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Produce to broker {node}: {exc}")
            results = dict.fromkeys(group, error)
        finally:
            self._in_flight[node] -= 1
        now = time.monotonic()
        for tp, batch in group.items():
            state = self.states[tp]
            state.in_flight -= 1
            result = None if results is None else results.get(tp)
            if isinstance(result, BaseException):
                self._failed(batch, state, result, now)
            elif result is None:
                self._settled(batch, state)
                batch.complete(-1, -1)
            else:
                self._settled(batch, state)
                batch.complete(result.base_offset, result.log_append_time)
        self.wakeup()

    def _settled(self, batch: ProducerBatch, state: PartitionState) -> None:
        with contextlib.suppress(ValueError):
            state.unacked.remove(batch)
        self.pool.release(batch.reserved)

    def _failed(
        self, batch: ProducerBatch, state: PartitionState, error: BaseException, now: float
    ) -> None:
        s = self.settings
        code = error.code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            # The broker holds this batch already, but no longer knows where (KIP-98).
            self._settled(batch, state)
            batch.complete(-1, -1)
            return
        retriable = isinstance(error, KafkaError) and error.retriable
        if self.txn is not None:
            # In a transaction a lost sequence or a stale epoch fails the batch: the
            # transaction is aborted (and the epoch bumped then), or the producer fenced.
            if code in _SEQUENCE_LOST or code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                retriable = False
        elif s.idempotent:
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                # After an earlier batch that failed, this one could not be appended
                # either; alone, it means the broker lost our sequence.
                retriable = True
                if not state.unacked or state.unacked[0] is batch:
                    self._needs_bump = True
            elif code in _SEQUENCE_LOST:
                retriable = True
                self._needs_bump = True
        if code in _STALE_METADATA or isinstance(error, KafkaConnectionError):
            self._need_metadata = True
        expired = now - batch.created >= s.delivery_timeout
        if retriable and batch.attempts < s.retries and not expired:
            if self.metrics is not None:
                self.metrics.record_retries.record(batch.count)
            batch.attempts += 1
            delay = min(s.retry_backoff * (2 ** (batch.attempts - 1)), s.retry_backoff_max)
            batch.retry_at = now + delay
            keys = [b.base_sequence for b in state.retry]
            state.retry.insert(bisect.bisect(keys, batch.base_sequence), batch)
            return
        if expired and retriable:
            error = _expired(batch, now, error)
        self._settled(batch, state)
        if self.txn is not None:
            self.txn.bump_required = True  # its sequence numbers are a gap now
            self.txn.batch_failed(error)
        elif s.idempotent:
            self._needs_bump = True  # its sequence numbers are a gap now
        if self.metrics is not None:
            self.metrics.record_errors.record(batch.count)
        batch.fail(error)

    def _expire(self, now: float) -> list[tuple[ProducerBatch, KafkaTimeoutError]]:
        """Take out the batches that have waited longer than delivery.timeout.ms; the
        caller fails each with its error."""
        timeout = self.settings.delivery_timeout
        expired: list[tuple[ProducerBatch, KafkaTimeoutError]] = []
        for tp, queue in self.accumulator.batches.items():
            while queue and now - queue[0].created >= timeout:
                batch = queue.popleft()
                self.pool.release(batch.reserved)
                expired.append((batch, _expired(batch, now, None)))
            state = self.states.get(tp)
            if state is None or not state.retry:
                continue
            keep = []
            for batch in state.retry:
                if now - batch.created >= timeout:
                    self._settled(batch, state)
                    if self.txn is not None:
                        self.txn.bump_required = True
                    elif self.settings.idempotent:
                        self._needs_bump = True
                    expired.append((batch, _expired(batch, now, None)))
                else:
                    keep.append(batch)
            state.retry = keep
        if expired and self.metrics is not None:
            self.metrics.record_errors.record(sum(batch.count for batch, _ in expired))
        return expired

    async def _bump_epoch(self) -> None:
        """New epoch, sequences from 0: every batch still to be retried is renumbered."""
        deadline = time.monotonic() + self.settings.delivery_timeout
        self.producer = await self._init_producer_id(self.producer, deadline)
        producer_id, epoch = self.producer
        for state in self.states.values():
            sequence = 0
            for batch in state.retry:
                assert batch.data is not None
                restamp_batch(
                    batch.data,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                )
                batch.base_sequence = sequence
                sequence += batch.count
            state.next_sequence = sequence
            state.unacked = deque(state.retry)
        self._needs_bump = False
        log.info("producer id %d now at epoch %d", producer_id, epoch)


def _record_request(
    metrics: ProducerMetrics, group: Mapping[TopicPartition, ProducerBatch], latency_ms: float
) -> None:
    """One Produce request answered: its latency, records and bytes, each batch's size
    and compression ratio (Kafka's Sender.updateProduceRequestMetrics)."""
    records = size = 0
    for batch in group.values():
        if batch.data is None:
            continue
        sent = len(batch.data)
        records += batch.count
        size += sent
        metrics.batch_size.record(sent)
        raw = sent if batch.encoded else len(batch.buf)
        metrics.compression_rate.record(sent / raw if raw else 1.0)
    metrics.request_latency.record(latency_ms)
    metrics.records_sent.record(records)
    metrics.records_per_request.record(records)
    metrics.outgoing_bytes.record(size)


def _expired(batch: ProducerBatch, now: float, cause: BaseException | None) -> KafkaTimeoutError:
    topic, partition = batch.tp
    waited = (now - batch.created) * 1000
    reason = f" (last error: {cause})" if cause is not None else ""
    error = KafkaTimeoutError(
        f"Expiring {batch.count} record(s) for {topic}-{partition}: {waited:.0f} ms has "
        f"passed since batch creation{reason}"
    )
    return error

