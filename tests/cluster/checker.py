"""A Jepsen-style checker for the fault tests: record every send, read everything back
with a fresh consumer, then `check(history, consumed, replica_logs)`.

Theory of operation. Every send carries a value unique in the history
(`<producer>:<sequence>`), so each value read back names exactly one send. A send ends in
one of three outcomes: **ok** (acknowledged, with the partition and offset the broker gave),
**failed** (definitely not written: the caller knows the broker refused it before
appending) or **unknown** (anything else: a timeout, a lost connection, an error after
retries; it may or may not be in the log). What was read is compared with what was sent:

- lost: an ok send whose value was never read (the one anomaly no fault may cause),
  unless the test marked the send not durable (`durable=False`: an acks=1 write to a
  leader that then died, a write only the victims of an unclean election had): those
  are listed in `lost_allowed`, which is no anomaly;
- duplicated: a value read at more than one offset;
- unexpected: a value read that was never sent, or whose send definitely failed;
- offset mismatch: an ok send read at another partition or offset than acknowledged
  (only the partition when the client acknowledged without an offset);
- reordered: two sends of one producer to one partition read in the other order than sent;
- backwards: one partition's offsets not increasing in the order they were polled;
- divergent batch: below the high watermark, the in-sync replicas' logs differ in a batch's
  (base offset, last offset, leader epoch, CRC), read from each replica's segment files
  with the code `logbus dump-log` uses.

`History` is safe to share between producer threads and client callbacks.
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from logbus.cli.dump_log import iter_log_batches

TopicPartition = tuple[str, int]


class Outcome(enum.Enum):
    PENDING = "pending"  # invoked, no outcome recorded (counts as unknown)
    OK = "ok"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass
class Send:
    """One send: its unique value and how it ended."""

    producer: str
    seq: int  # the order of invocation within the producer
    topic: str
    key: bytes | None
    value: bytes
    partition: int | None = None  # given at invoke, or from the acknowledgement
    outcome: Outcome = Outcome.PENDING
    offset: int | None = None
    error: str | None = None
    # False when the test accepts that this send, even acknowledged, may be lost (acks=1
    # to a leader that then dies, or records only an unclean election's victims had)
    durable: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def ok(self, partition: int, offset: int | None) -> None:
        """Acknowledged. A client may acknowledge without knowing the offset
        (confluent-kafka's `offset()` is None when librdkafka could not tell it, e.g. a
        retried idempotent batch it knows persisted; Kafka's producer reports -1 after
        DUPLICATE_SEQUENCE_NUMBER): then only the partition is compared."""
        known = offset if offset is not None and offset >= 0 else None
        with self._lock:
            self.outcome, self.partition, self.offset = Outcome.OK, partition, known

    def failed(self, error: object) -> None:
        """Definitely not written (the broker refused it before appending)."""
        with self._lock:
            self.outcome, self.error = Outcome.FAILED, str(error)

    def unknown(self, error: object) -> None:
        """Maybe written, maybe not."""
        with self._lock:
            self.outcome, self.error = Outcome.UNKNOWN, str(error)

    def record_future(
        self, future: Any, definite: Callable[[BaseException], bool] = lambda _: False
    ) -> None:
        """Record the outcome of a logbus `FutureRecordMetadata` when it completes; an
        error is a definite failure only if `definite(error)` says so."""

        def done(fut: Any) -> None:
            error = fut.exception()
            if error is None:
                meta = fut.result()
                self.ok(meta.partition, meta.offset)
            elif definite(error):
                self.failed(error)
            else:
                self.unknown(error)

        future.add_done_callback(done)

    def confluent_callback(
        self, definite: Callable[[Any], bool] = lambda _: False
    ) -> Callable[[Any, Any], None]:
        """A confluent-kafka `on_delivery(err, msg)` recording this send's outcome."""

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                self.ok(msg.partition(), msg.offset())
            elif definite(err):
                self.failed(err)
            else:
                self.unknown(err)

        return on_delivery


