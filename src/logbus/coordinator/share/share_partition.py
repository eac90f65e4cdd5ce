"""The state of one partition of a share group (KIP-932), kept by the partition's leader.
The entry point is `SharePartition`; Kafka's counterpart is `SharePartition`.

Theory of operation. Offsets below the share-partition start offset (SPSO) are done with.
Offsets from the SPSO up to (not including) `next_fetch_offset` are *in flight*: each has a
delivery state and a delivery count. Offsets at or past `next_fetch_offset` have never been
delivered. A ShareFetch *acquires* available offsets for a member, for
`record_lock_duration_ms`: ACQUIRED, owned by that member, delivery count + 1. The member then
acknowledges each acquired offset:

    ACCEPT  -> ACKNOWLEDGED       (done, never delivered again)
    RELEASE -> AVAILABLE          (delivered again, to anyone), or ARCHIVED at the limit
    REJECT  -> ARCHIVED           (done, never delivered again)
    GAP     -> ARCHIVED           (no record there: a control batch or a compacted offset)

A lock that expires, or a member that goes away, releases its offsets as RELEASE would. An
offset whose delivery count reaches `delivery_count_limit` is archived instead of made
available again. The SPSO moves past every leading ACKNOWLEDGED/ARCHIVED offset, and those
are forgotten.

Acknowledgements of a partition are checked whole before any is applied: an offset that is
not ACQUIRED by the acknowledging member fails the partition with INVALID_RECORD_STATE and
changes nothing.

Values in, values out: time is the caller's `now_ms`; nothing here does I/O. Not safe to
share between threads (one event loop owns it).
"""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from logbus.protocol import ErrorCode


class RecordState(enum.IntEnum):
    """Delivery states as Kafka numbers them in `__share_group_state`."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(slots=True)
class InFlightRecord:
    """One in-flight offset's state (the per-offset view `in_flight` gives)."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock_deadline_ms: int = 0


@dataclass(slots=True)
class Run:
    """Offsets `first`..`last` (inclusive) that share one state, delivery count, owner and
    lock deadline: the unit the partition's state is kept in, so that a fetch or an
    acknowledgement of a few hundred records is a few list operations, not one per record
    (Kafka's `InFlightBatch`, split into per-offset state only where it has to be)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock_deadline_ms: int = 0

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def joins(self, following: Run) -> bool:
        return (
            self.last + 1 == following.first
            and self.state == following.state
            and self.delivery_count == following.delivery_count
            and self.member_id == following.member_id
            and self.lock_deadline_ms == following.lock_deadline_ms
        )

    def take(self, state: RecordState, member_id: str = "", deadline_ms: int = 0) -> None:
        self.state = state
        self.member_id = member_id
        self.lock_deadline_ms = deadline_ms


class AcquiredRange(NamedTuple):
    """Offsets `first_offset`..`last_offset` (inclusive) acquired, delivered for the
    `delivery_count`-th time."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AcknowledgementBatch(NamedTuple):
    """Offsets `first_offset`..`last_offset`: one type for them all, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


class StateBatch(NamedTuple):
    """A run of in-flight offsets with one state and delivery count, as persisted."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(slots=True)
