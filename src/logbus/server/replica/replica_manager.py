"""The replica manager: owns the partitions this broker hosts, applies the controller's
LeaderAndIsr and StopReplica decisions, appends produced batches as leader, and reads for
fetches, parking requests in the purgatory until they can complete.

Replication (started by `start_replication`): partitions this broker follows are fetched
by the `ReplicaFetcherManager`; as leader it records each follower's fetches, moves the
high watermark, and proposes ISR changes to the controller through the
`AlterPartitionManager` (shrinks are checked every replica.lag.time.max.ms / 2).

Owned by the broker's event loop thread; not safe to share between threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from logbus.controller.cluster_metadata import TopicMetadata
from logbus.protocol import ErrorCode
from logbus.server.purgatory import Purgatory
from logbus.server.quotas.replication import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    UNLIMITED,
    ReplicationQuota,
)
from logbus.server.replica.alter_log_dirs import ReplicaAlterLogDirsManager
from logbus.server.replica.alter_partition_manager import (
    AlterPartitionManager,
    ControllerEndpoint,
)
from logbus.server.replica.partition import (
    AppendResult,
    Partition,
    PartitionError,
    ReplicaState,
)
from logbus.server.replica.replica_fetcher import ReplicaFetcherConfig, ReplicaFetcherManager
from logbus.storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from logbus.storage.file_slice import FileSlice
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager
from logbus.storage.transaction_index import AbortedTxn
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import MetadataCache
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.metrics.broker_metrics import BrokerMetrics

logger = logging.getLogger(__name__)

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
    last_fetched_epoch: int = -1  # a follower's (Fetch v12+): checked for divergence
    log_start_offset: int = -1  # a follower's own


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    # (epoch, end offset) where a follower's log diverged from the leader's (Fetch v12+)
    diverging_epoch: tuple[int, int] | None = None
    # read_committed: the aborted transactions with records in the range read
    aborted_transactions: list[AbortedTxn] | None = None

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
        # Replicas moving between this broker's log dirs (AlterReplicaLogDirs).
        self.log_dir_mover = ReplicaAlterLogDirsManager(log_manager, self.partitions.get)
        # Partitions whose log dir failed (Kafka's HostedPartition.Offline): answered
        # KAFKA_STORAGE_ERROR until the broker restarts without that dir.
        self.offline_partitions: set[TopicPartition] = set()
        # Told (on the event loop) of each dir that went offline, after its partitions.
        self.log_dir_failure_listeners: list[Callable[[Path], None]] = []
        self.purgatory = Purgatory()
        self.fetchers: ReplicaFetcherManager | None = None
        # Replication throttles (set by start_replication; off on a stand-alone broker).
        self.leader_quota: ReplicationQuota | None = None
        self.follower_quota: ReplicationQuota | None = None
        self.alter_partition: AlterPartitionManager | None = None
        self.replica_lag_time_max_ms = 30_000
        self._isr_task: asyncio.Task[None] | None = None
        # Called on the event loop with (partition, producer id, committed) after a
        # transaction marker was appended to a partition as leader (the group coordinator
        # materialises or drops pending transactional offset commits).
        self.txn_completion_listeners: list[Callable[[TopicPartition, int, bool], None]] = []
        # The broker's metrics (metrics.listener set), else None: nothing is recorded.
        self.metrics: BrokerMetrics | None = None

    # --- replication ----------------------------------------------------------------------

    def update_replication_rates(self, config: BrokerConfig) -> None:
        """leader/follower.replication.throttled.rate and
        replica.alter.log.dirs.io.max.bytes.per.second (dynamic broker configs)."""
        log_dir_rate = config.get("replica.alter.log.dirs.io.max.bytes.per.second")
        self.log_dir_mover.throttle_bytes_per_second = (
            float(log_dir_rate) if isinstance(log_dir_rate, int) and log_dir_rate < UNLIMITED
            else None
        )  # fmt: skip
        for quota, name in (
            (self.leader_quota, "leader.replication.throttled.rate"),
            (self.follower_quota, "follower.replication.throttled.rate"),
        ):
            value = config.get(name)
            if quota is not None:
                quota.update_rate(value if isinstance(value, int) else UNLIMITED)

    def start_replication(
        self,
        config: BrokerConfig,
        metadata_cache: MetadataCache,
        broker_epoch: Callable[[], int] = lambda: -1,
        controller: ControllerEndpoint | None = None,
    ) -> None:
        """Start following and leading with replicas (call on the event loop): partitions
        led elsewhere are fetched from their leader (addresses from `metadata_cache`), ISR
        changes go to the controller it names, shrinks are checked every
        replica.lag.time.max.ms / 2. Brokers are reached on inter.broker.listener.name.
        `broker_epoch` is this broker's registration epoch; `controller`, where ISR
        changes go when it is not the broker the cache names (a KRaft quorum's leader)."""
        listener = config.inter_broker_listener_name

        def endpoint(broker_id: int) -> tuple[str, int] | None:
            """A broker's inter-broker listener (its client one if it has no such)."""
            info = metadata_cache.brokers.get(broker_id)
            if info is None:
                return None
            found = info.endpoint(listener)
            return found.host, found.port

        def cached_controller() -> tuple[int, str, int] | None:
            controller_id = metadata_cache.controller_id
            found = endpoint(controller_id)
            return None if found is None else (controller_id, *found)

        def topic_configs(name: str) -> dict[str, str] | None:
            topic = metadata_cache.topics.get(name)
            return None if topic is None else topic.configs

        self.leader_quota = ReplicationQuota(self.broker_id, LEADER_REPLICAS, topic_configs)
        self.follower_quota = ReplicationQuota(self.broker_id, FOLLOWER_REPLICAS, topic_configs)
        self.update_replication_rates(config)
        fetcher_config = ReplicaFetcherConfig.from_broker_config(config)
        self.fetchers = ReplicaFetcherManager(
            self.broker_id, fetcher_config, endpoint, broker_epoch, self.follower_quota
        )
        self.alter_partition = AlterPartitionManager(
            self.broker_id,
            controller or cached_controller,
            broker_epoch,
            retry_backoff_ms=min(fetcher_config.fetch_backoff_ms, 1000),
            request_timeout_ms=config.controller_socket_timeout_ms,
            security=fetcher_config.security,
        )
        self.replica_lag_time_max_ms = lag = config.replica_lag_time_max_ms
        for part in self.partitions.values():
            part.replica_lag_time_max_ms = lag
            if not part.is_leader and part.leader_id >= 0:
                self.fetchers.add_partition(part)
        self._isr_task = asyncio.get_running_loop().create_task(
            self._check_isr_every(max(lag // 2, 10) / 1000)
        )

    async def stop_replication(self) -> None:
        await self.log_dir_mover.stop()
        if self._isr_task is not None:
            self._isr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_task
            self._isr_task = None
        if self.fetchers is not None:
            await self.fetchers.shutdown()
        if self.alter_partition is not None:
            await self.alter_partition.shutdown()

    async def _check_isr_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.maybe_shrink_isr()
            except Exception:
                logger.exception("ISR check failed")

    def maybe_shrink_isr(self, now_ms: int | None = None) -> None:
        """Propose dropping the followers not caught up for replica.lag.time.max.ms."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for part in self.partitions.values():
            if part.remote and part.is_leader:
                proposed = part.isr_to_shrink(now)
                if proposed is not None:
                    self._propose_isr(part, proposed)

    def _propose_isr(self, part: Partition, proposed: tuple[int, ...]) -> None:
        alter = self.alter_partition
        if alter is None:
            return
        part.begin_isr_change(proposed)
        if part.shrinking_below_min_isr:
            # acks=all waiters cannot complete with these followers: answer them now
            self.purgatory.notify((part.topic, part.index))

        def done(
            error: ErrorCode, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int
        ) -> None:
            before = part.isr
            part.complete_isr_change(
                proposed, error, leader_epoch, isr, partition_epoch, int(time.time() * 1000)
            )
            metrics = self.metrics
            if metrics is not None and part.isr is not before:
                if len(part.isr) < len(before):
                    metrics.isr_shrinks += 1
                elif len(part.isr) > len(before):
                    metrics.isr_expands += 1
            # acks=all waiters re-check (the ISR size, the high watermark)
            self.purgatory.notify((part.topic, part.index))

        if not alter.submit(part, proposed, done):
            part.pending_isr = None

    # --- controller decisions -------------------------------------------------------------

    def apply_leader_and_isr(self, topic: TopicMetadata, partitions: list[int]) -> None:
        config = self.log_config_for(topic)
        now_ms = int(time.time() * 1000)
        for p in partitions:
            state = topic.partitions[p]
            tp = TopicPartition(topic.name, p)
            part = self.partitions.get(tp)
            if part is None:
                log = self.log_manager.get_or_create_log(topic.name, p, config, topic.topic_id)
                part = Partition(topic.name, p, topic.topic_id, log, self.broker_id)
                part.replica_lag_time_max_ms = self.replica_lag_time_max_ms
                self.partitions[tp] = part
            elif part.is_stale(state.leader_epoch, state.version):
                logger.info(
                    "ignoring LeaderAndIsr of %s-%d at leader epoch %d (partition epoch %d): "
                    "it has %d (%d)", topic.name, p, state.leader_epoch, state.version,
                    part.leader_epoch, part.partition_epoch,
                )
                continue
            if state.leader == self.broker_id:
                part.make_leader(
                    state.leader_epoch, state.isr, state.replicas, state.version, now_ms
                )
                if self.fetchers is not None:
                    self.fetchers.remove_partitions([tp])
            else:
                changed = part.make_follower(
                    state.leader, state.leader_epoch, state.isr, state.replicas, state.version
                )
                if self.fetchers is not None and (changed or not self.fetchers.has(tp)):
                    self.fetchers.remove_partitions([tp])
                    if state.leader >= 0:
                        self.fetchers.add_partition(part)
            self.purgatory.notify((topic.name, p))

    def apply_stop_replica(self, topic: str, partitions: list[int], delete: bool) -> None:
        if self.fetchers is not None:
            self.fetchers.remove_partitions([TopicPartition(topic, p) for p in partitions])
        for p in partitions:
            self.partitions.pop(TopicPartition(topic, p), None)
            self.purgatory.notify((topic, p))
        if delete:
            # Also logs that never got their partition started (their creation failed).
            self.log_manager.delete_logs(topic, partitions)
            if self.metrics is not None and not any(t == topic for t, _p in self.partitions):
                self.metrics.topics.remove(topic)  # a deleted topic's series go, as Kafka's

    def handle_log_dir_failure(self, path: Path) -> list[TopicPartition]:
        """Kafka's `handleLogDirFailure`: the failed dir's partitions stop being served
        here (fetchers stopped, requests parked on them answered), the listeners are told
        (the broker's notice to the controller). Call on the event loop."""
        gone = self.log_manager.mark_dir_offline(path)
        if self.fetchers is not None:
            self.fetchers.remove_partitions(gone)
        for tp in gone:
            self.partitions.pop(tp, None)
            self.offline_partitions.add(tp)
            self.purgatory.notify((tp.topic, tp.partition))
        for listener in self.log_dir_failure_listeners:
            listener(path)
        return gone

    def _storage_failure(self, part: Partition, exc: Exception) -> None:
        """An I/O error on a partition's log: its dir is failing."""
        path = self.log_manager.dir_of_log(part.log)
        if path is not None:
            self.log_manager.dir_failed(path, exc)

    def step_aside(self, part: Partition) -> None:
        """Stop leading `part` (see `Partition.step_aside`); the requests parked on it
        complete now with NOT_LEADER_OR_FOLLOWER."""
        part.step_aside()
        self.purgatory.notify((part.topic, part.index))

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
        *,
        from_client: bool = True,
        on_appended: Callable[[TopicPartition], None] | None = None,
    ) -> list[ProduceResult]:
        """Append each partition's batches as leader; for acks=all wait until the high
        watermark passes them (or the timeout fires: REQUEST_TIMED_OUT).

        `from_client=False` appends as the coordinator (transaction markers);
        `on_appended` is called for each partition right after its batches are in the log
        (before any acks wait)."""
        now_ms = int(time.time() * 1000)
        results: list[ProduceResult] = []
        # (index in results, partition, leader epoch of the append, last offset)
        waiting: list[tuple[int, Partition, int, int]] = []
        turn_start = time.monotonic()
        stats = self.metrics.topics if self.metrics is not None and from_client else None
        for topic, index, records in entries:
            if time.monotonic() - turn_start > APPEND_TURN_S:
                await asyncio.sleep(0)
                turn_start = time.monotonic()
            result, part, appended = self._append_one(
                topic, index, records, acks, now_ms, known_partition, from_client
            )
            results.append(result)
            if part is None or appended is None or records is None:
                continue
            if on_appended is not None:
                on_appended(TopicPartition(topic, index))
            if stats is not None:
                stats.appended(topic, appended.record_count, len(records))
            if acks == -1:
                waiting.append((len(results) - 1, part, part.leader_epoch, appended.last_offset))
        if stats is not None:
            for (topic, _index, _records), result in zip(entries, results, strict=True):
                if result.error != ErrorCode.NONE:
                    stats.produce_failed(topic)
        if waiting:
            await self._await_replication(results, waiting, timeout_ms)
        return results

    def _append_one(
        self,
        topic: str,
        index: int,
        records: memoryview | None,
        acks: int,
        now_ms: int,
        known_partition: Callable[[str, int], bool],
        from_client: bool,
    ) -> tuple[ProduceResult, Partition | None, AppendResult | None]:
        """One partition's append as leader: its result, and the partition and what was
        appended when it succeeded (None, None otherwise)."""
        part = self.partitions.get(TopicPartition(topic, index))
        if part is None:
            if TopicPartition(topic, index) in self.offline_partitions:
                return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR), None, None
            error = (ErrorCode.NOT_LEADER_OR_FOLLOWER if known_partition(topic, index)
                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return ProduceResult(error), None, None
        if records is None:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="null record set"), None, None
        try:
            appended = part.append_as_leader(records, acks, now_ms, from_client=from_client)
        except PartitionError as exc:
            return ProduceResult(exc.error, message=str(exc)), None, None
        except (StorageError, OSError) as exc:
            if isinstance(exc, OSError | KafkaStorageError):
                self._storage_failure(part, exc)
                return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc)), None, None
            return ProduceResult(
                ErrorCode(exc.error_code),
                message=str(exc),
                log_start_offset=part.log.log_start_offset,
                record_errors=getattr(exc, "record_errors", []),
            ), None, None
        self.purgatory.notify((topic, index))
        result = ProduceResult(
            ErrorCode.NONE,
            appended.base_offset,
            appended.log_append_time,
            appended.log_start_offset,
        )
        return result, part, appended

    async def _await_replication(
        self,
        results: list[ProduceResult],
        waiting: list[tuple[int, Partition, int, int]],
        timeout_ms: int,
    ) -> None:
        """acks=all: wait until the high watermark passes each appended partition's last
        offset (or its leadership or the ISR fails it, or the timeout fires:
        REQUEST_TIMED_OUT); a failed partition's result is replaced by its error."""
        outcomes: dict[int, ErrorCode] = {}

        def replicated() -> bool:
            for i, part, epoch, last_offset in waiting:
                if i not in outcomes:
                    current = self.partitions.get(TopicPartition(part.topic, part.index))
                    outcome = (
                        part.replication_outcome(epoch, last_offset)
                        if current is part
                        else ErrorCode.NOT_LEADER_OR_FOLLOWER
                    )
                    if outcome is not None:
                        outcomes[i] = outcome
            return len(outcomes) == len(waiting)

        if not replicated():
            metrics = self.metrics
            if metrics is not None:
                metrics.delayed_produce += 1
            try:
                await self.purgatory.wait_until(
                    replicated,
                    [(p.topic, p.index) for _i, p, _e, _o in waiting],
                    timeout_ms,
                    known_unmet=True,
                )
            finally:
                if metrics is not None:
                    metrics.delayed_produce -= 1
        for i, _part, _epoch, _offset in waiting:
            error = outcomes.get(i, ErrorCode.REQUEST_TIMED_OUT)
            if error != ErrorCode.NONE:
                results[i] = ProduceResult(error, message=None)

    # --- fetch ----------------------------------------------------------------------------

    def read(
        self,
        request: FetchRequestPartition,
        max_bytes: int,
        min_one_message: bool,
        read_committed: bool,
        replica_id: int = -1,
        replica_epoch: int = -1,
    ) -> FetchResult:
        """One partition of a fetch. Consumers (replica_id < 0) read below the high
        watermark; a follower reads up to the log end, and its fetch offset is recorded
        as its log end offset (which may move the high watermark and grow the ISR)."""
        tp = TopicPartition(request.topic, request.partition)
        part = self.partitions.get(tp)
        if part is None:
            if tp in self.offline_partitions:
                return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR)
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            part.ensure_leader()
            part.check_leader_epoch(request.current_leader_epoch)
            follower = (
                part.follower(replica_id, request.current_leader_epoch >= 0)
                if replica_id >= 0
                else None
            )
        except PartitionError as exc:
            return FetchResult(exc.error)
        log = part.log
        if follower is not None:
            return self._read_for_follower(part, follower, request, max_bytes, min_one_message,
                                           replica_epoch)
        high_watermark = part.high_watermark
        last_stable = log.last_stable_offset
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
        aborted = None
        if read_committed and info.records is not None:
            # Kafka's bound: the end of the segment the read came from (a read never spans
            # two), so a reader far behind gets the transactions of what it reads, not of
            # the whole log up to the LSO; an empty read costs no index scan.
            upper = min(last_stable, log.segment_end_offset(info.segment_base_offset))
            aborted = log.collect_aborted_transactions(request.fetch_offset, upper)
        return FetchResult(
            ErrorCode.NONE, high_watermark, last_stable, log.log_start_offset, info.records,
            aborted_transactions=aborted,
        )

    def _read_for_follower(
        self,
        part: Partition,
        follower: ReplicaState,
        request: FetchRequestPartition,
        max_bytes: int,
        min_one_message: bool,
        replica_epoch: int,
    ) -> FetchResult:
        log = part.log
        offset = request.fetch_offset
        last_fetched = request.last_fetched_epoch
        if last_fetched >= 0 and not (
            # the leader's latest epoch ends at its log end: no divergence below it
            last_fetched == log.leader_epoch_cache.latest_epoch and offset <= log.log_end_offset
        ):
            # The follower's last epoch must end at or after its fetch offset here: if not,
            # its log diverged and it truncates first (KIP-595's check, as Kafka's leader).
            epoch, end = part.last_offset_for_leader_epoch(-1, request.last_fetched_epoch)
            if epoch >= 0 and (epoch < request.last_fetched_epoch or end < offset):
                hw = part.high_watermark
                return FetchResult(
                    ErrorCode.NONE, hw, hw, log.log_start_offset, None, (epoch, end)
                )
        leader_end = log.log_end_offset
        if self._leader_throttled(part, follower.broker_id):
            max_bytes, min_one_message = 0, False
        try:
            info = log.read(offset, min(max_bytes, request.max_bytes), None, min_one_message)
        except OffsetOutOfRangeError:
            hw = part.high_watermark
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, hw, log.log_start_offset)
        except StorageError as exc:
            hw = part.high_watermark
            return FetchResult(ErrorCode(exc.error_code), hw, hw, log.log_start_offset)
        now_ms = int(time.time() * 1000)
        if part.update_follower_fetch_state(
            follower, offset, request.log_start_offset, now_ms, leader_end, replica_epoch
        ):
            self.purgatory.notify((part.topic, part.index))
        expanded = part.isr_to_expand(follower.broker_id)
        if expanded is not None:
            self._propose_isr(part, expanded)
        hw = part.high_watermark
        return FetchResult(ErrorCode.NONE, hw, hw, log.log_start_offset, info.records)

    def _leader_throttled(self, part: Partition, follower_id: int) -> bool:
        """Whether this leader holds back the bytes for a follower out of the ISR of a
        throttled replica (Kafka's `shouldLeaderThrottle`)."""
        quota = self.leader_quota
        return (
            quota is not None
            and quota.enabled
            and follower_id not in part.isr
            and quota.is_throttled(TopicPartition(part.topic, part.index))
            and quota.is_exceeded()
        )

    def _throttled_wait_ms(self, requests: list[FetchRequestPartition], max_wait_ms: int) -> int:
        """A follower's fetch that the leader throttle held back waits only until the
        throttle lets bytes through again (not the whole max_wait_ms)."""
        quota = self.leader_quota
        if quota is None or not quota.enabled or not quota.is_exceeded():
            return max_wait_ms
        if not any(quota.is_throttled(TopicPartition(r.topic, r.partition)) for r in requests):
            return max_wait_ms
        return min(max_wait_ms, max(1, int(quota.delay() * 1000)))

    def _fetch_state(
        self, requests: list[FetchRequestPartition], read_committed: bool, replica_id: int
    ) -> list[tuple[object, ...]]:
        """What a fetch's read depends on, per partition: the partition and log objects, the
        leadership, the log start, and the offset a read stops at (the log end for a
        follower, the high watermark or the last stable offset for a consumer). Equal
        states read the same records and answer the same errors."""
        state: list[tuple[object, ...]] = []
        for request in requests:
            part = self.partitions.get(TopicPartition(request.topic, request.partition))
            if part is None:
                state.append((None,))
                continue
            log = part.log
            if replica_id >= 0:
                end = log.log_end_offset
            elif read_committed:
                end = log.last_stable_offset
            else:
                end = part.high_watermark
            state.append(
                (part, log, part.is_leader, part.leader_epoch, log.log_start_offset, end)
            )
        return state

    def read_all(
        self,
        requests: list[FetchRequestPartition],
        max_bytes: int,
        read_committed: bool,
        replica_id: int = -1,
        replica_epoch: int = -1,
    ) -> list[FetchResult]:
        """Read each partition within the response limit; the first non-empty partition
        may exceed the limits by one batch so that consumers always progress (KIP-74)."""
        results = []
        remaining = max_bytes
        first = True
        for request in requests:
            result = self.read(
                request, max(0, remaining), first, read_committed, replica_id, replica_epoch
            )
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
        replica_id: int = -1,
        replica_epoch: int = -1,
    ) -> list[FetchResult]:
        """Read now; if fewer than `min_bytes` are available and nothing failed, wait for
        appends to the requested partitions until `max_wait_ms` passes. `replica_id` >= 0
        is a follower's fetch."""
        results = self.read_all(requests, max_bytes, read_committed, replica_id, replica_epoch)
        if replica_id >= 0:
            max_wait_ms = self._throttled_wait_ms(requests, max_wait_ms)
        read_at = self._fetch_state(requests, read_committed, replica_id)

        def satisfied() -> bool:
            # A notify wakes every fetch watching the partition (an append, a high
            # watermark moved by another follower): read again only when what this fetch
            # would read changed since its last read.
            nonlocal results, read_at
            now = self._fetch_state(requests, read_committed, replica_id)
            if now == read_at:
                return False
            read_at = now
            results = self.read_all(requests, max_bytes, read_committed, replica_id, replica_epoch)
            return sum(r.size for r in results) >= min_bytes or _any_answer(results)

        if (
            max_wait_ms > 0
            and sum(r.size for r in results) < min_bytes
            and not _any_answer(results)
            and requests
        ):
            metrics = self.metrics
            if metrics is not None:
                metrics.delayed_fetch += 1
            try:
                answered = await self.purgatory.wait_until(
                    satisfied,
                    [(r.topic, r.partition) for r in requests],
                    max_wait_ms,
                    known_unmet=True,
                )
                if not answered:  # the wait ended: read once more, for the marks of now
                    results = self.read_all(
                        requests, max_bytes, read_committed, replica_id, replica_epoch
                    )
            finally:
                if metrics is not None:
                    metrics.delayed_fetch -= 1
        quota = self.leader_quota
        if replica_id >= 0 and quota is not None and quota.enabled:
            for request, result in zip(requests, results, strict=True):
                if result.size and quota.is_throttled(
                    TopicPartition(request.topic, request.partition)
                ):
                    quota.record(result.size)
        if replica_id < 0 and self.metrics is not None:
            stats = self.metrics.topics
            for request, result in zip(requests, results, strict=True):
                stats.fetched(request.topic, result.size, result.error != ErrorCode.NONE)
        return results


def _any_answer(results: list[FetchResult]) -> bool:
    """Whether a partition has an answer that must not wait: an error or a divergence."""
    return any(r.error != ErrorCode.NONE or r.diverging_epoch is not None for r in results)
