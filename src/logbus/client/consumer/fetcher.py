"""Reading partitions from their leaders, ahead of `poll()` (Kafka's Fetcher).

A background task fetches every held partition with a known position, no paused flag and
nothing already buffered or being fetched, from its leader. Each partition's response
becomes a `CompletedFetch`: the raw record set and its batch headers, decoded a batch at
a time as `poll()` takes records, so a response is never copied whole and records nobody
reads are never built. Errors are handled where Kafka's consumer handles them:
leadership and unknown-partition errors refresh metadata and retry, OFFSET_OUT_OF_RANGE
asks for a reset (or is raised when the policy is "none"), anything else is raised by the
next `poll()`.

Fetches are pipelined, as librdkafka's are (`queued.min.messages`): a partition's next
fetch, from the end of what it has buffered, goes out as soon as its previous one is
answered, while the application still reads the data buffered before it, until the bytes
buffered ahead of `poll()` reach fetch.max.bytes (one whole response's worth). Each
partition has one fetch in flight at most, and its fetched data queue in offset order.
`drain()` sends the next fetches itself when it frees room (Kafka's consumer, too, sends
fetches before `poll()` returns), so the broker prepares them while the application works
on what it got. Every buffered or in-flight fetch is tied to the partition's seek epoch
and to the offset it was asked at: a seek, a reset, a revocation or a new assignment drops
what was fetched ahead, and a response is kept only if it continues exactly where the
partition's buffered data end (or, with nothing buffered, at its position).

A fetch that makes the broker wait for new data (fetch.max.wait.ms) is sent only when
nothing of that leader is buffered or in flight, and it covers every partition fetchable
there: partitions that become fetchable meanwhile wait for its answer. While some of a
leader's partitions are still buffered or in flight, fetches to it do not wait
(max_wait_ms 0) and may run side by side, and a partition whose last fetch found nothing
new is only fetched along with one that may have news, so a partition at its log end
never holds up the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar
from uuid import UUID

from logbus.client.cluster import Cluster
from logbus.client.consumer.records import (
    ConsumerRecord,
    OffsetOutOfRangeError,
    PartitionColumns,
)
from logbus.client.consumer.subscription_state import SubscriptionState
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.metadata import NO_LEADER
from logbus.client.metrics import ConsumerMetrics
from logbus.client.requests.fetch import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    FetchedData,
    FetchOptions,
    FetchPosition,
    fetch_partitions,
)
from logbus.client.requests.list_offsets import list_offsets_info
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.records.batch import BatchHeader, InvalidBatch, split_batches
from logbus.records.control import ControlType, decode_control_key
from logbus.records.reader import (
    RecordColumns,
    build_record_tuples,
    decode_batch,
    decode_record_columns,
    drop_before,
)

log = logging.getLogger(__name__)

Deserializer = Callable[[bytes | None], Any]

# Errors that mean "the metadata is stale: look again, then retry" (Java's Fetcher).
METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)



@dataclasses.dataclass
class _FetchPlan:
    """One pass over the assignment: the partitions to fetch per leader, the leaders with
    partitions buffered or in flight (`busy`), those with a partition that may have news
    (`fresh`), whether metadata is stale, and the shortest back-off left (`retry_in`)."""

    by_node: dict[int, dict[TopicPartition, tuple[int, int]]] = dataclasses.field(
        default_factory=dict
    )
    busy: set[int] = dataclasses.field(default_factory=set)
    fresh: set[int] = dataclasses.field(default_factory=set)
    stale: bool = False
    retry_in: float | None = None

    def wait(self, delay: float) -> None:
        self.retry_in = delay if self.retry_in is None else min(self.retry_in, delay)

_Taken = TypeVar("_Taken", ConsumerRecord, PartitionColumns)


def _count_columns(pieces: list[PartitionColumns]) -> int:
    return sum(len(piece.offsets) for piece in pieces)


class CompletedFetch:
    """One partition's part of a Fetch response, read out record by record.

    Batches are decoded one at a time into columns; records are built from them only as
    `take()` hands them out, so a record lives from `poll()` to the application's next
    poll and no longer (records built a whole batch ahead would outlive the young garbage
    collection generations and make the collector scan them again and again).

    `next_offset` is where the partition's position stands once everything taken so far
    is consumed, `end_offset` where it stands once the whole fetch is (the offset the
    partition's next fetch asks for); the fetch is valid only while the partition's
    position and seek epoch match what it was fetched for.
    """

    __slots__ = (
        "_aborted",
        "_aborted_producers",
        "_batch_end",
        "_batch_index",
        "_batches",
        "_check_crcs",
        "_columns",
        "_key",
        "_read_committed",
        "_record_count",
        "_record_index",
        "_value",
        "_view",
        "end_offset",
        "epoch",
        "next_offset",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        epoch: int,
        fetch_offset: int,
        records: memoryview,
        *,
        aborted: list[tuple[int, int]] | None,
        check_crcs: bool,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        self.tp = tp
        self.epoch = epoch
        self.next_offset = fetch_offset
        self._view = records
        self._batches: list[tuple[int, BatchHeader]] = split_batches(records)
        self.end_offset = (
            max(fetch_offset, self._batches[-1][1].next_offset) if self._batches else fetch_offset
        )
        self._batch_index = 0
        self._columns: RecordColumns | None = None
        self._record_count = 0
        self._record_index = 0
        self._batch_end = fetch_offset
        self._read_committed = aborted is not None
        # Aborted transactions by first offset (producer id, first offset), oldest first.
        self._aborted = sorted(aborted or (), key=lambda a: a[1])
        self._aborted_producers: set[int] = set()
        self._check_crcs = check_crcs
        self._key = key_deserializer
        self._value = value_deserializer

    @property
    def size(self) -> int:
        """Bytes of record batches this fetch brought."""
        return len(self._view)

    @property
    def empty(self) -> bool:
        """Nothing left to read (and the position already at `next_offset`)."""
        return self._record_index >= self._record_count and self._batch_index >= len(
            self._batches
        )

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` records, advancing `next_offset` past them (and past
        control batches, aborted batches and compacted gaps on the way)."""
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            if self._record_index >= self._record_count:
                self.next_offset = max(self.next_offset, self._batch_end)
                if not self._next_batch():
                    break
                continue
            columns = self._columns
            assert columns is not None
            start = self._record_index
            stop = min(self._record_count, start + max_records - len(out))
            try:
                out += self._build(columns, start, stop)
            except Exception:
                # A deserializer failed: hand out the records before the one it failed
                # on; that one raises (now, or at the next poll) until the application
                # seeks past it, as in Kafka's consumer.
                end, stop = stop, start
                while stop < end:
                    try:
                        out += self._build(columns, stop, stop + 1)
                    except Exception:
                        if stop == start and not out:
                            raise
                        break
                    stop += 1
                if stop == start:
                    return out
            self._record_index = stop
            self.next_offset = columns.offsets[stop - 1] + 1
        if self._record_index >= self._record_count:
            self.next_offset = max(self.next_offset, self._batch_end)
        return out

    def take_columns(self, max_records: int) -> list[PartitionColumns]:
        """`take` without a record object per record: up to `max_records` records as
        column slices, one per batch they come from (keys and values as bytes: only for
        a consumer without deserializers)."""
        out: list[PartitionColumns] = []
        taken = 0
        topic, partition = self.tp
        while taken < max_records:
            if self._record_index >= self._record_count:
                self.next_offset = max(self.next_offset, self._batch_end)
                if not self._next_batch():
                    break
                continue
            columns = self._columns
            assert columns is not None
            start = self._record_index
            stop = min(self._record_count, start + max_records - taken)
            whole = start == 0 and stop == self._record_count
            headers = columns.headers
            out.append(
                PartitionColumns(topic, partition, *columns)
                if whole
                else PartitionColumns(
                    topic,
                    partition,
                    columns.offsets[start:stop],
                    columns.timestamps[start:stop],
                    columns.timestamp_type,
                    columns.keys[start:stop],
                    columns.values[start:stop],
                    None if headers is None else headers[start:stop],
                )
            )
            taken += stop - start
            self._record_index = stop
            self.next_offset = columns.offsets[stop - 1] + 1
        if self._record_index >= self._record_count:
            self.next_offset = max(self.next_offset, self._batch_end)
        return out

    def _build(self, columns: RecordColumns, start: int, stop: int) -> list[ConsumerRecord]:
        topic, partition = self.tp
        return build_record_tuples(
            ConsumerRecord,
            topic,
            partition,
            columns,
            start=start,
            stop=stop,
            key_deserializer=self._key,
            value_deserializer=self._value,
        )

    def _next_batch(self) -> bool:
        """Decode the next batch worth returning; False when there is none."""
        while self._batch_index < len(self._batches):
            position, header = self._batches[self._batch_index]
            self._batch_index += 1
            if header.next_offset <= self.next_offset:
                continue  # wholly before the position (the broker sends whole batches)
            if self._read_committed and header.producer_id >= 0:
                self._consume_aborted_up_to(header.last_offset)
                if header.is_control:
                    if self._is_abort_marker(position, header):
                        self._aborted_producers.discard(header.producer_id)
                elif header.is_transactional and header.producer_id in self._aborted_producers:
                    self.next_offset = header.next_offset
                    continue
            if header.is_control:
                self.next_offset = header.next_offset
                continue
            columns = self._decode(position, header)
            self._columns = columns
            self._record_count = len(columns.offsets)
            self._record_index = 0
            self._batch_end = header.next_offset
            return True
        self._columns = None
        self._record_count = self._record_index = 0
        return False

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][1] <= offset:
            self._aborted_producers.add(self._aborted.pop(0)[0])

    def _is_abort_marker(self, position: int, header: BatchHeader) -> bool:
        _, records = decode_batch(
            self._view[position : position + header.size], verify_crc=self._check_crcs
        )
        return bool(records) and decode_control_key(records[0].key).type == ControlType.ABORT

    def _decode(self, position: int, header: BatchHeader) -> RecordColumns:
        try:
            columns = decode_record_columns(
                self._view[position : position + header.size],
                header,
                verify_crc=self._check_crcs,
            )
        except InvalidBatch as exc:
            # Stay on this batch: every later poll raises until the application seeks.
            self._batch_index -= 1
            topic, partition = self.tp
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"record batch of {topic}-{partition} at offset "
                f"{header.base_offset} is invalid: {exc}",
            ) from None
        return drop_before(columns, self.next_offset)