class SharePartition:
    """One share group's view of one topic partition: the SPSO and the in-flight records,
    kept as `runs`: sorted, non-overlapping, within [start_offset, next_fetch_offset). An
    offset of that window in no run is done with (the log has no record there)."""

    start_offset: int
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2_000
    next_fetch_offset: int = -1
    runs: list[Run] = field(default_factory=list)
    state_epoch: int = 0

    def __post_init__(self) -> None:
        if self.next_fetch_offset < self.start_offset:
            self.next_fetch_offset = self.start_offset

    @property
    def in_flight(self) -> dict[int, InFlightRecord]:
        """Every in-flight offset's state (a copy, one entry per offset: for checks)."""
        return {
            offset: InFlightRecord(run.state, run.delivery_count, run.member_id,
                                   run.lock_deadline_ms)
            for run in self.runs
            for offset in range(run.first, run.last + 1)
        }

    # --- what may be delivered -------------------------------------------------------------

    def first_acquirable(self, log_end_offset: int) -> int | None:
        """The first offset a fetch could acquire now (below `log_end_offset`), if any."""
        for run in self.runs:
            if run.state == RecordState.AVAILABLE:
                return run.first
        if self.next_fetch_offset < log_end_offset and self._room():
            return self.next_fetch_offset
        return None

    def _room(self) -> bool:
        return self.next_fetch_offset - self.start_offset < self.max_in_flight

    def acquire(
        self, member_id: str, first: int, last: int, max_records: int, now_ms: int,
        *, whole_batch: bool = False,
    ) -> list[AcquiredRange]:
        """Acquire the available offsets of `first`..`last` (a batch read from the log) for
        `member_id`, at most `max_records`, lowest first; returns the ranges acquired.
        `whole_batch` (Kafka's batch-optimized acquisition, its default): `max_records`
        and the in-flight limit are checked before the batch, which is then taken whole,
        so a batch is never split between members, nor a record read for nothing."""
        deadline = now_ms + self.record_lock_duration_ms
        low = max(first, self.start_offset)
        if whole_batch and max_records > 0:
            max_records = last - low + 1
        remaining = max_records
        room = self._room()  # before the batch: whole_batch checks it only here
        taken: list[Run] = []
        if low < self.next_fetch_offset:
            index = self._cut(low)
            while index < len(self.runs) and remaining > 0:
                run = self.runs[index]
                if run.first > last:
                    break
                if run.state == RecordState.AVAILABLE:
                    self._cut(min(run.last, last, run.first + remaining - 1) + 1)
                    run.take(RecordState.ACQUIRED, member_id, deadline)
                    run.delivery_count += 1
                    remaining -= run.size
                    taken.append(run)
                index += 1
        fresh = max(low, self.next_fetch_offset)
        if remaining > 0 and fresh <= last and room:
            # else the first new offset needs room before it; each next one, room with it
            end = last if whole_batch else min(
                last, fresh + remaining - 1,
                max(fresh, self.start_offset + self.max_in_flight - 1),
            )
            run = Run(fresh, end, RecordState.ACQUIRED, 1, member_id, deadline)
            self.runs.append(run)
            self.next_fetch_offset = end + 1
            taken.append(run)
        acquired = _ranges(taken)
        self._coalesce()
        return acquired

    # --- acknowledgements -------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Iterable[AcknowledgementBatch]) -> ErrorCode:
        """Apply a member's acknowledgements of this partition, all or nothing."""
        changes: list[tuple[int, int, AcknowledgeType]] = []
        previous_last = -1
        for batch in batches:
            error = check_batch(batch, previous_last)
            if error != ErrorCode.NONE:
                return error
            previous_last = batch.last_offset
            if batch.last_offset >= self.next_fetch_offset:
                # never delivered (and a range as long as the request says is never walked)
                return ErrorCode.INVALID_RECORD_STATE
            for low, high, kind in _spans(batch):
                if low < self.start_offset:
                    if kind != AcknowledgeType.GAP:  # only a gap may name a finished offset
                        return ErrorCode.INVALID_RECORD_STATE
                    low = self.start_offset
                if low <= high:
                    if not self._held(member_id, low, high):
                        return ErrorCode.INVALID_RECORD_STATE
                    changes.append((low, high, kind))
        for low, high, kind in changes:
            self._apply(low, high, kind)
        self._advance_start()
        return ErrorCode.NONE

    def _held(self, member_id: str, low: int, high: int) -> bool:
        """Whether every offset of `low`..`high` is ACQUIRED by `member_id`."""
        index = bisect_right(self.runs, low, key=_first) - 1
        expected = low
        while expected <= high:
            if index < 0 or index >= len(self.runs):
                return False
            run = self.runs[index]
            if (
                run.first > expected
                or run.last < expected
                or run.state != RecordState.ACQUIRED
                or run.member_id != member_id
            ):
                return False
            expected = run.last + 1
            index += 1
        return True

    def _apply(self, low: int, high: int, kind: AcknowledgeType) -> None:
        index = self._cut(low)
        self._cut(high + 1)
        while index < len(self.runs) and self.runs[index].last <= high:
            run = self.runs[index]
            if kind == AcknowledgeType.ACCEPT:
                run.take(RecordState.ACKNOWLEDGED)
            elif kind == AcknowledgeType.RELEASE:
                self._release(run)
            else:
                run.take(RecordState.ARCHIVED)
            index += 1

    def release_member(self, member_id: str) -> int:
        """Release every offset `member_id` holds (it left, or closed its share session)."""
        return self._release_where(
            lambda run: run.state == RecordState.ACQUIRED and run.member_id == member_id
        )

    def expire_locks(self, now_ms: int) -> int:
        """Release the offsets whose acquisition lock has expired."""
        return self._release_where(
            lambda run: run.state == RecordState.ACQUIRED and run.lock_deadline_ms <= now_ms
        )

    def _release_where(self, chosen: Callable[[Run], bool]) -> int:
        released = 0
        for run in self.runs:
            if chosen(run):
                self._release(run)
                released += run.size
        if released:
            self._advance_start()
        return released

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.runs if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def _release(self, run: Run) -> None:
        if run.delivery_count >= self.delivery_count_limit:
            run.take(RecordState.ARCHIVED)
        else:
            run.take(RecordState.AVAILABLE)

    def _advance_start(self) -> None:
        """Move the SPSO past every leading finished offset (and forget them)."""
        done = 0
        start = self.next_fetch_offset
        for run in self.runs:
            if run.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                start = run.first
                break
            done += 1
        del self.runs[:done]
        self.start_offset = start
        self._coalesce()

    # --- the runs ---------------------------------------------------------------------------

    def _cut(self, offset: int) -> int:
        """The index of the first run at or after `offset`, splitting the run that holds
        `offset` so that a run starts there."""
        index = bisect_right(self.runs, offset, key=_first)
        if index == 0:
            return 0
        run = self.runs[index - 1]
        if offset > run.last:
            return index
        if offset == run.first:
            return index - 1
        self.runs.insert(index, Run(offset, run.last, run.state, run.delivery_count,
                                    run.member_id, run.lock_deadline_ms))
        run.last = offset - 1
        return index

    def _coalesce(self) -> None:
        runs = self.runs
        index = 1
        while index < len(runs):
            if runs[index - 1].joins(runs[index]):
                runs[index - 1].last = runs[index].last
                del runs[index]
            else:
                index += 1

    # --- the log moved ----------------------------------------------------------------------

    def move_start(self, log_start_offset: int) -> None:
        """Offsets deleted from the log (retention, DeleteRecords) are done with."""
        if log_start_offset <= self.start_offset:
            return
        self.runs = [run for run in self.runs if run.last >= log_start_offset]
        if self.runs and self.runs[0].first < log_start_offset:
            self.runs[0].first = log_start_offset
        self.start_offset = log_start_offset
        self.next_fetch_offset = max(self.next_fetch_offset, log_start_offset)
        self._advance_start()

    # --- persistence ------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight offsets as runs (what `__share_group_state` keeps): an ACQUIRED
        offset is written as AVAILABLE, since its lock does not survive a new leader."""
        batches: list[StateBatch] = []
        for run in self.runs:
            state = RecordState.AVAILABLE if run.state == RecordState.ACQUIRED else run.state
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset + 1 == run.first
                and last.state == state
                and last.delivery_count == run.delivery_count
            ):
                batches[-1] = last._replace(last_offset=run.last)
            else:
                batches.append(StateBatch(run.first, run.last, state, run.delivery_count))
        return batches

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Take the state a share coordinator kept (a new leader, or a restart)."""
        self.start_offset = start_offset
        self.next_fetch_offset = start_offset
        self.runs = []
        for batch in sorted(batches):
            low = max(batch.first_offset, start_offset, self.next_fetch_offset)
            if low > batch.last_offset:
                continue
            state = batch.state
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if state == RecordState.AVAILABLE and batch.delivery_count >= self.delivery_count_limit:
                state = RecordState.ARCHIVED
            self.runs.append(Run(low, batch.last_offset, state, batch.delivery_count))
            self.next_fetch_offset = batch.last_offset + 1
        self._advance_start()

    def counts(self) -> dict[RecordState, int]:
        counts = dict.fromkeys(RecordState, 0)
        for run in self.runs:
            counts[run.state] += run.size
        return counts


