"""A reference model of a share partition for the property tests: every in-flight offset
kept as its own entry, the obvious way (what `SharePartition` kept before it kept runs of
offsets). `SharePartition` must answer every operation as this model does."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from logbus.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    InFlightRecord,
    RecordState,
    StateBatch,
    check_batch,
)
from logbus.protocol import ErrorCode


@dataclass(slots=True)
class PerOffsetModel:
    """The reference: one entry per in-flight offset, the obvious way."""

    start_offset: int
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2_000
    next_fetch_offset: int = -1
    in_flight: dict[int, InFlightRecord] = field(default_factory=dict)
    state_epoch: int = 0

    def __post_init__(self) -> None:
        if self.next_fetch_offset < self.start_offset:
            self.next_fetch_offset = self.start_offset

    # --- what may be delivered -------------------------------------------------------------

    def first_acquirable(self, log_end_offset: int) -> int | None:
        """The first offset a fetch could acquire now (below `log_end_offset`), if any."""
        for offset in range(self.start_offset, self.next_fetch_offset):
            record = self.in_flight.get(offset)
            if record is not None and record.state == RecordState.AVAILABLE:
                return offset
        if self.next_fetch_offset < log_end_offset and self._room():
            return self.next_fetch_offset
        return None

    def _room(self) -> bool:
        return self.next_fetch_offset - self.start_offset < self.max_in_flight

    def acquire(
        self, member_id: str, first: int, last: int, max_records: int, now_ms: int,
        *, whole_batch: bool = False,
    ) -> list[AcquiredRange]:
        """Acquire the available offsets of `first`..`last` for `member_id`, at most
        `max_records` (with `whole_batch`: the limits checked once, before the batch)."""
        if whole_batch and max_records > 0:
            max_records = last - max(first, self.start_offset) + 1
        room_before = self._room()
        runs: list[list[int]] = []  # [first, last, delivery count]
        deadline = now_ms + self.record_lock_duration_ms
        count = 0
        for offset in range(max(first, self.start_offset), last + 1):
            if count >= max_records:
                break
            record = self.in_flight.get(offset)
            if record is None:
                room = room_before if whole_batch else self._room()
                if offset < self.next_fetch_offset or not room:
                    continue  # done with (below the SPSO's horizon) or no room for more
                record = self.in_flight[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
                self.next_fetch_offset = offset + 1
            if record.state != RecordState.AVAILABLE:
                continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock_deadline_ms = deadline
            count += 1
            run = runs[-1] if runs else None
            if run is not None and run[1] + 1 == offset and run[2] == record.delivery_count:
                run[1] = offset
            else:
                runs.append([offset, offset, record.delivery_count])
        return [AcquiredRange(*run) for run in runs]

    # --- acknowledgements -------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: Iterable[AcknowledgementBatch]) -> ErrorCode:
        """Apply a member's acknowledgements of this partition, all or nothing."""
        changes: list[tuple[int, AcknowledgeType]] = []
        previous_last = -1
        for batch in batches:
            error = check_batch(batch, previous_last)
            if error != ErrorCode.NONE:
                return error
            previous_last = batch.last_offset
            if batch.last_offset >= self.next_fetch_offset:
                # never delivered (and a range as long as the request says is never walked)
                return ErrorCode.INVALID_RECORD_STATE
            for offset, kind in _expand(batch, self.start_offset):
                record = self.in_flight.get(offset)
                if kind == AcknowledgeType.GAP and (record is None and offset < self.start_offset):
                    continue
                if (
                    record is None
                    or record.state != RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    return ErrorCode.INVALID_RECORD_STATE
                changes.append((offset, kind))
        for offset, kind in changes:
            record = self.in_flight[offset]
            if kind == AcknowledgeType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif kind == AcknowledgeType.RELEASE:
                self._release(record)
            else:
                self._finish(record, RecordState.ARCHIVED)
        self._advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> int:
        """Release every offset `member_id` holds (it left, or closed its share session)."""
        released = 0
        for record in self.in_flight.values():
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release the offsets whose acquisition lock has expired."""
        expired = 0
        for record in self.in_flight.values():
            if record.state == RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._advance_start()
        return expired

    def next_lock_deadline(self) -> int | None:
        deadlines = [
            r.lock_deadline_ms for r in self.in_flight.values() if r.state == RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    def _release(self, record: InFlightRecord) -> None:
        if record.delivery_count >= self.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            self._finish(record, RecordState.AVAILABLE)

    @staticmethod
    def _finish(record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = ""
        record.lock_deadline_ms = 0

    def _advance_start(self) -> None:
        offset = self.start_offset
        while offset < self.next_fetch_offset:
            record = self.in_flight.get(offset)
            if record is not None and record.state not in (
                RecordState.ACKNOWLEDGED,
                RecordState.ARCHIVED,
            ):
                break
            self.in_flight.pop(offset, None)
            offset += 1
        self.start_offset = offset

    # --- the log moved ----------------------------------------------------------------------

    def move_start(self, log_start_offset: int) -> None:
        """Offsets deleted from the log (retention, DeleteRecords) are done with."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.in_flight if o < log_start_offset]:
            del self.in_flight[offset]
        self.start_offset = log_start_offset
        self.next_fetch_offset = max(self.next_fetch_offset, log_start_offset)
        self._advance_start()

    # --- persistence ------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight offsets as runs (what `__share_group_state` keeps): an ACQUIRED
        offset is written as AVAILABLE, since its lock does not survive a new leader."""
        runs: list[list[int]] = []  # [first, last, state, delivery count]
        for offset in sorted(self.in_flight):
            record = self.in_flight[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            last = runs[-1] if runs else None
            if (
                last is not None
                and last[1] + 1 == offset
                and last[2] == state
                and last[3] == record.delivery_count
            ):
                last[1] = offset
            else:
                runs.append([offset, offset, state, record.delivery_count])
        return [StateBatch(a, b, RecordState(s), n) for a, b, s, n in runs]

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Take the state a share coordinator kept (a new leader, or a restart)."""
        self.start_offset = start_offset
        self.in_flight.clear()
        self.next_fetch_offset = start_offset
        for batch in batches:
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                state = batch.state
                if state == RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                self.in_flight[offset] = InFlightRecord(state, batch.delivery_count)
                self.next_fetch_offset = max(self.next_fetch_offset, offset + 1)
        for record in self.in_flight.values():
            if record.state == RecordState.AVAILABLE and (
                record.delivery_count >= self.delivery_count_limit
            ):
                record.state = RecordState.ARCHIVED
        self._advance_start()

    def counts(self) -> dict[RecordState, int]:
        counts = dict.fromkeys(RecordState, 0)
        for record in self.in_flight.values():
            counts[record.state] += 1
        return counts



def _expand(
    batch: AcknowledgementBatch, start_offset: int
) -> Iterator[tuple[int, AcknowledgeType]]:
    """Each offset's type; with one type for the batch, the offsets below `start_offset`
    (finished) come as one: a GAP there is fine, anything else refuses the batch."""
    if len(batch.types) == 1:
        kind = AcknowledgeType(batch.types[0])
        first = batch.first_offset
        if first < start_offset:
            yield first, kind
            first = start_offset
        for offset in range(first, batch.last_offset + 1):
            yield offset, kind
        return
    for offset, raw in zip(
        range(batch.first_offset, batch.last_offset + 1), batch.types, strict=True
    ):
        yield offset, AcknowledgeType(raw)
