"""The share partitions this broker leads and the share sessions of the members that fetch
from it (KIP-932; Kafka's `SharePartitionManager` and `ShareSessionCache`). The entry points
are `SharePartitionManager.fetch` and `SharePartitionManager.acknowledge`.

A `SharePartition` (logbus.coordinator.share) is created the first time a member fetches a
partition for a group: from the state the share coordinator kept (`ShareStateStore`), else at
the log start or end as the group's `share.auto.offset.reset` says. It is dropped when this
broker stops leading the partition (a new leader epoch makes a new one), so that only the
leader ever hands records out.

A fetch reads whole batches from the log at the first offset it may acquire, acquires the
available offsets in them and answers with those batches and the acquired ranges; the
client keeps the records in the ranges. With nothing to acquire it waits (up to
`max_wait_ms`) for an append, an acknowledgement or release, or the next lock to expire.

Safe to use from the broker's event loop only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from logbus.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRange,
    SharePartition,
)
from logbus.coordinator.share.state_coordinator import ShareStateError
from logbus.coordinator.share.state_records import SavedState
from logbus.protocol import ErrorCode
from logbus.records.batch import InvalidBatch, split_batches
from logbus.server.replica.partition import Partition, PartitionError
from logbus.server.replica.replica_manager import FetchRequestPartition, ReplicaManager

log = logging.getLogger(__name__)

SharePartitionKey = tuple[str, str, int]
"""(group id, topic, partition)."""

MAX_WAIT_STEP_MS = 1_000
# A share fetch reads the log a step at a time, the first small and each next larger up to
# the last, and reads on only while it may acquire more: a member takes a few hundred
# records, and the fetch's own max_bytes (50 MiB by default) would copy most of the log
# each time. (A batch larger than a step is read whole.)
FIRST_READ_BYTES = 64 << 10
READ_STEP_BYTES = 1 << 20
"""Longest a waiting fetch sleeps before it looks at expired locks again."""


class SessionError(Exception):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


class ShareStateStore(Protocol):
    """Where share-partition state is kept across leaders (the share coordinator)."""

    async def read(self, key: SharePartitionKey) -> SavedState | None: ...

    async def write(self, key: SharePartitionKey, state: SavedState) -> None: ...


@dataclass(slots=True)
class ShareSettings:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2_000


@dataclass(slots=True)
class ShareSession:
    """One member's share session with this broker: its epoch and partitions."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: set[tuple[str, int]] = field(default_factory=set)


@dataclass(slots=True)
class _Led:
    partition: SharePartition
    leader_epoch: int


class PartitionFetch(NamedTuple):
    """What a fetch found for one partition."""

    error: ErrorCode
    records: bytes
    acquired: list[AcquiredRange]
    leader_epoch: int


def now_ms() -> int:
    return int(time.time() * 1000)


