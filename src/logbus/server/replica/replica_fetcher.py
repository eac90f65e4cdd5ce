"""Followers: the replica fetchers that copy each followed partition from its leader.

`ReplicaFetcherManager` runs num.replica.fetchers fetchers per leader broker; a
partition goes to fetcher `abs(31 * hash(topic) + partition) % num.replica.fetchers` as
in Kafka (Java's String.hashCode). Each `ReplicaFetcher` is an asyncio task on the
broker's loop with one connection to its leader, made with the client's request layer.

A partition starts in the truncating state: the fetcher asks the leader where the
follower's latest leader epoch ended (OffsetForLeaderEpoch, KIP-101/279) and truncates
its log at the divergence point, never at the high watermark. It then fetches from its
log end with its last fetched epoch; a leader that finds the log diverged answers
`diverging_epoch` (Fetch v12+) and the follower truncates again. Fetched batches are
appended as they are (same offsets, epochs and CRCs); the follower's high watermark is
the leader's, bounded by its own log end. OFFSET_OUT_OF_RANGE below the leader's log
start empties the log and starts at the leader's start; above the leader's end the
follower truncates to it. Fencing and leadership errors back off for
replica.fetch.backoff.ms (a LeaderAndIsr brings the new leader).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.fetch import FetchedData, FetchOptions, FetchPosition, fetch_partitions
from logbus.client.requests.leader_epochs import EpochQuery, offset_for_leader_epoch
from logbus.client.security import PLAINTEXT, ClientSecurity
from logbus.coordinator.group.offsets_topic import java_abs, java_int, java_string_hash
from logbus.protocol import ErrorCode
from logbus.records.batch import InvalidBatch, split_batches
from logbus.server.network.listener_security import inter_broker_security
from logbus.server.quotas.replication import ReplicationQuota
from logbus.server.replica.partition import Partition
from logbus.storage.errors import StorageError
from logbus.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.server.config.broker_config import BrokerConfig

logger = logging.getLogger(__name__)

Endpoint = Callable[[int], "tuple[str, int] | None"]


@dataclass(frozen=True, slots=True)
class ReplicaFetcherConfig:
    num_fetchers: int = 1
    fetch_max_bytes: int = 1048576
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 500
    fetch_backoff_ms: int = 1000
    response_max_bytes: int = 10485760
    socket_timeout_ms: int = 30000
    security: ClientSecurity = PLAINTEXT  # the inter-broker listener's TLS and SASL

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ReplicaFetcherConfig:
        return cls(
            num_fetchers=max(1, config.num_replica_fetchers),
            fetch_max_bytes=config.replica_fetch_max_bytes,
            fetch_min_bytes=config.replica_fetch_min_bytes,
            fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            fetch_backoff_ms=config.replica_fetch_backoff_ms,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            socket_timeout_ms=config.replica_socket_timeout_ms,
            security=inter_broker_security(config),
        )


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's `AbstractFetcherManager.getFetcherId`."""
    return java_abs(java_int(31 * java_string_hash(tp.topic) + tp.partition)) % num_fetchers