class History:
    """Every send of a test, from any number of producers and threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sends: dict[bytes, Send] = {}
        self._counters: dict[str, itertools.count[int]] = defaultdict(itertools.count)

    def send(
        self,
        producer: str,
        topic: str,
        key: bytes | None = None,
        partition: int | None = None,
        *,
        durable: bool = True,
    ) -> Send:
        """Invoke a send: a new unique value, to produce with `send.value`; with
        `durable=False` its loss is allowed (`CheckResult.lost_allowed`, no anomaly)."""
        if ":" in producer:
            raise ValueError("a producer name may not contain ':'")
        with self._lock:
            seq = next(self._counters[producer])
            value = f"{producer}:{seq}".encode()
            entry = Send(producer, seq, topic, key, value, partition, durable=durable)
            self._sends[value] = entry
        return entry

    @property
    def sends(self) -> list[Send]:
        with self._lock:
            return list(self._sends.values())

    def get(self, value: bytes) -> Send | None:
        return self._sends.get(value)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for s in self.sends if s.outcome is outcome)


class Consumed(NamedTuple):
    """One record as a consumer polled it."""

    topic: str
    partition: int
    offset: int
    value: bytes

    @classmethod
    def of(cls, record: Any) -> Consumed:
        """From a logbus or kafka-python `ConsumerRecord` or a confluent-kafka `Message`."""
        if callable(getattr(record, "offset", None)):  # confluent-kafka
            return cls(record.topic(), record.partition(), record.offset(), bytes(record.value()))
        return cls(record.topic, record.partition, record.offset, bytes(record.value))


# --- replica logs --------------------------------------------------------------------------


class LogBatch(NamedTuple):
    """What identifies a stored batch across replicas."""

    base_offset: int
    last_offset: int
    epoch: int
    crc: int


@dataclass(frozen=True)
class ReplicaLogs:
    """One partition's replicas at one moment: the high watermark, the ISR, and the
    batches each replica's log holds (broker id -> batches in offset order)."""

    high_watermark: int
    isr: Collection[int]
    logs: Mapping[int, Sequence[LogBatch]]


def replica_batches(log_dir: Path, topic: str, partition: int) -> list[LogBatch]:
    """The batches of a partition's segment files under a broker's log dir, in order."""
    directory = Path(log_dir) / f"{topic}-{partition}"
    segments = sorted(directory.glob("*.log"), key=lambda p: int(p.name.split(".")[0]))
    out = []
    for segment in segments:
        for _, header, _ in iter_log_batches(segment.read_bytes()):
            out.append(
                LogBatch(
                    header.base_offset,
                    header.last_offset,
                    header.partition_leader_epoch,
                    header.crc,
                )
            )
    return out


# --- anomalies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lost:
    send: Send


@dataclass(frozen=True)
class Duplicated:
    value: bytes
    places: tuple[tuple[str, int, int], ...]  # (topic, partition, offset)


@dataclass(frozen=True)
class Unexpected:
    value: bytes
    place: tuple[str, int, int]
    reason: str  # "never sent" or "failed: <error>"


@dataclass(frozen=True)
class OffsetMismatch:
    send: Send
    read_at: tuple[str, int, int]


@dataclass(frozen=True)
class Reordered:
    producer: str
    partition: TopicPartition
    earlier: Send  # sent first ...
    later: Send  # ... but read at a lower offset
    earlier_offset: int
    later_offset: int


@dataclass(frozen=True)
class Backwards:
    partition: TopicPartition
    previous_offset: int
    offset: int
    poll_index: int


@dataclass(frozen=True)
class DivergentBatch:
    partition: TopicPartition
    base_offset: int
    replicas: Mapping[int, LogBatch | None]  # broker id -> its batch there (None: missing)


class AnomalyReport:
    """What the checkers' results share: the anomalies named in ANOMALIES (lists, or
    lists by kind), `ok` when there are none, and a report of them under a head line."""

    ANOMALIES: ClassVar[tuple[str, ...]] = ()

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES)

    def anomalies(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.ANOMALIES if getattr(self, name)}

    def report(self, head: str) -> str:
        if self.ok:
            return head + ": no anomalies"
        parts = [head + ":"]
        for name, found in self.anomalies().items():
            groups = found.items() if isinstance(found, dict) else [(None, found)]
            for kind, items in groups:
                label = name if kind is None else f"{name}.{kind}"
                parts.append(f"  {label}: {len(items)}, e.g. {items[:3]}")
        return "\n".join(parts)


@dataclass
class CheckResult(AnomalyReport):
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    unknown: int = 0
    read: int = 0
    lost: list[Lost] = field(default_factory=list)
    duplicated: list[Duplicated] = field(default_factory=list)
    unexpected: list[Unexpected] = field(default_factory=list)
    offset_mismatches: list[OffsetMismatch] = field(default_factory=list)
    reordered: list[Reordered] = field(default_factory=list)
    backwards: list[Backwards] = field(default_factory=list)
    divergent_batches: list[DivergentBatch] = field(default_factory=list)
    lost_allowed: list[Lost] = field(default_factory=list)  # acknowledged, not durable

    ANOMALIES = (
        "lost",
        "duplicated",
        "unexpected",
        "offset_mismatches",
        "reordered",
        "backwards",
        "divergent_batches",
    )

    def __str__(self) -> str:
        head = (
            f"{self.sent} sent ({self.acknowledged} ok, {self.failed} failed, "
            f"{self.unknown} unknown), {self.read} read"
        )
        if self.lost_allowed:
            head += f", {len(self.lost_allowed)} acknowledged non-durable lost (allowed)"
        return self.report(head)


# --- the check -------------------------------------------------------------------------------


