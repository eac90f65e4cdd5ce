"""Moving a replica between this broker's log dirs while it serves (AlterReplicaLogDirs,
KIP-113), as Kafka's ReplicaAlterLogDirsManager and ReplicaAlterLogDirsThread.

Theory of operation. A move creates the partition's future log in the destination dir
(`LogManager.create_future_log`) and starts a task that copies the current log's batches,
as they are on disk, into it (a follower's append: offsets, epochs and producer state
kept). The partition keeps serving from its current log meanwhile: produce, fetch and
replication go on as before. Each round reads what the future log lacks; when the future
log ends where the current one ends, the task swaps them in the same step of the event
loop (appends run on the loop, so none can land between the check and the swap):
`LogManager.replace_current_with_future` renames the future log into place and the current
one away for deletion, and the partition serves from the moved log. A current log that was
truncated (a follower cut back to its leader) or whose start moved past the copy
(retention, DeleteRecords) restarts the copy from its log start; a partition deleted
or no longer held here drops the future log. `throttle_bytes_per_second` paces the copy
(Kafka's `replica.alter.log.dirs.io.max.bytes.per.second`; None: as fast as it goes).

The entry point is `ReplicaAlterLogDirsManager`; it lives on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from logbus.server.replica.partition import Partition
from logbus.storage.log import Log
from logbus.storage.log_manager import LogManager
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1024 * 1024
_IDLE_S = 0.01
# A batch starts with its base offset (8 bytes) and the length of what follows (4 bytes).
_LENGTH_AT = 8
_LENGTH_END = 12


def whole_batches(data: bytes) -> bytes:
    """The complete batches at the start of `data` (a read may end inside a batch)."""
    end = 0
    while end + _LENGTH_END <= len(data):
        size = _LENGTH_END + int.from_bytes(data[end + _LENGTH_AT : end + _LENGTH_END], "big")
        if end + size > len(data):
            break
        end += size
    return data[:end]


class ReplicaAlterLogDirsManager:
    """Owns one copy task per moving replica, from `move()` to its swap, its cancellation
    (`cancel`, a new move elsewhere) or `stop()`. Use on the broker's event loop only."""

    def __init__(
        self, log_manager: LogManager, partition: Callable[[TopicPartition], Partition | None]
    ) -> None:
        self.log_manager = log_manager
        self._partition = partition
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self.throttle_bytes_per_second: float | None = None
        self.moved = 0  # swaps done, for logs and tests

    def moving(self) -> set[TopicPartition]:
        return set(self._tasks)

    def move(self, tp: TopicPartition, path: str | Path) -> None:
        """Move the replica's log to log dir `path` (one of `log.dirs`); nothing to do when
        it is there already (a move elsewhere in progress is cancelled). Raises KeyError
        for an unknown dir, KafkaStorageError when the future log cannot be created."""
        manager = self.log_manager
        if not manager.has_log_dir(path):
            raise KeyError(str(path))
        if manager.log_dir_of(tp.topic, tp.partition) == Path(path).resolve():
            self.cancel(tp)
            return
        existing = manager.future_log(tp.topic, tp.partition)
        future = manager.create_future_log(tp.topic, tp.partition, path)
        if future is existing and tp in self._tasks:
            return
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        logger.info("moving the replica of %s-%d to %s", tp.topic, tp.partition, path)
        self._tasks[tp] = asyncio.get_running_loop().create_task(
            self._copy(tp), name=f"alter-log-dir-{tp.topic}-{tp.partition}"
        )

    def cancel(self, tp: TopicPartition) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self.log_manager.abort_future_log(tp.topic, tp.partition)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _copy(self, tp: TopicPartition) -> None:
        truncations: int | None = None
        try:
            while True:
                part = self._partition(tp)
                future = self.log_manager.future_log(tp.topic, tp.partition)
                if part is None or future is None:
                    self.log_manager.abort_future_log(tp.topic, tp.partition)
                    return
                current = part.log
                if truncations is not None and current.truncations != truncations:
                    future.truncate_fully_and_start_at(current.log_start_offset)
                truncations = current.truncations
                if future.log_end_offset == current.log_end_offset:
                    self._swap(part, current, future)
                    return
                copied = self._copy_chunk(current, future)
                rate = self.throttle_bytes_per_second
                if not copied:
                    await asyncio.sleep(_IDLE_S)  # nothing readable yet: never spin
                else:
                    await asyncio.sleep(copied / rate if rate else 0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # logged: the replica stays where it is, and serves
            logger.error("moving %s-%d failed: %s", tp.topic, tp.partition, exc)
            self.log_manager.abort_future_log(tp.topic, tp.partition)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    @staticmethod
    def _copy_chunk(current: Log, future: Log) -> int:
        """Append to the future log the next batches of the current one; bytes copied."""
        start = future.log_end_offset
        if start > current.log_end_offset or start < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
            start = current.log_start_offset
        data = current.read(start, CHUNK_BYTES, min_one_message=True).records
        if data is None:
            return 0
        raw = whole_batches(data.read())
        if raw:
            future.append_as_follower(raw)
        return len(raw)

    def _swap(self, part: Partition, current: Log, future: Log) -> None:
        for entry in current.leader_epoch_cache.entries:
            if entry.epoch > future.leader_epoch_cache.latest_epoch:
                future.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
        part.log = self.log_manager.replace_current_with_future(part.topic, part.index)
        self.moved += 1
        logger.info(
            "the replica of %s-%d moved to %s", part.topic, part.index, part.log.dir.parent
        )
