"""The group coordinator runtime: runs the pure core (`shard.apply`) of every
`__consumer_offsets` partition this broker leads, writes its records to the partition,
answers requests once the records are committed, and runs its timers.

The entry point is `GroupCoordinatorRuntime`, created by the broker with a
`PartitionWriter` (its only way to the log) and told about leadership changes of
`__consumer_offsets` partitions. It follows
`docs/design/group-coordinator.md` ("What the runtime does"). Owned by the broker's
event loop; not thread-safe. Every `apply` of one partition runs synchronously together
with the append of its records, so the records of one partition are written in the order
their events were applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from logbus.coordinator.group import events as ev
from logbus.coordinator.group.offsets import complete_transaction
from logbus.coordinator.group.offsets_topic import OFFSETS_TOPIC, offsets_partition_for
from logbus.coordinator.group.records import GROUP_METADATA_KEY_VERSION
from logbus.coordinator.group.shard import apply, load_complete, replay, replay_transactional
from logbus.coordinator.group.state import (
    Cancel,
    Group,
    GroupConfig,
    GroupsState,
    Result,
    TimerKey,
    Token,
)
from logbus.coordinator.partition_writer import PartitionWriteError, PartitionWriter
from logbus.protocol import ErrorCode
from logbus.protocol.messages.list_groups_response import ListGroupsResponse
from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.control import decode_control_key
from logbus.records.reader import iter_record_set
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20

R = TypeVar("R")


class CoordinatorError(Exception):
    """A request this broker cannot coordinate now: NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS, or COORDINATOR_NOT_AVAILABLE after a failed write. The
    API handler answers it in its version's shape."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Shard:
    """The coordinator state of one `__consumer_offsets` partition led here."""

    partition: int
    leader_epoch: int
    state: GroupsState = field(default_factory=GroupsState)
    loading: bool = True
    timers: dict[TimerKey, asyncio.TimerHandle] = field(default_factory=dict)
    parked: set[asyncio.Future[Any]] = field(default_factory=set)
    """Futures handed to `apply` as tokens and not answered yet."""


