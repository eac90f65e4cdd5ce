"""The checker extended to transactions (issue 15): a `TxnHistory` records each
transaction's records, its outcome as the producer saw it and the consumer offsets sent
with it; `check_transactions` compares that with what a fresh read_committed consumer
read (and, optionally, a read_uncommitted one and the group's committed offsets).

    history = TxnHistory()
    txn = history.begin("ctp-0")
    txn.consumed(("in", 0), start=0, next_offset=50)  # the input it transformed
    for i in range(50):
        send = txn.send("out", partition=i % 3)
        producer.produce("out", send.value, partition=i % 3,
                         on_delivery=send.confluent_callback())
    txn.send_offsets("group", {("in", 0): 50})
    producer.send_offsets_to_transaction(...)
    producer.commit_transaction(); txn.committed()  # or txn.aborted() / txn.unknown(err)
    ...
    result = check_transactions(history, read_committed_records,
                                uncommitted=read_uncommitted_records,
                                group_offsets={("in", 0): 400})
    assert result.ok, result

Theory. A transaction ends **committed** (commit_transaction returned), **aborted**
(abort_transaction returned, or the producer knows the commit never happened) or
**unknown** (anything else; it may have committed). A read_committed reader must see every
record of a committed transaction, none of an aborted one, and of an unknown one all or
none: an unknown transaction seen whole counts as committed (it is *effective*), one not
seen at all as aborted. Anomalies:

- aborted_reads: a record of an aborted transaction visible to read_committed;
- partial: a committed or unknown transaction some of whose records are visible and
  others not (each missing record of a committed one is also `lost`);
- lost: a record of a committed transaction, or an acknowledged non-transactional send,
  not visible;
- duplicated, unexpected, offset_mismatches, reordered, backwards, divergent_batches: as
  the base checker (`checker.check`) finds them in the read_committed records; records of
  a transaction are compared with the offsets their acknowledgements gave;
- uncommitted: the base checker's anomalies in what read_uncommitted read (everything
  acknowledged is there, aborted or not, once and in order), and `hidden`: a record
  read_committed saw that read_uncommitted did not have at the same place;
- input_offsets (consume-transform-produce): the input ranges of the effective
  transactions must tile each input partition from its start to the group's committed
  offset, with no gap (an input skipped) and no overlap (an input transformed twice), each
  transaction's sent offset must be the end of the range it consumed, and the committed
  offset must be the end of the last effective transaction's range (offsets committed
  exactly with the transactions that commit).
"""

from __future__ import annotations

import enum
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from checker import (
    AnomalyReport,
    CheckResult,
    Consumed,
    History,
    Lost,
    Outcome,
    ReplicaLogs,
    Send,
    TopicPartition,
    check,
)


class TxnOutcome(enum.Enum):
    PENDING = "pending"  # begun, no outcome recorded (counts as unknown)
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass
class Txn:
    """One transaction: its records, outcome and the consumer offsets sent with it."""

    txn_id: str  # "<producer>/<n>"
    producer: str
    history: History = field(repr=False)
    sends: list[Send] = field(default_factory=list)
    outcome: TxnOutcome = TxnOutcome.PENDING
    error: str | None = None
    group: str | None = None
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # sent with it
    inputs: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)  # [start, next)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def send(self, topic: str, partition: int | None = None, key: bytes | None = None) -> Send:
        """A record of this transaction (a unique value, as `History.send`)."""
        entry = self.history.send(self.producer, topic, key, partition)
        with self._lock:
            self.sends.append(entry)
        return entry

    def consumed(self, tp: TopicPartition, start: int, next_offset: int) -> None:
        """The input this transaction transformed: `tp` from the position `start` up to
        (not including) `next_offset`."""
        with self._lock:
            self.inputs[tp] = (start, next_offset)

    def send_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """The offsets given to send_offsets_to_transaction."""
        with self._lock:
            self.group = group
            self.offsets.update(offsets)

    def committed(self) -> None:
        self.outcome = TxnOutcome.COMMITTED

    def aborted(self, error: object = None) -> None:
        self.outcome, self.error = TxnOutcome.ABORTED, None if error is None else str(error)

    def unknown(self, error: object) -> None:
        self.outcome, self.error = TxnOutcome.UNKNOWN, str(error)