def _first(run: Run) -> int:
    return run.first


def _ranges(taken: list[Run]) -> list[AcquiredRange]:
    """Acquired runs as the ranges a fetch answers with: adjacent ones of one delivery
    count as one."""
    ranges: list[AcquiredRange] = []
    for run in taken:
        last = ranges[-1] if ranges else None
        if last is not None and last.last_offset + 1 == run.first and (
            last.delivery_count == run.delivery_count
        ):
            ranges[-1] = last._replace(last_offset=run.last)
        else:
            ranges.append(AcquiredRange(run.first, run.last, run.delivery_count))
    return ranges


def check_batch(batch: AcknowledgementBatch, previous_last: int) -> ErrorCode:
    """INVALID_REQUEST for a batch Kafka refuses: reversed, overlapping the previous one,
    types of the wrong count, or an unknown type."""
    size = batch.last_offset - batch.first_offset + 1
    if batch.first_offset < 0 or size < 1 or batch.first_offset <= previous_last:
        return ErrorCode.INVALID_REQUEST
    if len(batch.types) not in (1, size):
        return ErrorCode.INVALID_REQUEST
    if any(t not in AcknowledgeType._value2member_map_ for t in batch.types):
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def _spans(batch: AcknowledgementBatch) -> Iterator[tuple[int, int, AcknowledgeType]]:
    """The batch as ranges of one type each: (first, last, type)."""
    if len(batch.types) == 1:
        yield batch.first_offset, batch.last_offset, AcknowledgeType(batch.types[0])
        return
    low = batch.first_offset
    for index in range(1, len(batch.types) + 1):
        if index == len(batch.types) or batch.types[index] != batch.types[index - 1]:
            yield low, batch.first_offset + index - 1, AcknowledgeType(batch.types[index - 1])
            low = batch.first_offset + index