class GroupCoordinatorRuntime:
    """Owns one `_Shard` per led `__consumer_offsets` partition, from `start()` to `stop()`."""

    def __init__(
        self,
        writer: PartitionWriter,
        config: GroupConfig,
        *,
        num_partitions: Callable[[], int],
        retention_check_interval_ms: int = 600_000,
        commit_timeout_ms: int = 5_000,
    ) -> None:
        self.writer = writer
        self.config = config
        self.num_partitions = num_partitions
        self.retention_check_interval_ms = retention_check_interval_ms
        self.commit_timeout_ms = commit_timeout_ms
        self.shards: dict[int, _Shard] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._expiry: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._expiry = asyncio.get_running_loop().create_task(self._expire_offsets_forever())

    async def stop(self) -> None:
        for partition in list(self.shards):
            self.unload(partition)
        tasks = [*self._tasks, *([self._expiry] if self._expiry else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- leadership -------------------------------------------------------------------------

    def on_leadership(self, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """LeaderAndIsr for `__consumer_offsets`-`partition`: load or unload its groups."""
        shard = self.shards.get(partition)
        if not is_leader:
            if shard is not None:
                self.unload(partition)
            return
        if shard is not None and shard.leader_epoch == leader_epoch:
            return
        if shard is not None:
            self.unload(partition)
        shard = self.shards[partition] = _Shard(partition, leader_epoch)
        self._spawn(self._load(shard))

    def unload(self, partition: int) -> None:
        """Drop a partition's groups and timers; parked requests get NOT_COORDINATOR."""
        shard = self.shards.pop(partition, None)
        if shard is None:
            return
        for handle in shard.timers.values():
            handle.cancel()
        shard.timers.clear()
        for fut in shard.parked:
            if not fut.done():
                fut.set_exception(CoordinatorError(ErrorCode.NOT_COORDINATOR))
        shard.parked.clear()

    async def _load(self, shard: _Shard) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, shard.partition)
        started = time.monotonic()
        count = 0
        try:
            offset = self.writer.log_start_offset(tp)
            while self.shards.get(shard.partition) is shard:
                data = self.writer.read_for_load(tp, offset, LOAD_CHUNK_BYTES)
                if not data:
                    break
                for header, batch_records in iter_record_set(data, on_unreadable=_skip_unreadable):
                    offset = header.last_offset + 1
                    if header.is_control:
                        for record in batch_records:
                            key = decode_control_key(record.key)
                            if key.is_transaction_marker:
                                complete_transaction(
                                    shard.state, header.producer_id, key.is_commit
                                )
                        continue
                    for record in batch_records:
                        if record.key is None:
                            continue
                        if header.is_transactional:
                            replay_transactional(
                                shard.state, header.producer_id, record.key, record.value
                            )
                        else:
                            replay(shard.state, record.key, record.value)
                        count += 1
                await asyncio.sleep(0)  # let other partitions and requests run
        except PartitionWriteError as exc:  # no longer hosted here, or the log failed
            log.warning("loading %s-%d stopped: %s", OFFSETS_TOPIC, shard.partition, exc)
            if self.shards.get(shard.partition) is shard:
                self.unload(shard.partition)
            return
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, shard.partition)
            if self.shards.get(shard.partition) is shard:
                self.unload(shard.partition)
            return
        if self.shards.get(shard.partition) is not shard:
            return
        shard.loading = False
        self._handle_result(shard, load_complete(shard.state, now_ms(), self.config))
        log.info(
            "loaded %d groups from %d records of %s-%d in %.0f ms",
            len(shard.state.groups),
            count,
            OFFSETS_TOPIC,
            shard.partition,
            (time.monotonic() - started) * 1000,
        )

    # --- requests ---------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.num_partitions())

    def _shard_for(self, group_id: str) -> _Shard:
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if shard.loading:
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def is_loading(self, group_id: str) -> bool:
        shard = self.shards.get(self.partition_for(group_id))
        return shard is not None and shard.loading

    async def submit(
        self, group_id: str, make_event: Callable[[Token, int], ev.Answered[R]]
    ) -> R:
        """Apply the event `make_event(token, now_ms)` to the group's partition and wait
        for its response (possibly parked until a rebalance step). Raises
        `CoordinatorError` when the group is not coordinated here or the write failed."""
        shard = self._shard_for(group_id)
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        shard.parked.add(fut)
        fut.add_done_callback(shard.parked.discard)
        try:
            # Every Answered is a request event (the Event union); `apply` answers it with an R.
            self._run(shard, cast(ev.Event, make_event(fut, now_ms())), group_id)
        except BaseException:
            fut.cancel()  # nobody will wait for it: not failed again at shutdown
            raise
        return await fut

    async def list_groups(
        self, make_event: Callable[[Token, int], ev.ListGroups]
    ) -> list[ListGroupsResponse]:
        """ListGroups on every partition led here. Raises COORDINATOR_LOAD_IN_PROGRESS while
        any of them loads."""
        if any(s.loading for s in self.shards.values()):
            raise CoordinatorError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        bodies = []
        for shard in list(self.shards.values()):
            fut: asyncio.Future[ListGroupsResponse] = asyncio.get_running_loop().create_future()
            self._run(shard, make_event(fut, now_ms()), None)
            bodies.append(await fut)
        return bodies

    def on_txn_completion(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """A transaction marker appended as leader (ReplicaManager's completion listener):
        pending TxnOffsetCommits of the producer on that `__consumer_offsets` partition are
        materialised or dropped. A partition still loading reads the marker itself."""
        if tp.topic != OFFSETS_TOPIC:
            return
        shard = self.shards.get(tp.partition)
        if shard is None or shard.loading:
            return
        self._run(shard, ev.TxnCompletion(now_ms(), producer_id, committed), None)

    def _run(self, shard: _Shard, event: ev.Event, group_id: str | None) -> None:
        """apply + append, synchronously; the wait for replication runs in a task."""
        group = shard.state.groups.get(group_id) if group_id is not None else None
        snapshot = _snapshot(group) if group is not None else None
        consumer_group = (
            shard.state.consumer_groups.get(group_id) if group_id is not None else None
        )
        consumer_snapshot = copy.deepcopy(consumer_group) if consumer_group is not None else None
        result = apply(shard.state, event, self.config)
        if not self._handle_result(shard, result) and group_id is not None:
            # Kafka reverts the group on a failed write; restore the copy taken before.
            if snapshot is not None:
                shard.state.groups[group_id] = snapshot
            else:
                shard.state.groups.pop(group_id, None)
            if consumer_snapshot is not None:
                shard.state.consumer_groups[group_id] = consumer_snapshot
            else:
                shard.state.consumer_groups.pop(group_id, None)
        elif group_id is not None:
            _log_transition(group_id, snapshot, shard.state.groups.get(group_id), event)

    def _append(self, shard: _Shard, result: Result) -> tuple[ErrorCode, int]:
        timestamp = now_ms()
        new_records = [NewRecord(k, v, (), timestamp) for k, v in result.records]
        if result.producer_id >= 0:  # a TxnOffsetCommit: one transactional batch
            batch = build_batch(
                new_records,
                producer_id=result.producer_id,
                producer_epoch=result.producer_epoch,
                base_sequence=0,
                is_transactional=True,
            )
        else:
            batch = build_batch(new_records)
        try:
            last_offset = self.writer.append(
                TopicPartition(OFFSETS_TOPIC, shard.partition), batch, timestamp
            )
        except PartitionWriteError as exc:
            log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, shard.partition, exc)
            if exc.error in _TOO_LARGE:
                return _too_large_error(result), -1
            return _coordinator_error(exc.error), -1
        return ErrorCode.NONE, last_offset

    async def _respond_when_committed(
        self, shard: _Shard, result: Result, last_offset: int
    ) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, shard.partition)
        try:
            committed = await self.writer.wait_committed(tp, last_offset, self.commit_timeout_ms)
        except PartitionWriteError as exc:
            self._fail(result, _coordinator_error(exc.error))
            return
        if not committed:
            self._fail(result, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        self._answer(result)

    def _handle_result(self, shard: _Shard, result: Result) -> bool:
        """Write the result's records, apply its timers and answer (once the records are
        committed). False when the write failed: every token got the mapped error."""
        if not result.records:
            self._apply_timers(shard, result)
            self._answer(result)
            return True
        error, last_offset = self._append(shard, result)
        if error is not ErrorCode.NONE:
            self._fail(result, error)
            return False
        self._apply_timers(shard, result)
        self._spawn(self._respond_when_committed(shard, result, last_offset))
        return True

    @staticmethod
    def _answer(result: Result) -> None:
        for token, body in result.responses:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(body)

    @staticmethod
    def _fail(result: Result, error: ErrorCode) -> None:
        for token, _body in result.responses:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_exception(CoordinatorError(error))

    # --- timers ----------------------------------------------------------------------------

    def _apply_timers(self, shard: _Shard, result: Result) -> None:
        for change in result.timers:
            old = shard.timers.pop(change.key, None)
            if old is not None:
                old.cancel()
            if isinstance(change, Cancel):
                continue
            self._arm(shard, change.key, change.event, change.deadline_ms)

    def _arm(self, shard: _Shard, key: TimerKey, event: ev.TimerEvent, deadline_ms: int) -> None:
        delay = max(0.0, (deadline_ms - now_ms()) / 1000)
        shard.timers[key] = asyncio.get_running_loop().call_later(
            delay, self._fire, shard, key, event, deadline_ms
        )

    def _fire(
        self, shard: _Shard, key: TimerKey, event: ev.TimerEvent, deadline_ms: int
    ) -> None:
        if self.shards.get(shard.partition) is not shard:
            return
        now = now_ms()
        if now < deadline_ms:
            # The loop's timers may fire a few ms early (libuv measures them from the time
            # cached at the start of an iteration), and the state machine ignores a timer
            # before its deadline as a stale one: it would never fire again, and a group
            # waiting on it (an initial rebalance delay, a join) would wait forever.
            self._arm(shard, key, event, deadline_ms)
            return
        shard.timers.pop(key, None)
        group_id = event.group_id
        try:
            self._run(shard, event.at(now), group_id)
        except Exception:
            log.exception("group coordinator timer %s failed", key)

    async def _expire_offsets_forever(self) -> None:
        interval = max(self.retention_check_interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            for shard in list(self.shards.values()):
                if shard.loading:
                    continue
                try:
                    self._run(shard, ev.ExpireOffsets(now_ms()), None)
                except Exception:
                    log.exception(
                        "offset expiration on %s-%d failed", OFFSETS_TOPIC, shard.partition
                    )


def new_member_uuid() -> str:
    return str(uuid.uuid4())


# Append errors of a write too large for the offsets topic's max.message.bytes: not a
# coordinator that moved, so not worth a retry.
_TOO_LARGE = (
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_FETCH_SIZE,
)


def _too_large_error(result: Result) -> ErrorCode:
    """Kafka's answer to a write too large to append: INVALID_COMMIT_OFFSET_SIZE for an
    offset commit (the client raises it to its user; COORDINATOR_NOT_AVAILABLE made it
    retry the same commit for ever), UNKNOWN_SERVER_ERROR for group metadata."""
    if all(_key_version(key) < GROUP_METADATA_KEY_VERSION for key, _value in result.records):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _key_version(key: bytes) -> int:
    return int.from_bytes(key[:2], "big", signed=True)


def _coordinator_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed append to the coordinator's answer."""
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        return ErrorCode.NOT_COORDINATOR
    if error in _PRODUCER_ERRORS:  # a TxnOffsetCommit's producer, fenced or out of state
        return error
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


_PRODUCER_ERRORS = (
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.INVALID_TXN_STATE,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
)


def _log_transition(
    group_id: str, before: Group | None, after: Group | None, event: ev.Event
) -> None:
    """An INFO line when a group changes state or generation, as Kafka's coordinator logs
    its rebalances (what operators read when a group does not settle)."""
    old = (before.state, before.generation_id) if before is not None else None
    new = (after.state, after.generation_id) if after is not None else None
    if old == new:
        return
    old_text = f"{old[0].value} (generation {old[1]})" if old is not None else "nothing"
    new_text = (
        f"{new[0].value} (generation {new[1]}, {len(after.members)} members)"
        if new is not None and after is not None
        else "removed"
    )
    log.info("group %s: %s -> %s on %s", group_id, old_text, new_text, type(event).__name__)


def _snapshot(group: Group) -> Group:
    """A copy of a group deep enough to restore it after a failed write (members are
    copied one level: their fields are immutable values and tokens)."""
    copied = copy.copy(group)
    copied.members = {k: copy.copy(m) for k, m in group.members.items()}
    copied.pending_members = dict(group.pending_members)
    copied.static_members = dict(group.static_members)
    copied.offsets = dict(group.offsets)
    copied.pending_txn_offsets = {
        pid: dict(pending) for pid, pending in group.pending_txn_offsets.items()
    }
    return copied


def _skip_unreadable(header: BatchHeader, error: InvalidBatch) -> None:
    """Stored data left unreadable (a disk fault, an older broker) is skipped, not fatal."""
    log.warning("skipped unreadable batch at offset %d of %s: %s",
                header.base_offset, OFFSETS_TOPIC, error)
