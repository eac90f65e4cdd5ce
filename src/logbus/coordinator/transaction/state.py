"""One transactional id's metadata and its state machine (Kafka's `TransactionMetadata`).

States (the number is what `__transaction_state` stores)::

    Empty(0) --AddPartitions--> Ongoing(1) --EndTxn--> PrepareCommit(2) / PrepareAbort(3)
    PrepareCommit --markers written--> CompleteCommit(4)
    PrepareAbort --markers written--> CompleteAbort(5)
    Ongoing --InitProducerId / timeout--> PrepareEpochFence(7) --> PrepareAbort
    Empty, CompleteCommit, CompleteAbort --expired--> Dead(6)

A transition is two steps, as in Kafka: `prepare_*` checks it and sets `pending_state`
(returning the `TxnTransit` to write to the log); once the record is committed,
`complete_transition` applies it (or `abort_transition` drops it after a failed write).
While a transition is pending, callers get CONCURRENT_TRANSACTIONS. Pure data: no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from logbus.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.Enum):
    """The states with the ids `__transaction_state` stores and the names the admin APIs
    report (DescribeTransactions, ListTransactions)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state {state_id}")

    @classmethod
    def from_label(cls, label: str) -> TxnState | None:
        for state in cls:
            if state.label == label:
                return state
        return None


S = TxnState

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
"""Kafka's `validPreviousStates`: where each state may be entered from."""

EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    """A transition the state machine never takes: a bug, not bad input."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch free for fencing: MAX_EPOCH - 1 is exhausted."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The metadata a prepared transition writes to the log (TransactionLogValue)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id as its coordinator knows it; owned by one shard."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False

    # --- queries ------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def transit(self) -> TxnTransit:
        """The current metadata as a transit (what a load rebuilds it from)."""
        return TxnTransit(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_timestamp_ms,
            self.last_update_timestamp_ms,
        )

    # --- preparing transitions -----------------------------------------------------------

    def _prepare(self, state: TxnState, **changes: object) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.label} while "
                f"{self.pending_state.label} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.label} -> {state.label} is not allowed"
            )
        transit = replace(self.transit(), state=state, **changes)  # type: ignore[arg-type]
        if transit.producer_epoch < 0 or transit.last_producer_epoch < -1:
            raise IllegalTransition(f"{self.transactional_id}: bad epochs in {transit}")
        self.pending_state = state
        return transit

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | None:
        """InitProducerId on an idle transaction: the next epoch (a retry of a bump that
        succeeded gets the same epoch again). None: the caller's epoch is fenced."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: producer epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return None
        return self._prepare(
            S.EMPTY,
            producer_epoch=epochs[0],
            last_producer_epoch=epochs[1],
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=-1,
            last_update_timestamp_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId once the epoch is exhausted: a new producer id at epoch 0."""
        return self._prepare(
            S.EMPTY,
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp_ms=-1,
            last_update_timestamp_ms=now_ms,
        )

    def prepare_fence_epoch(self) -> TxnTransit:
        """Fence the producer of an ongoing transaction (which is then aborted): the epoch
        goes up by one, unless a fence already failed to be written."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {MAX_EPOCH}")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH
        )

    def apply_epoch_fence(self, fenced_epoch: int) -> None:
        """The in-memory side of a fence, right before its abort is prepared (Kafka never
        writes PrepareEpochFence: the PrepareAbort record carries the bumped epoch)."""
        if self.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise IllegalTransition(f"{self.transactional_id}: no fence pending")
        self.pending_state = None
        self.producer_epoch = fenced_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        start = (
            now_ms
            if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
            else self.start_timestamp_ms
        )
        return self._prepare(
            S.ONGOING,
            partitions=frozenset(self.partitions) | added,
            start_timestamp_ms=start,
            last_update_timestamp_ms=now_ms,
        )

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(f"{state.label} is not a prepare state")
        return self._prepare(state, last_update_timestamp_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, partitions=frozenset(), last_update_timestamp_ms=now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(S.DEAD, partitions=frozenset())

    # --- completing ---------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a prepared transition once its record is committed (Kafka's checks:
        the pending state, the epoch moving by at most one or restarting with a new id,
        time not going back, and no partition dropped from an ongoing transaction)."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {transit.state.label}, pending "
                f"{self.pending_state.label if self.pending_state else None}"
            )
        if transit.producer_id == self.producer_id:
            if transit.producer_epoch not in (self.producer_epoch, self.producer_epoch + 1):
                raise IllegalTransition(f"{self.transactional_id}: epoch jump in {transit}")
        elif transit.producer_epoch != 0:
            raise IllegalTransition(f"{self.transactional_id}: new producer id at epoch > 0")
        if transit.last_update_timestamp_ms < self.last_update_timestamp_ms:
            raise IllegalTransition(f"{self.transactional_id}: update time went back")
        if transit.state is S.ONGOING and not self.partitions <= transit.partitions:
            raise IllegalTransition(f"{self.transactional_id}: partitions dropped")
        self._set(transit)
        self.pending_state = None

    def abort_transition(self) -> None:
        """A prepared transition whose write failed: the metadata stays as it was."""
        self.pending_state = None

    def _set(self, t: TxnTransit) -> None:
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.timeout_ms = t.timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.start_timestamp_ms = t.start_timestamp_ms
        self.last_update_timestamp_ms = t.last_update_timestamp_ms

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TxnMetadata:
        meta = cls(transactional_id, -1, -1, -1, -1, 0, S.EMPTY)
        meta._set(t)
        return meta

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
    ) -> TxnMetadata:
        """A transactional id seen for the first time (epoch -1: the first bump gives 0)."""
        return cls(
            transactional_id,
            producer_id,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH,
            timeout_ms,
            S.EMPTY,
            last_update_timestamp_ms=now_ms,
        )