class Fetcher:
    """The background fetch task, the fetched data waiting for `poll()`, and offset
    look-ups (ListOffsets). Owned by one consumer; used from its event loop only.

    `start()` starts the task, `close()` stops it; `wake()` after anything that changes
    what is fetchable (assignment, seek, resume); `data_ready` is set whenever `poll()`
    has something to return or raise.
    """

    def __init__(
        self,
        cluster: Cluster,
        subscriptions: SubscriptionState,
        config: Mapping[str, Any],
        *,
        refresh_metadata: Callable[[Iterable[str]], Awaitable[None]],
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        self.cluster = cluster
        self.subscriptions = subscriptions
        self._refresh_metadata = refresh_metadata
        self.max_wait_ms: int = config["fetch.max.wait.ms"]
        self.isolation_level = (
            READ_COMMITTED if config["isolation.level"] == "read_committed" else READ_UNCOMMITTED
        )
        # A fetch that waits (fetch.max.wait.ms) and one that does not.
        self._waiting_fetch = FetchOptions(
            max_wait_ms=self.max_wait_ms,
            min_bytes=config["fetch.min.bytes"],
            max_bytes=config["fetch.max.bytes"],
            partition_max_bytes=config["max.partition.fetch.bytes"],
            isolation_level=self.isolation_level,
            rack_id=config["client.rack"],
        )
        self._quick_fetch = dataclasses.replace(self._waiting_fetch, max_wait_ms=0)
        self.check_crcs: bool = config["check.crcs"]
        self.retry_backoff = config["retry.backoff.ms"] / 1000
        self.reconnect_backoff = config["reconnect.backoff.ms"] / 1000
        self.reconnect_backoff_max = config["reconnect.backoff.max.ms"] / 1000
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.data_ready = asyncio.Event()
        # Each partition's fetched data not yet handed out, in offset order, and their
        # bytes in all; fetching ahead stops while these reach one response's bound.
        self._buffered: dict[TopicPartition, deque[CompletedFetch]] = {}
        self._buffered_bytes = 0
        self._prefetch_bytes: int = config["fetch.max.bytes"]
        # Partitions whose last fetch found nothing new, and the offset it was at.
        self._at_end: dict[TopicPartition, int] = {}
        # Fetch tasks started by drain(), not yet run (poll() yields once to send them).
        self.fetches_started = False
        self._tasks: set[asyncio.Task[None]] = set()  # fetches in flight
        self._fetching: set[TopicPartition] = set()  # partitions they fetch
        self._long_polls: set[int] = set()  # leaders with a waiting fetch in flight
        self._node_retry_at: dict[int, float] = {}
        self._node_failures: dict[int, int] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._metadata_task: asyncio.Task[None] | None = None
        self.metrics: ConsumerMetrics | None = None  # recorded per fetch and per drain

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="logbus-consumer-fetcher"
            )

    async def close(self) -> None:
        tasks = [t for t in (self._task, self._metadata_task) if t is not None]
        tasks += list(self._tasks)
        self._task = self._metadata_task = None
        self._tasks.clear()
        self._fetching.clear()
        self._long_polls.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._buffered.clear()
        self._buffered_bytes = 0

    def wake(self) -> None:
        self._wake.set()

    def clear(self, partitions: Any = None) -> None:
        """Drop buffered data (of `partitions`, or all)."""
        if partitions is None:
            self._buffered.clear()
            self._buffered_bytes = 0
        else:
            for tp in partitions:
                self._drop_buffered(tp)
        self._wake.set()

    def _drop_buffered(self, tp: TopicPartition) -> None:
        queue = self._buffered.pop(tp, None)
        if queue:
            self._buffered_bytes -= sum(fetch.size for fetch in queue)

    def _buffered_for(
        self, tp: TopicPartition, epoch: int
    ) -> deque[CompletedFetch] | None:
        """The partition's buffered data if fetched since its last seek (older data is
        dropped here)."""
        queue = self._buffered.get(tp)
        if queue and queue[0].epoch != epoch:
            self._drop_buffered(tp)
            return None
        return queue

    def _next_fetch_offset(self, tp: TopicPartition, position: int, epoch: int) -> int:
        """Where the partition's next fetch starts: the end of its buffered data, or its
        position when nothing is buffered."""
        queue = self._buffered_for(tp, epoch)
        return queue[-1].end_offset if queue else position

    def retain(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop buffered data of every partition but these."""
        keep = set(partitions)
        self._at_end = {tp: o for tp, o in self._at_end.items() if tp in keep}
        self.clear([tp for tp in self._buffered if tp not in keep])

    # --- handing records to poll() ----------------------------------------------------

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` buffered records, positions advanced past them. Raises a
        partition's pending error (a reset policy of "none", a corrupt batch, ...)."""
        out: list[ConsumerRecord] = []
        self._drain(max_records, CompletedFetch.take, out, len)
        return out

    def drain_columns(self, max_records: int) -> list[PartitionColumns]:
        """`drain` as column slices (`CompletedFetch.take_columns`), for a consumer
        without deserializers."""
        out: list[PartitionColumns] = []
        self._drain(max_records, CompletedFetch.take_columns, out, _count_columns)
        return out

    def _drain(
        self,
        max_records: int,
        take: Callable[[CompletedFetch, int], list[_Taken]],
        out: list[_Taken],
        count: Callable[[list[_Taken]], int],
    ) -> None:
        """Put up to `max_records` buffered records in `out`, as `take` hands them out
        (`count`: how many records a list of what it hands out holds)."""
        self._raise_pending_error()
        assignment = self.subscriptions.assignment
        emptied = False
        total = 0
        for tp in list(self._buffered):
            if total >= max_records:
                break
            queue = self._buffered[tp]
            fetch = queue[0]
            state = assignment.get(tp)
            if state is None or state.epoch != fetch.epoch or state.position != fetch.next_offset:
                self._drop_buffered(tp)  # fetched for a position since left behind
                emptied = True
                continue
            if state.paused:
                continue
            try:
                records = take(fetch, max_records - total)
            except Exception:  # a corrupt batch, a deserializer's error
                state.position = fetch.next_offset
                if out:
                    return
                raise
            state.position = fetch.next_offset
            out += records
            taken = count(records)
            total += taken
            metrics = self.metrics
            if metrics is not None:
                metrics.records_consumed.record(taken)
                end = (
                    state.last_stable_offset
                    if self.isolation_level == READ_COMMITTED
                    else state.high_watermark
                )
                if end >= 0:
                    metrics.records_lag.record(end - state.position)
                if fetch.empty:
                    metrics.bytes_consumed.record(fetch.size)
            # As Kafka's consumer does, read one fetch to its end before the next
            # partition's: a partition then frees its room one fetch at a time, and is
            # fetched again while the others are read. A fetch is bounded by
            # max.partition.fetch.bytes and the partition goes to the back of the queue
            # once it is read, so no partition starves the others.
            if fetch.empty:
                queue.popleft()
                self._buffered_bytes -= fetch.size
                del self._buffered[tp]
                if queue:
                    self._buffered[tp] = queue
                emptied = True
        if emptied:
            self._prefetch()

    def _prefetch(self) -> None:
        """Send the next fetches now, not when the application next lets the fetch task
        run; `fetches_started` tells `poll()` to yield once so they go out."""
        if self._task is None:
            return
        self._wake.set()  # the loop recomputes its backoff timer
        before = len(self._tasks)
        self._send_fetches()
        if len(self._tasks) > before:
            self.fetches_started = True

    def _raise_pending_error(self) -> None:
        for state in self.subscriptions.assignment.values():
            error = state.error
            if error is not None:
                if not isinstance(error, OffsetOutOfRangeError):
                    state.error = None  # raised once; a seek clears the others
                raise error

    # --- the fetch loop ---------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            delay = self._send_fetches()
            if delay is None:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()

    def _send_fetches(self) -> float | None:
        """Start the fetches the module's doc describes; return how long until a partition
        backing off may be tried again (None: nothing to wait for)."""
        plan = self._plan_fetches(time.monotonic())
        for node, partitions in plan.by_node.items():
            if node in plan.busy:
                if node not in plan.fresh:
                    continue  # only partitions with nothing new: wait for the others
                self._start_fetch(node, partitions, 0)
            else:
                self._start_fetch(node, partitions, self.max_wait_ms)
        if plan.stale:
            self.request_metadata()
        return plan.retry_in

    def _plan_fetches(self, now: float) -> _FetchPlan:
        """Which assigned partitions to fetch from which leader now."""
        md = self.cluster.metadata
        plan = _FetchPlan()
        for tp, state in self.subscriptions.assignment.items():
            if state.position is None or state.paused or state.error is not None:
                continue
            leader = NO_LEADER
            info = md.topics.get(tp.topic) if md is not None else None
            if info is not None:
                part = info.partitions.get(tp.partition)
                if part is not None:
                    leader = part.leader
            if tp in self._fetching:
                plan.busy.add(leader)
                continue
            offset = state.position
            queue = self._buffered_for(tp, state.epoch)
            if queue:
                plan.busy.add(leader)
                if self._buffered_bytes >= self._prefetch_bytes:
                    continue  # enough fetched ahead: wait for poll() to take some
                offset = queue[-1].end_offset
            node_retry_at = self._node_retry_at.get(leader, 0.0)
            if state.retry_at > now:
                plan.wait(state.retry_at - now)
            elif leader == NO_LEADER:
                plan.stale = True
            elif leader in self._long_polls:
                pass  # it answers when it has news; new partitions wait for it
            elif node_retry_at > now:
                plan.wait(node_retry_at - now)
            else:
                plan.by_node.setdefault(leader, {})[tp] = (offset, state.epoch)
                if self._at_end.get(tp) != offset:
                    plan.fresh.add(leader)
        return plan

    def _start_fetch(
        self, node: int, partitions: dict[TopicPartition, tuple[int, int]], max_wait_ms: int
    ) -> None:
        task = asyncio.get_running_loop().create_task(
            self._fetch(node, partitions, max_wait_ms), name=f"logbus-fetch-{node}"
        )
        self._tasks.add(task)
        self._fetching.update(partitions)
        if max_wait_ms > 0:
            self._long_polls.add(node)
        task.add_done_callback(
            functools.partial(self._fetch_done, node, list(partitions), max_wait_ms > 0)
        )

    def _fetch_done(
        self,
        node: int,
        partitions: list[TopicPartition],
        long_poll: bool,
        task: asyncio.Task[None],
    ) -> None:
        if task not in self._tasks:
            return  # closed meanwhile
        self._tasks.discard(task)
        self._fetching.difference_update(partitions)
        if long_poll:
            self._long_polls.discard(node)
        if not task.cancelled() and task.exception() is not None:
            log.warning("fetch from broker %d failed: %r", node, task.exception())
            self._back_off_node(node)
        self._wake.set()

    def _back_off_node(self, node: int) -> None:
        """Wait before the next fetch from a failing broker: reconnect.backoff.ms,
        doubling with each failure in a row up to reconnect.backoff.max.ms."""
        failures = self._node_failures.get(node, 0) + 1
        self._node_failures[node] = failures
        delay = min(self.reconnect_backoff * 2 ** min(failures - 1, 30),
                    self.reconnect_backoff_max)
        self._node_retry_at[node] = time.monotonic() + delay

    def request_metadata(self) -> None:
        """Refresh metadata in the background (once at a time, then wake the loop)."""
        if self._metadata_task is not None and not self._metadata_task.done():
            return

        async def refresh() -> None:
            try:
                await self._refresh_metadata(())
            except KafkaError as exc:
                log.debug("metadata refresh failed: %s", exc)
            await asyncio.sleep(self.retry_backoff)
            self._wake.set()

        self._metadata_task = asyncio.get_running_loop().create_task(
            refresh(), name="logbus-consumer-metadata"
        )

    async def _fetch(
        self, node: int, partitions: dict[TopicPartition, tuple[int, int]], max_wait_ms: int
    ) -> None:
        try:
            conn = await self.cluster.node(node)
            started = time.monotonic()
            response = await fetch_partitions(
                conn,
                {tp: FetchPosition(offset) for tp, (offset, _) in partitions.items()},
                self._waiting_fetch if max_wait_ms > 0 else self._quick_fetch,
                self._topic_ids(partitions),
            )
        except KafkaConnectionError as exc:
            log.debug("fetch from broker %d failed: %s", node, exc)
            self._back_off_node(node)
            self.request_metadata()
            return
        except KafkaError as exc:
            if exc.code in METADATA_ERRORS or exc.code == ErrorCode.BROKER_NOT_AVAILABLE:
                self._back_off_node(node)
                self.request_metadata()
                return
            raise
        self._node_failures.pop(node, None)
        if self.metrics is not None:
            self.metrics.fetch_latency.record((time.monotonic() - started) * 1000)
            self.metrics.fetch_size.record(
                sum(len(p.records) for p in response.partitions.values() if p.records)
            )
        if response.error_code != ErrorCode.NONE:
            self._back_off_node(node)
            self.request_metadata()
            return
        for tp, data in response.partitions.items():
            self._handle_partition(TopicPartition(*tp), data, partitions)

    def _topic_ids(self, partitions: Iterable[TopicPartition]) -> dict[str, UUID]:
        """The ids of the partitions' topics known from metadata (Fetch v13+ names
        topics by id; without every id the request stays at v12)."""
        md = self.cluster.metadata
        if md is None:
            return {}
        ids: dict[str, UUID] = {}
        for topic, _ in partitions:
            info = md.topics.get(topic)
            if info is not None:
                ids[topic] = info.topic_id
        return ids

    def _handle_partition(
        self,
        tp: TopicPartition,
        p: FetchedData,
        asked: Mapping[TopicPartition, tuple[int, int]],
    ) -> None:
        request = asked.get(tp)
        state = self.subscriptions.assignment.get(tp)
        if request is None or state is None:
            return
        offset, epoch = request
        position = state.position
        if (
            state.epoch != epoch
            or position is None
            or self._next_fetch_offset(tp, position, epoch) != offset
        ):
            return  # the application seeked meanwhile
        code = p.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = p.high_watermark
            state.last_stable_offset = p.last_stable_offset
            state.log_start_offset = p.log_start_offset
            records = p.records
            self._at_end[tp] = offset  # until records say otherwise
            if records:
                aborted: list[tuple[int, int]] | None = None
                if self.isolation_level == READ_COMMITTED:
                    aborted = p.aborted_transactions or []
                fetch = CompletedFetch(
                    tp,
                    epoch,
                    offset,
                    memoryview(records),
                    aborted=aborted,
                    check_crcs=self.check_crcs,
                    key_deserializer=self.key_deserializer,
                    value_deserializer=self.value_deserializer,
                )
                if not fetch.empty:
                    del self._at_end[tp]
                    queue = self._buffered.get(tp)
                    if queue is None:
                        self._buffered[tp] = deque((fetch,))
                    else:
                        queue.append(fetch)
                    self._buffered_bytes += fetch.size
                    self.data_ready.set()
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            strategy = self.subscriptions.default_reset
            if strategy == "none":
                state.error = OffsetOutOfRangeError({tp: offset})
            else:
                log.info("offset %d of %s-%d is out of range; resetting to %s",
                         offset, tp.topic, tp.partition, strategy)
                self.subscriptions.request_reset(tp, strategy)
            self.data_ready.set()
            return
        if code in METADATA_ERRORS:
            state.retry_at = time.monotonic() + self.retry_backoff
            self.request_metadata()
            return
        state.error = KafkaError(code, f"fetching {tp.topic}-{tp.partition} at {offset}")
        self.data_ready.set()

    # --- offsets by time --------------------------------------------------------------

    async def list_offsets(
        self, requests: Mapping[TopicPartition, int], wait: float
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets for each partition (EARLIEST, LATEST or a timestamp in ms), from its
        leader: (offset, timestamp), offset -1 when no record is that recent. Retries
        retriable errors, refreshing metadata, for up to `wait` seconds."""
        deadline = time.monotonic() + wait
        pending = dict(requests)
        out: dict[TopicPartition, tuple[int, int]] = {}
        while pending:
            md = self.cluster.metadata
            if md is None or any(tp.topic not in md.topics for tp in pending):
                await self._refresh_metadata({tp.topic for tp in pending})
                md = self.cluster.metadata
            assert md is not None
            by_node: dict[int, dict[TopicPartition, int]] = {}
            failed: KafkaError | None = None
            for tp, when in pending.items():
                try:
                    leader = md.leader(tp.topic, tp.partition)
                except KafkaError as exc:
                    if exc.code not in METADATA_ERRORS:
                        raise
                    failed = exc
                    continue
                by_node.setdefault(leader, {})[tp] = when
            for node, asked in by_node.items():
                try:
                    found = await self._list_offsets_once(node, asked)
                except KafkaConnectionError as exc:
                    failed = exc
                    continue
                for tp, value in found.items():
                    if isinstance(value, KafkaError):
                        if not value.retriable and value.code not in METADATA_ERRORS:
                            raise value
                        failed = value
                    else:
                        out[tp] = value
                        del pending[tp]
            if pending:
                if time.monotonic() >= deadline:
                    raise failed or KafkaError(ErrorCode.REQUEST_TIMED_OUT, "ListOffsets")
                await asyncio.sleep(self.retry_backoff)
                await self._refresh_metadata({tp.topic for tp in pending})
        return out

    async def _list_offsets_once(
        self, node: int, requests: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | KafkaError]:
        conn = await self.cluster.node(node)
        asked = dict(requests)
        found = await list_offsets_info(
            conn,
            asked,
            isolation_level=self.isolation_level,
            timeout_ms=int(conn.request_timeout * 1000),
        )
        return {
            TopicPartition(*tp): value
            if isinstance(value, KafkaError)
            else (value.offset, value.timestamp)
            for tp, value in found.items()
        }