class SharePartitionManager:
    """Owns the led share partitions and the share sessions, from broker start to stop."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        settings: Callable[[], ShareSettings],
        auto_offset_reset: Callable[[str], Awaitable[str]],
        store: ShareStateStore | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.settings = settings
        self.auto_offset_reset = auto_offset_reset
        self.store = store
        self.partitions: dict[SharePartitionKey, _Led] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    # --- sessions ---------------------------------------------------------------------------

    def open_session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with `epoch` belongs to: 0 opens (or reopens) one, -1 is
        the last request of one, others must be the session's next epoch."""
        key = (group_id, member_id)
        session = self.sessions.get(key)
        if epoch == 0:
            if session is not None:
                self.release_member(group_id, member_id, session.partitions)
            session = self.sessions[key] = ShareSession(group_id, member_id)
            return session
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == -1:
            return session
        if epoch != session.epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        session.epoch += 1
        return session

    def close_session(self, session: ShareSession) -> None:
        """The member's last request: its remaining acquired records are released."""
        self.sessions.pop((session.group_id, session.member_id), None)
        self.release_member(session.group_id, session.member_id, session.partitions)

    def forget(self, session: ShareSession, partitions: Iterable[tuple[str, int]]) -> None:
        gone = set(partitions) & session.partitions
        session.partitions -= gone
        self.release_member(session.group_id, session.member_id, gone)

    def release_member(
        self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> None:
        """Release what `member_id` holds (on `partitions`, or every partition)."""
        keys = (
            [(group_id, t, p) for t, p in partitions]
            if partitions is not None
            else [k for k in self.partitions if k[0] == group_id]
        )
        for key in keys:
            led = self.partitions.get(key)
            if led is not None and led.partition.release_member(member_id):
                self._changed(key)

    def member_left(self, group_id: str, member_id: str) -> None:
        """The group's coordinator (when it is this broker) removed a member."""
        session = self.sessions.pop((group_id, member_id), None)
        self.release_member(group_id, member_id, session.partitions if session else None)

    # --- acknowledgements -------------------------------------------------------------------

    async def acknowledge(
        self, group_id: str, member_id: str, topic: str, partition: int,
        batches: list[AcknowledgementBatch],
    ) -> ErrorCode:
        try:
            key, led = await self._led(group_id, topic, partition)
        except PartitionError as exc:
            return exc.error
        led.partition.expire_locks(now_ms())
        error = led.partition.acknowledge(member_id, batches)
        if error == ErrorCode.NONE:
            self._changed(key)
            if not await self._save(key, led):
                return ErrorCode.REQUEST_TIMED_OUT
        return error

    # --- fetches ----------------------------------------------------------------------------

    async def fetch(
        self, group_id: str, member_id: str, partitions: list[tuple[str, int]],
        max_records: int, max_bytes: int, max_wait_ms: int,
    ) -> dict[tuple[str, int], PartitionFetch]:
        """Acquire records for `member_id` on `partitions`, waiting up to `max_wait_ms` for
        any when there are none."""
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        max_bytes = max(1, max_bytes)  # at least one batch, as any fetch
        while True:
            results = await self._fetch_once(
                group_id, member_id, partitions, max_records, max_bytes
            )
            if any(r.acquired or r.error != ErrorCode.NONE for r in results.values()):
                return results
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0 or not partitions:
                return results
            keys: list[object] = []
            for topic, index in partitions:
                keys += [(topic, index), ("share", group_id, topic, index)]
            await self.replica_manager.purgatory.wait_until(
                lambda: False, keys, min(remaining_ms, self._until_next_expiry(group_id))
            )

    def _until_next_expiry(self, group_id: str) -> int:
        deadlines = [
            d for k, led in self.partitions.items() if k[0] == group_id
            if (d := led.partition.next_lock_deadline()) is not None
        ]
        if not deadlines:
            return MAX_WAIT_STEP_MS
        return max(1, min(MAX_WAIT_STEP_MS, min(deadlines) - now_ms() + 1))

    async def _fetch_once(
        self, group_id: str, member_id: str, partitions: list[tuple[str, int]],
        max_records: int, max_bytes: int,
    ) -> dict[tuple[str, int], PartitionFetch]:
        results: dict[tuple[str, int], PartitionFetch] = {}
        budget = max(1, max_records)
        for topic, index in partitions:
            result = await self._fetch_partition(
                group_id, member_id, topic, index, budget, max_bytes
            )
            budget -= sum(r.last_offset - r.first_offset + 1 for r in result.acquired)
            results[(topic, index)] = result
            if budget <= 0:
                budget = 0
        return results

    async def _fetch_partition(
        self, group_id: str, member_id: str, topic: str, index: int, max_records: int,
        max_bytes: int,
    ) -> PartitionFetch:
        try:
            key, led = await self._led(group_id, topic, index)
        except PartitionError as exc:
            return PartitionFetch(exc.error, b"", [], -1)
        share = led.partition
        part = self.replica_manager.partition(topic, index)
        if part is None:
            return PartitionFetch(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, b"", [], -1)
        share.move_start(part.log.log_start_offset)
        if share.expire_locks(now_ms()):
            await self._save(key, led)
        if max_records <= 0:
            return PartitionFetch(ErrorCode.NONE, b"", [], led.leader_epoch)
        first = share.first_acquirable(part.high_watermark)
        if first is None:
            return PartitionFetch(ErrorCode.NONE, b"", [], led.leader_epoch)
        return self._acquire_from_log(
            share, member_id, part, first, max_records, max_bytes, led.leader_epoch
        )

    def _acquire_from_log(
        self, share: SharePartition, member_id: str, part: Partition, first: int,
        max_records: int, max_bytes: int, leader_epoch: int,
    ) -> PartitionFetch:
        """Read the log from `first` a step at a time, acquiring for `member_id` what each
        batch holds that is available, until `max_records` are taken, `max_bytes` are
        read or nothing further may be acquired; the batches holding what was taken."""
        topic, index = part.topic, part.index
        acquired: list[AcquiredRange] = []
        chunks: list[bytes] = []
        now = now_ms()
        position, budget, step = first, max_bytes, FIRST_READ_BYTES
        while True:
            size = min(budget, step)
            step = min(step * 4, READ_STEP_BYTES)
            read = self.replica_manager.read(
                FetchRequestPartition(topic, index, position, size), size, True, False
            )
            if read.error != ErrorCode.NONE or read.records is None:
                if chunks:
                    break  # what was acquired goes out; the next fetch meets the error
                return PartitionFetch(read.error, b"", [], leader_epoch)
            data = read.records.read()
            try:
                batches = split_batches(data)
            except InvalidBatch as exc:
                log.warning("share fetch of %s-%d at %d: %s", topic, index, position, exc)
                if chunks:
                    break
                return PartitionFetch(ErrorCode.CORRUPT_MESSAGE, b"", [], leader_epoch)
            if not batches:
                break
            for at, header in batches:
                taken = share.acquire(
                    member_id, header.base_offset, header.last_offset, max_records, now,
                    whole_batch=True,
                )
                if taken:
                    acquired += taken
                    chunks.append(data[at:at + header.size])
                    max_records -= sum(r.last_offset - r.first_offset + 1 for r in taken)
                if max_records <= 0:
                    break
            budget -= len(data)
            position = batches[-1][1].last_offset + 1
            ahead = share.first_acquirable(part.high_watermark)
            if max_records <= 0 or budget <= 0 or ahead is None:
                break
            position = max(position, ahead)
        # Acquisitions are not written (as in Kafka): a new leader finds the records
        # available again; their delivery counts are written with the next change.
        return PartitionFetch(ErrorCode.NONE, b"".join(chunks), acquired, leader_epoch)

    # --- the partitions led here ------------------------------------------------------------

    async def _led(self, group_id: str, topic: str, index: int) -> tuple[SharePartitionKey, _Led]:
        """The share partition of a partition this broker leads (created on first use).
        Raises PartitionError (NOT_LEADER_OR_FOLLOWER, ...) otherwise."""
        part = self.replica_manager.partition(topic, index)
        if part is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        part.ensure_leader()
        key = (group_id, topic, index)
        led = self.partitions.get(key)
        if led is not None and led.leader_epoch == part.leader_epoch:
            return key, led
        settings = self.settings()
        try:
            saved = await self.store.read(key) if self.store is not None else None
        except ShareStateError as exc:
            log.warning("no share state for %s: %s", key, exc)
            raise PartitionError(ErrorCode.REQUEST_TIMED_OUT) from exc
        if saved is None:
            reset = await self.auto_offset_reset(group_id)
            start = part.log.log_start_offset if reset == "earliest" else part.high_watermark
            saved = SavedState(start, 0, [])
        share = SharePartition(
            saved.start_offset,
            record_lock_duration_ms=settings.record_lock_duration_ms,
            delivery_count_limit=settings.delivery_count_limit,
            max_in_flight=settings.max_in_flight,
            state_epoch=saved.state_epoch + 1,
        )
        share.restore(saved.start_offset, saved.batches)
        share.move_start(part.log.log_start_offset)
        # another request may have made it while this one awaited the store
        current = self.partitions.get(key)
        if current is not None and current.leader_epoch == part.leader_epoch:
            return key, current
        led = self.partitions[key] = _Led(share, part.leader_epoch)
        await self._save(key, led)
        return key, led

    async def refresh(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """A member opened a share session: drop a kept share partition whose state the
        share coordinator has from a newer state epoch (its start offset was reset while
        the group was empty: the records its departed members still hold locks on are
        reset too) or, with no locks held, no longer has (the group's offsets were
        deleted), so that it is read again."""
        if self.store is None:
            return
        for topic, index in partitions:
            key = (group_id, topic, index)
            led = self.partitions.get(key)
            if led is None:
                continue
            try:
                saved = await self.store.read(key)
            except ShareStateError:
                continue
            locked = led.partition.next_lock_deadline() is not None
            stale = (saved is None and not locked) or (
                saved is not None and saved.state_epoch > led.partition.state_epoch
            )
            if stale and self.partitions.get(key) is led:
                del self.partitions[key]

    def start_offset(self, group_id: str, topic: str, index: int) -> int | None:
        led = self.partitions.get((group_id, topic, index))
        return None if led is None else led.partition.start_offset

    def forget_group(self, group_id: str) -> None:
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]

    async def _save(self, key: SharePartitionKey, led: _Led) -> bool:
        """Give the share coordinator the partition's state; False if it could not be kept."""
        if self.store is None:
            return True
        share = led.partition
        try:
            await self.store.write(key, SavedState(
                share.start_offset, share.state_epoch, share.state_batches(), led.leader_epoch
            ))
        except ShareStateError as exc:
            log.warning("share state of %s not kept: %s", key, exc)
            if exc.error == ErrorCode.FENCED_STATE_EPOCH and self.partitions.get(key) is led:
                # a newer state was kept (the group's offsets were reset): read it next time
                del self.partitions[key]
            return False
        return True

    def _changed(self, key: SharePartitionKey) -> None:
        self.replica_manager.purgatory.notify(("share", *key))