class TxnHistory:
    """Every transaction of a test (and any non-transactional send, through `history`)."""

    def __init__(self) -> None:
        self.history = History()
        self._lock = threading.Lock()
        self._txns: list[Txn] = []
        self._by_value: dict[bytes, Txn] = {}
        self._numbers: dict[str, int] = defaultdict(int)

    def begin(self, producer: str) -> Txn:
        if ":" in producer or "/" in producer:
            raise ValueError("a producer name may not contain ':' or '/'")
        with self._lock:
            number = self._numbers[producer]
            self._numbers[producer] += 1
            txn = Txn(f"{producer}/{number}", producer, self.history)
            self._txns.append(txn)
        return txn

    @property
    def txns(self) -> list[Txn]:
        with self._lock:
            return list(self._txns)

    def txn_of(self, value: bytes) -> Txn | None:
        """The transaction a value was sent in (None: not transactional, or unknown)."""
        for txn in self.txns:
            for send in txn.sends:
                self._by_value.setdefault(send.value, txn)
        return self._by_value.get(value)

    def count(self, outcome: TxnOutcome) -> int:
        return sum(1 for t in self.txns if t.outcome is outcome)


# --- anomalies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AbortedRead:
    txn_id: str
    value: bytes
    place: tuple[str, int, int]


@dataclass(frozen=True)
class PartialTxn:
    txn_id: str
    outcome: TxnOutcome
    visible: int
    missing: tuple[bytes, ...]


@dataclass(frozen=True)
class Hidden:
    """Read by read_committed, absent from read_uncommitted at that place."""

    value: bytes
    place: tuple[str, int, int]


@dataclass(frozen=True)
class InputOffsetAnomaly:
    partition: TopicPartition
    problem: str


@dataclass
class TxnCheckResult(AnomalyReport):
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    unknown_effective: int = 0  # unknown transactions read whole (they committed)
    read_committed: int = 0
    read_uncommitted: int | None = None
    aborted_reads: list[AbortedRead] = field(default_factory=list)
    partial: list[PartialTxn] = field(default_factory=list)
    lost: list[Lost] = field(default_factory=list)
    duplicated: list[Any] = field(default_factory=list)
    unexpected: list[Any] = field(default_factory=list)
    offset_mismatches: list[Any] = field(default_factory=list)
    reordered: list[Any] = field(default_factory=list)
    backwards: list[Any] = field(default_factory=list)
    divergent_batches: list[Any] = field(default_factory=list)
    uncommitted: dict[str, list[Any]] = field(default_factory=dict)
    hidden: list[Hidden] = field(default_factory=list)
    input_offsets: list[InputOffsetAnomaly] = field(default_factory=list)
    lost_allowed: list[Lost] = field(default_factory=list)

    ANOMALIES = (
        "aborted_reads",
        "partial",
        "lost",
        "duplicated",
        "unexpected",
        "offset_mismatches",
        "reordered",
        "backwards",
        "divergent_batches",
        "uncommitted",
        "hidden",
        "input_offsets",
    )

    def __str__(self) -> str:
        uncommitted = "" if self.read_uncommitted is None else f", {self.read_uncommitted}"
        head = (
            f"{self.committed} committed, {self.aborted} aborted, {self.unknown} unknown "
            f"({self.unknown_effective} of them visible) transactions; "
            f"{self.read_committed} read committed{uncommitted and uncommitted + ' uncommitted'}"
        )
        return self.report(head)


# --- the check -------------------------------------------------------------------------------