def check(
    history: History,
    consumed: Iterable[Consumed | Any],
    replica_logs: Mapping[TopicPartition, ReplicaLogs] | None = None,
) -> CheckResult:
    """Compare what was sent with what was read (in poll order), and the in-sync replicas'
    logs with each other below the high watermark."""
    records = [r if isinstance(r, Consumed) else Consumed.of(r) for r in consumed]
    sends = history.sends
    result = CheckResult(
        sent=len(sends),
        acknowledged=sum(1 for s in sends if s.outcome is Outcome.OK),
        failed=sum(1 for s in sends if s.outcome is Outcome.FAILED),
        unknown=sum(1 for s in sends if s.outcome in (Outcome.UNKNOWN, Outcome.PENDING)),
        read=len(records),
    )
    places = _places_read(records, result)
    _check_values_read(history, places, result)
    by_producer = _check_sends(sends, places, result)
    _check_producer_order(by_producer, result)
    for tp, replicas in sorted((replica_logs or {}).items()):
        result.divergent_batches.extend(divergent_batches(tp, replicas))
    return result


Place = tuple[str, int, int]  # (topic, partition, offset) a value was read at


def _places_read(records: list[Consumed], result: CheckResult) -> dict[bytes, list[Place]]:
    """Where each value was read, in poll order; polls that went backwards are noted."""
    places: dict[bytes, list[Place]] = defaultdict(list)
    last_offset: dict[TopicPartition, int] = {}
    for index, record in enumerate(records):
        tp = (record.topic, record.partition)
        previous = last_offset.get(tp)
        if previous is not None and record.offset <= previous:
            result.backwards.append(Backwards(tp, previous, record.offset, index))
        last_offset[tp] = record.offset
        place = (record.topic, record.partition, record.offset)
        if place not in places[record.value]:
            places[record.value].append(place)
    return places


def _check_values_read(history: History, places: dict[bytes, list[Place]],
                       result: CheckResult) -> None:
    """Values read in two places, never sent, or sent and failed."""
    for value, where in places.items():
        if len(where) > 1:
            result.duplicated.append(Duplicated(value, tuple(where)))
        send = history.get(value)
        if send is None:
            result.unexpected.append(Unexpected(value, where[0], "never sent"))
        elif send.outcome is Outcome.FAILED:
            result.unexpected.append(Unexpected(value, where[0], f"failed: {send.error}"))


def _check_sends(
    sends: Sequence[Send], places: dict[bytes, list[Place]], result: CheckResult
) -> dict[tuple[str, TopicPartition], list[tuple[Send, int]]]:
    """Acknowledged sends never read (lost) or read elsewhere than acknowledged; returns
    each producer's sends read per partition, with the offset each was read at."""
    by_producer: dict[tuple[str, TopicPartition], list[tuple[Send, int]]] = defaultdict(list)
    for send in sends:
        where = places.get(send.value)
        if not where:
            if send.outcome is Outcome.OK:
                (result.lost if send.durable else result.lost_allowed).append(Lost(send))
            continue
        topic, partition, offset = where[0]
        if send.outcome is Outcome.OK:
            if send.offset is None:  # acknowledged without an offset: the partition only
                if all((topic, send.partition) != (t, p) for t, p, _ in where):
                    result.offset_mismatches.append(OffsetMismatch(send, where[0]))
            elif (topic, send.partition, send.offset) not in where:
                result.offset_mismatches.append(OffsetMismatch(send, where[0]))
        by_producer[(send.producer, (topic, partition))].append((send, offset))
    return by_producer


def _check_producer_order(
    by_producer: dict[tuple[str, TopicPartition], list[tuple[Send, int]]], result: CheckResult
) -> None:
    """A producer's records of one partition lie in the log in the order it sent them."""
    for (producer, tp), read in by_producer.items():
        read.sort(key=lambda item: item[0].seq)
        highest: tuple[Send, int] | None = None
        for send, offset in read:
            if highest is not None and offset < highest[1]:
                result.reordered.append(
                    Reordered(producer, tp, highest[0], send, highest[1], offset)
                )
            if highest is None or offset > highest[1]:
                highest = (send, offset)


def divergent_batches(tp: TopicPartition, replicas: ReplicaLogs) -> list[DivergentBatch]:
    """Batches below the high watermark that differ between ISR members, over the offsets
    every member still holds (retention may have removed a member's oldest segments)."""
    members = sorted(b for b in replicas.isr if b in replicas.logs)
    if len(members) < 2:
        return []
    below = {
        b: [x for x in replicas.logs[b] if x.last_offset < replicas.high_watermark] for b in members
    }
    start = max((batches[0].base_offset if batches else 0) for batches in below.values())
    indexed = {
        b: {x.base_offset: x for x in batches if x.base_offset >= start}
        for b, batches in below.items()
    }
    out = []
    for base in sorted(set().union(*(set(m) for m in indexed.values()))):
        seen = {b: indexed[b].get(base) for b in members}
        if len(set(seen.values())) > 1:
            out.append(DivergentBatch(tp, base, seen))
    return out