@dataclass(slots=True)
class PartitionFetchState:
    part: Partition
    leader_epoch: int
    truncating: bool = True
    # ask for the leader's current epoch (its log end) rather than our latest
    to_leader_end: bool = False
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches a set of partitions from one leader broker."""

    def __init__(
        self,
        name: str,
        leader_id: int,
        broker_id: int,
        config: ReplicaFetcherConfig,
        endpoint: Endpoint,
        broker_epoch: Callable[[], int],
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.name = name
        self.leader_id = leader_id
        self.broker_id = broker_id
        self.config = config
        self.endpoint = endpoint
        self.broker_epoch = broker_epoch
        self.quota = quota
        self.states: dict[TopicPartition, PartitionFetchState] = {}
        self._changed = asyncio.Event()
        self._conn: Connection | None = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    def add(self, part: Partition) -> None:
        tp = TopicPartition(part.topic, part.index)
        self.states[tp] = PartitionFetchState(part, part.leader_epoch)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # --- the loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.config.fetch_backoff_ms / 1000
        while True:
            try:
                if not self.states:
                    await self._wait(None)
                    continue
                conn = await self._connection()
                if conn is None:
                    await self._wait(backoff)
                    continue
                now = time.monotonic()
                ready = {tp: s for tp, s in self.states.items() if s.delayed_until <= now}
                truncating = {tp: s for tp, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(conn, truncating)
                    continue
                if not ready:
                    soonest = min(s.delayed_until for s in self.states.values())
                    await self._wait(max(0.0, soonest - now))
                    continue
                allowed = self._unthrottled(ready)
                if not allowed:
                    await self._wait(min(max(self._quota_delay(), 0.01), backoff))
                    continue
                await self._fetch(conn, allowed)
            except asyncio.CancelledError:
                raise
            except (KafkaError, OSError) as exc:
                logger.info("%s: leader %d unreachable: %s", self.name, self.leader_id, exc)
                await self._drop_connection()
                await self._wait(backoff)
            except Exception:
                logger.exception("%s failed; backing off", self.name)
                await self._drop_connection()
                await self._wait(backoff)

    async def _wait(self, seconds: float | None) -> None:
        """Until a partition is added, or `seconds` pass."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    async def _connection(self) -> Connection | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = self.endpoint(self.leader_id)
        if address is None:
            return None
        timeout = self.config.socket_timeout_ms / 1000
        self._conn = await Connection.connect(
            address[0],
            address[1],
            client_id=f"broker-{self.broker_id}-{self.name}",
            connect_timeout=timeout,
            request_timeout=timeout,
            security=self.config.security,
        )
        return self._conn

    async def _drop_connection(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # --- throttles (Kafka's `shouldFollowerThrottle`) ---------------------------------------

    def _throttled(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        quota = self.quota
        return (
            quota is not None
            and quota.enabled
            and self.broker_id not in state.part.isr
            and quota.is_throttled(tp)
        )

    def _unthrottled(
        self, ready: dict[TopicPartition, PartitionFetchState]
    ) -> dict[TopicPartition, PartitionFetchState]:
        """The partitions to fetch now: throttled replicas out of the ISR wait while the
        follower throttle's bytes are spent."""
        if self.quota is None or not self.quota.is_exceeded():
            return ready
        return {tp: s for tp, s in ready.items() if not self._throttled(tp, s)}

    def _quota_delay(self) -> float:
        return 0.0 if self.quota is None else self.quota.delay()

    def _delay(self, state: PartitionFetchState) -> None:
        state.delayed_until = time.monotonic() + self.config.fetch_backoff_ms / 1000

    # --- truncation -----------------------------------------------------------------------

    async def _truncate(
        self, conn: Connection, pending: dict[TopicPartition, PartitionFetchState]
    ) -> None:
        queries: dict[TopicPartition, EpochQuery] = {}
        for tp, state in pending.items():
            latest = state.part.log.leader_epoch_cache.latest_epoch
            if state.to_leader_end:
                queries[tp] = EpochQuery(state.leader_epoch, state.leader_epoch)
            elif latest == UNDEFINED_EPOCH:
                state.truncating = False  # nothing written in any epoch: nothing to compare
            else:
                queries[tp] = EpochQuery(latest, state.leader_epoch)
        if not queries:
            return
        results = await offset_for_leader_epoch(conn, queries, replica_id=self.broker_id)
        for tp, result in results.items():
            current = self.states.get(tp)
            if current is None or current is not pending.get(tp):
                continue  # removed or replaced meanwhile
            if isinstance(result, KafkaError):
                logger.info("%s: OffsetForLeaderEpoch of %s: %s", self.name, tp, result)
                self._delay(current)
                continue
            self._truncate_to_epoch(tp, current, result.leader_epoch, result.end_offset)

    def _truncate_to_epoch(
        self, tp: TopicPartition, state: PartitionFetchState, leader_epoch: int, leader_end: int
    ) -> None:
        """Kafka's `getOffsetTruncationState`: where this follower's log stops agreeing with
        the leader's, given the end offset of the largest leader epoch <= ours that the
        leader knows."""
        log = state.part.log
        end = log.log_end_offset
        if state.to_leader_end:
            state.to_leader_end = False
            target, done = min(end, max(leader_end, 0)), True
        elif leader_end == UNDEFINED_EPOCH_OFFSET or leader_epoch == UNDEFINED_EPOCH:
            # The leader knows no epoch this old: its log end decides.
            state.to_leader_end = True
            return
        else:
            epoch, local_end = log.leader_epoch_cache.end_offset_for(leader_epoch, end)
            if epoch == UNDEFINED_EPOCH:
                target, done = min(leader_end, end), True
            elif epoch != leader_epoch:
                # We do not know the leader's epoch: cut to the end of our largest epoch
                # below it, then ask again.
                target, done = min(local_end, end), False
            else:
                target, done = min(local_end, leader_end, end), True
        if target < end:
            logger.info(
                "%s: truncating %s from %d to %d (leader %d, epoch %d)",
                self.name, tp, end, target, self.leader_id, state.leader_epoch,
            )
        # Also at the log end: that drops an epoch this broker started there as leader
        # without appending (the leader does not know it, so the fetch would diverge again).
        log.truncate_to(target)
        state.truncating = not done

    # --- fetching -------------------------------------------------------------------------

    async def _fetch(
        self, conn: Connection, ready: dict[TopicPartition, PartitionFetchState]
    ) -> None:
        positions = {
            tp: FetchPosition(
                s.part.log.log_end_offset,
                s.leader_epoch,
                s.part.log.leader_epoch_cache.latest_epoch,
                s.part.log.log_start_offset,
            )
            for tp, s in ready.items()
        }
        ids = {tp.topic: s.part.topic_id for tp, s in ready.items()}
        cfg = self.config
        options = FetchOptions(
            max_wait_ms=cfg.fetch_wait_max_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.response_max_bytes,
            partition_max_bytes=cfg.fetch_max_bytes,
            replica_id=self.broker_id,
            replica_epoch=self.broker_epoch(),
        )
        response = await fetch_partitions(conn, positions, options, ids)
        if response.error_code != ErrorCode.NONE:
            logger.info(
                "%s: fetch failed: %s", self.name, ErrorCode(response.error_code).name
            )
            for state in ready.values():
                self._delay(state)
            return
        for tp, data in response.partitions.items():
            current = self.states.get(tp)
            asked = positions.get(tp)
            if (
                current is None
                or asked is None
                or current is not ready.get(tp)
                or current.part.log.log_end_offset != asked.offset
            ):
                continue  # removed, replaced or truncated meanwhile
            if data.records and self._throttled(tp, current) and self.quota is not None:
                self.quota.record(len(data.records))
            try:
                self._process(tp, current, data)
            except (StorageError, InvalidBatch) as exc:
                logger.warning("%s: cannot append %s: %s", self.name, tp, exc)
                self._delay(current)

    def _process(self, tp: TopicPartition, state: PartitionFetchState, data: FetchedData) -> None:
        error = data.error_code
        part = state.part
        log = part.log
        if error == ErrorCode.NONE:
            if data.diverging_epoch is not None:
                epoch, end_offset = data.diverging_epoch
                before = (log.log_end_offset, log.leader_epoch_cache.latest_epoch)
                state.truncating = True
                self._truncate_to_epoch(tp, state, epoch, end_offset)
                if not state.truncating and before == (
                    log.log_end_offset, log.leader_epoch_cache.latest_epoch
                ):
                    # Nothing changed: fetching again would diverge again. Ask the leader
                    # with OffsetForLeaderEpoch after the backoff instead.
                    logger.warning(
                        "%s: %s diverges at epoch %d offset %d but nothing to truncate",
                        self.name, tp, epoch, end_offset,
                    )
                    state.truncating = True
                    self._delay(state)
                return
            records = data.records
            if records:
                whole = split_batches(records)
                if whole:
                    first = whole[0][1]
                    end = log.log_end_offset
                    if end == log.log_start_offset and first.base_offset < end <= first.last_offset:
                        # The leader's log start is inside this batch (DeleteRecords) and
                        # our log is empty: start it at the batch, as Kafka's follower does.
                        log.truncate_fully_and_start_at(first.base_offset)
                    pos, last = whole[-1]
                    log.append_as_follower(memoryview(records)[: pos + last.size])
            part.update_follower_high_watermark(data.high_watermark)
            leader_start = data.log_start_offset
            if log.log_start_offset < leader_start <= log.high_watermark:
                log.maybe_increment_log_start_offset(leader_start)
            return
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = data.log_start_offset
            if leader_start > log.log_end_offset:
                logger.info(
                    "%s: %s is behind the leader's log start %d: starting over there",
                    self.name, tp, leader_start,
                )
                log.truncate_fully_and_start_at(leader_start)
            else:
                state.truncating = True
                state.to_leader_end = True
            return
        logger.info("%s: fetching %s: %s", self.name, tp, ErrorCode(error).name)
        self._delay(state)


class ReplicaFetcherManager:
    """The fetchers of every partition this broker follows. Owned by the event loop."""

    def __init__(
        self,
        broker_id: int,
        config: ReplicaFetcherConfig,
        endpoint: Endpoint,
        broker_epoch: Callable[[], int] = lambda: -1,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.endpoint = endpoint
        self.broker_epoch = broker_epoch
        self.quota = quota
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assignment: dict[TopicPartition, tuple[int, int]] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def has(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def add_partition(self, part: Partition) -> None:
        """Fetch `part` from its current leader at its current leader epoch."""
        tp = TopicPartition(part.topic, part.index)
        self.remove_partitions([tp])
        key = (part.leader_id, fetcher_id(tp, self.config.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                f"ReplicaFetcherThread-{key[1]}-{key[0]}",
                part.leader_id,
                self.broker_id,
                self.config,
                self.endpoint,
                self.broker_epoch,
                self.quota,
            )
            self.fetchers[key] = fetcher
        fetcher.add(part)
        self._assignment[tp] = key

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = self._assignment.pop(tp, None)
            if key is None:
                continue
            fetcher = self.fetchers[key]
            fetcher.remove(tp)
            if not fetcher.states:
                del self.fetchers[key]
                task = asyncio.get_running_loop().create_task(fetcher.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._assignment.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        for task in list(self._stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await task