def check_transactions(
    history: TxnHistory,
    committed: Iterable[Consumed | Any],
    *,
    uncommitted: Iterable[Consumed | Any] | None = None,
    group_offsets: Mapping[TopicPartition, int] | None = None,
    input_starts: Mapping[TopicPartition, int] | None = None,
    replica_logs: Mapping[TopicPartition, ReplicaLogs] | None = None,
) -> TxnCheckResult:
    """Check what a fresh read_committed consumer read (in poll order) against the
    transactions; `uncommitted`: what a read_uncommitted one read; `group_offsets`: the
    consume-transform-produce group's committed offsets after the run (every input
    partition the transactions consumed; a missing one counts as none committed), each
    input partition starting at `input_starts` (default 0)."""
    records = [r if isinstance(r, Consumed) else Consumed.of(r) for r in committed]
    txns = history.txns
    result = TxnCheckResult(
        committed=sum(1 for t in txns if t.outcome is TxnOutcome.COMMITTED),
        aborted=sum(1 for t in txns if t.outcome is TxnOutcome.ABORTED),
        unknown=sum(1 for t in txns if t.outcome in (TxnOutcome.UNKNOWN, TxnOutcome.PENDING)),
        read_committed=len(records),
    )
    base = check(history.history, records, replica_logs)
    for name in ("duplicated", "offset_mismatches", "reordered", "backwards"):
        setattr(result, name, getattr(base, name))
    result.divergent_batches = base.divergent_batches
    result.unexpected = base.unexpected
    result.lost_allowed = base.lost_allowed

    seen: dict[bytes, tuple[str, int, int]] = {}
    for record in records:
        seen.setdefault(record.value, (record.topic, record.partition, record.offset))

    in_txn: set[bytes] = set()
    effective: list[Txn] = []
    for txn in txns:
        values = [s.value for s in txn.sends]
        in_txn.update(values)
        visible = [v for v in values if v in seen]
        missing = tuple(v for v in values if v not in seen)
        if txn.outcome is TxnOutcome.ABORTED:
            result.aborted_reads.extend(AbortedRead(txn.txn_id, v, seen[v]) for v in visible)
            continue
        if visible and missing:
            result.partial.append(PartialTxn(txn.txn_id, txn.outcome, len(visible), missing))
        if txn.outcome is TxnOutcome.COMMITTED:
            effective.append(txn)
            result.lost.extend(Lost(s) for s in txn.sends if s.value not in seen)
        elif values and not missing:
            effective.append(txn)
            result.unknown_effective += 1
        elif not values and _offsets_took(txn, group_offsets):
            # an unknown transaction of offsets only: its fate shows in the group's offsets
            effective.append(txn)
    for lost in base.lost:  # acknowledged sends outside any transaction
        if lost.send.value not in in_txn:
            result.lost.append(lost)

    if uncommitted is not None:
        raw = [r if isinstance(r, Consumed) else Consumed.of(r) for r in uncommitted]
        result.read_uncommitted = len(raw)
        result.uncommitted = check(history.history, raw).anomalies()
        places = {(r.topic, r.partition, r.offset, r.value) for r in raw}
        for record in records:
            if (record.topic, record.partition, record.offset, record.value) not in places:
                result.hidden.append(
                    Hidden(record.value, (record.topic, record.partition, record.offset))
                )

    if group_offsets is not None or any(t.inputs for t in txns):
        result.input_offsets = check_input_offsets(
            effective, txns, group_offsets or {}, input_starts or {}
        )
    return result


def _offsets_took(txn: Txn, group_offsets: Mapping[TopicPartition, int] | None) -> bool:
    if not group_offsets or not txn.offsets:
        return False
    return all(group_offsets.get(tp) == offset for tp, offset in txn.offsets.items())


def check_input_offsets(
    effective: list[Txn],
    txns: list[Txn],
    group_offsets: Mapping[TopicPartition, int],
    input_starts: Mapping[TopicPartition, int],
) -> list[InputOffsetAnomaly]:
    """The consume-transform-produce rule: the effective transactions' input ranges tile
    each input partition from its start to the committed offset."""
    out: list[InputOffsetAnomaly] = []
    for txn in txns:
        for tp, (start, next_offset) in txn.inputs.items():
            if tp in txn.offsets and txn.offsets[tp] != next_offset:
                out.append(
                    InputOffsetAnomaly(
                        tp,
                        f"{txn.txn_id} consumed [{start}, {next_offset}) but sent offset "
                        f"{txn.offsets[tp]}",
                    )
                )
    partitions = set(group_offsets) | {tp for t in effective for tp in t.inputs}
    for tp in sorted(partitions):
        ranges = sorted((t.inputs[tp], t.txn_id) for t in effective if tp in t.inputs)
        position = input_starts.get(tp, 0)
        for (start, next_offset), txn_id in ranges:
            if start > position:
                out.append(InputOffsetAnomaly(tp, f"inputs [{position}, {start}) skipped"))
            elif start < position:
                out.append(
                    InputOffsetAnomaly(
                        tp,
                        f"{txn_id} transformed [{start}, {min(position, next_offset)}) again",
                    )
                )
            position = max(position, next_offset)
        committed_offset = group_offsets.get(tp, input_starts.get(tp, 0))
        if committed_offset < 0:  # -1: nothing committed
            committed_offset = input_starts.get(tp, 0)
        if committed_offset != position:
            out.append(
                InputOffsetAnomaly(
                    tp,
                    f"committed offset {committed_offset}, but the committed transactions "
                    f"consumed up to {position}",
                )
            )
    return out


__all__ = [
    "AbortedRead",
    "CheckResult",
    "Hidden",
    "InputOffsetAnomaly",
    "Outcome",
    "PartialTxn",
    "Txn",
    "TxnCheckResult",
    "TxnHistory",
    "TxnOutcome",
    "check_input_offsets",
    "check_transactions",
]
