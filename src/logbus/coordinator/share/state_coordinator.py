"""The share coordinator (KIP-932; Kafka's `ShareCoordinatorService`): keeps the delivery
state of share partitions in `__share_group_state`, for whichever broker leads them. The
entry points are `ShareCoordinator.read`, `ShareCoordinator.write` and
`ShareCoordinator.delete` (what ReadShareGroupState, ReadShareGroupStateSummary,
WriteShareGroupState, InitializeShareGroupState and DeleteShareGroupState do).

Each partition of `__share_group_state` this broker leads is loaded into memory (the newest
snapshot per key) when the broker becomes its leader, and dropped when it stops leading
it; a write appends a ShareSnapshot record and answers once it is committed (replicated to
the ISR), so a state a leader was told is kept survives the coordinator's broker. A write
with a state epoch older than the one kept is FENCED_STATE_EPOCH: a leader that lost its
partition cannot overwrite its successor's state.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from logbus.coordinator.partition_writer import PartitionWriteError, PartitionWriter
from logbus.coordinator.share.state_records import (
    SHARE_STATE_TOPIC,
    SavedState,
    ShareStateKey,
    decode_snapshot,
    encode_snapshot,
    state_partition_for,
)
from logbus.protocol import ErrorCode
from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.reader import iter_record_set
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1 << 20


class ShareStateError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(slots=True)
class _Shard:
    partition: int
    leader_epoch: int
    loading: bool = True
    states: dict[ShareStateKey, SavedState] = field(default_factory=dict)


class ShareCoordinator:
    """Owns one `_Shard` per led `__share_group_state` partition, from `start()` to
    `stop()`."""

    def __init__(
        self,
        writer: PartitionWriter,
        num_partitions: Callable[[], int],
        commit_timeout_ms: int = 5_000,
    ) -> None:
        self.writer = writer
        self.num_partitions = num_partitions
        self.commit_timeout_ms = commit_timeout_ms
        self.shards: dict[int, _Shard] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def stop(self) -> None:
        self.shards.clear()
        tasks = list(self._tasks)
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
        shard = self.shards.get(partition)
        if not is_leader:
            self.shards.pop(partition, None)
            return
        if shard is not None and shard.leader_epoch == leader_epoch:
            return
        shard = self.shards[partition] = _Shard(partition, leader_epoch)
        self._spawn(self._load(shard))

    def unload(self, partition: int) -> None:
        self.shards.pop(partition, None)

    async def _load(self, shard: _Shard) -> None:
        tp = TopicPartition(SHARE_STATE_TOPIC, shard.partition)
        count = 0
        try:
            offset = self.writer.log_start_offset(tp)
            while self.shards.get(shard.partition) is shard:
                data = self.writer.read_for_load(tp, offset, LOAD_CHUNK_BYTES)
                if not data:
                    break
                for header, records in iter_record_set(data, on_unreadable=_skip_unreadable):
                    offset = header.last_offset + 1
                    if header.is_control:
                        continue
                    for record in records:
                        if record.key is None:
                            continue
                        decoded = decode_snapshot(bytes(record.key), _bytes(record.value))
                        if decoded is None:
                            continue
                        key, state = decoded
                        if state is None:
                            shard.states.pop(key, None)
                        else:
                            shard.states[key] = state
                        count += 1
                await asyncio.sleep(0)
        except PartitionWriteError as exc:
            log.warning("loading %s-%d stopped: %s", SHARE_STATE_TOPIC, shard.partition, exc)
            if self.shards.get(shard.partition) is shard:
                del self.shards[shard.partition]
            return
        shard.loading = False
        log.info(
            "loaded %d share partition states from %d records of %s-%d",
            len(shard.states), count, SHARE_STATE_TOPIC, shard.partition,
        )

    def _shard_for(self, key: ShareStateKey) -> _Shard:
        shard = self.shards.get(state_partition_for(key, self.num_partitions()))
        if shard is None:
            raise ShareStateError(ErrorCode.NOT_COORDINATOR)
        if shard.loading:
            raise ShareStateError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def coordinates(self, key: ShareStateKey) -> bool:
        return state_partition_for(key, self.num_partitions()) in self.shards

    # --- requests ---------------------------------------------------------------------------

    def read(self, key: ShareStateKey) -> SavedState | None:
        """The state kept for `key` (None when there is none). Raises ShareStateError."""
        return self._shard_for(key).states.get(key)

    async def write(self, key: ShareStateKey, state: SavedState) -> None:
        """Keep `state` for `key` once it is committed. Raises ShareStateError."""
        shard = self._shard_for(key)
        current = shard.states.get(key)
        if current is not None and state.state_epoch < current.state_epoch:
            raise ShareStateError(ErrorCode.FENCED_STATE_EPOCH)
        record_key, value = encode_snapshot(key, state)
        timestamp = int(time.time() * 1000)
        batch = build_batch([NewRecord(record_key, value, (), timestamp)])
        tp = TopicPartition(SHARE_STATE_TOPIC, shard.partition)
        try:
            last_offset = self.writer.append(tp, batch, timestamp)
            shard.states[key] = state
            committed = await self.writer.wait_committed(tp, last_offset, self.commit_timeout_ms)
        except PartitionWriteError as exc:
            raise _write_error(exc) from exc
        if not committed:
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def delete_group(self, group_id: str) -> None:
        """Tombstones for every state of `group_id` kept here (a deleted share group)."""
        for shard in list(self.shards.values()):
            keys = [k for k in shard.states if k.group_id == group_id]
            if not keys or shard.loading:
                continue
            try:
                await self._tombstones(shard, keys)
            except PartitionWriteError as exc:
                log.warning("deleting the share state of %s: %s", group_id, exc)

    async def delete(self, key: ShareStateKey) -> None:
        """Forget the state kept for `key` (DeleteShareGroupState: a share group's offsets
        deleted) once its tombstone is committed; nothing to do when there is none.
        Raises ShareStateError."""
        shard = self._shard_for(key)
        if key not in shard.states:
            return
        try:
            committed = await self._tombstones(shard, [key])
        except PartitionWriteError as exc:
            raise _write_error(exc) from exc
        if not committed:
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _tombstones(self, shard: _Shard, keys: list[ShareStateKey]) -> bool:
        """Append a tombstone for each of `keys`, forget them, wait for the commit."""
        timestamp = int(time.time() * 1000)
        records = [NewRecord(*encode_snapshot(k, None), (), timestamp) for k in keys]
        tp = TopicPartition(SHARE_STATE_TOPIC, shard.partition)
        last_offset = self.writer.append(tp, build_batch(records), timestamp)
        for key in keys:
            shard.states.pop(key, None)
        return await self.writer.wait_committed(tp, last_offset, self.commit_timeout_ms)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _skip_unreadable(header: BatchHeader, error: InvalidBatch) -> None:
    log.warning(
        "skipping an unreadable batch at offset %d of %s: %s",
        header.base_offset, SHARE_STATE_TOPIC, error,
    )


def _write_error(exc: PartitionWriteError) -> ShareStateError:
    """A failed write of `__share_group_state` as the share coordinator answers it: a
    partition that moved means this broker is no longer its coordinator."""
    return ShareStateError(
        ErrorCode.NOT_COORDINATOR if exc.error == ErrorCode.NOT_LEADER_OR_FOLLOWER else exc.error
    )
