"""Which delivered records a share consumer still has to acknowledge, and the
acknowledgements waiting to be sent (KIP-932; Kafka's ShareInFlightBatch and
Acknowledgements).

The entry point is `AcknowledgementTracker`: `delivered()` records what one `poll()`
returned, `acknowledge()` takes the application's acknowledgement of one of those records
(each exactly once), `accept_rest()` is implicit mode's acceptance of everything still
unacknowledged, and `take()` hands the acknowledgements over, per broker and partition,
as the acknowledgement batches ShareFetch and ShareAcknowledge carry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from logbus.client.consumer.records import IllegalStateError
from logbus.client.share.records import GAP, AcknowledgeType, ShareConsumerRecord
from logbus.client.types import TopicPartition

AckBatch = tuple[int, int, list[int]]
"""One acknowledgement batch: first offset, last offset, and one type for them all or one
type per offset (the wire's AcknowledgementBatch)."""


class PendingAcknowledgements(NamedTuple):
    """One partition's acknowledgements on their way to the broker whose share session
    delivered the records (`node_id`), with the offsets they cover (for the callback)."""

    node_id: int
    tp: TopicPartition
    batches: list[AckBatch]
    offsets: set[int]


class AcknowledgementTracker:
    """The records of the last `poll()` not acknowledged yet, and acknowledgements not
    sent yet. Owned by one share consumer, used from its event loop only."""

    def __init__(self) -> None:
        # (node, partition) -> offsets of the last poll not acknowledged yet
        self._unacknowledged: dict[tuple[int, TopicPartition], set[int]] = {}
        # (node, partition) -> offset -> acknowledgement type, not sent yet
        self._pending: dict[tuple[int, TopicPartition], dict[int, int]] = {}

    def delivered(
        self, node_id: int, tp: TopicPartition, records: Iterable[ShareConsumerRecord],
        gaps: Iterable[int],
    ) -> None:
        """Records a poll returns (to be acknowledged by the application, or by the next
        poll in implicit mode) and acquired offsets without a record (acknowledged now,
        as gaps)."""
        key = (node_id, tp)
        self._unacknowledged.setdefault(key, set()).update(r.offset for r in records)
        pending = self._pending.setdefault(key, {})
        for offset in gaps:
            pending[offset] = GAP

    def acknowledge(self, record: ShareConsumerRecord, kind: AcknowledgeType) -> None:
        """The application's acknowledgement of `record` (IllegalStateError unless it is a
        record of the last poll not acknowledged yet)."""
        tp = TopicPartition(record.topic, record.partition)
        for (node_id, held_tp), offsets in self._unacknowledged.items():
            if held_tp == tp and record.offset in offsets:
                offsets.discard(record.offset)
                self._pending.setdefault((node_id, tp), {})[record.offset] = int(kind)
                return
        raise IllegalStateError(
            f"the record at offset {record.offset} of {tp.topic}-{tp.partition} cannot be "
            "acknowledged: it was not returned by the last poll, or is acknowledged already"
        )

    def unacknowledged(self) -> int:
        """How many records of the last poll are not acknowledged."""
        return sum(len(offsets) for offsets in self._unacknowledged.values())

    def accept_rest(self) -> None:
        """Accept every record of the last poll not acknowledged yet (implicit mode)."""
        for key, offsets in self._unacknowledged.items():
            pending = self._pending.setdefault(key, {})
            for offset in offsets:
                pending[offset] = AcknowledgeType.ACCEPT
        self._unacknowledged.clear()

    def forget_unacknowledged(self) -> None:
        """The last poll's records are no longer this member's to acknowledge (its share
        session was reset: the broker released them)."""
        self._unacknowledged.clear()

    def nodes(self) -> set[int]:
        """The brokers with acknowledgements waiting."""
        return {node_id for (node_id, _), acks in self._pending.items() if acks}

    def take(self, node_id: int | None = None) -> list[PendingAcknowledgements]:
        """The acknowledgements waiting (for `node_id`, or all), as batches; they are no
        longer waiting."""
        out: list[PendingAcknowledgements] = []
        for key in [k for k in self._pending if node_id is None or k[0] == node_id]:
            acks = self._pending.pop(key)
            if acks:
                out.append(PendingAcknowledgements(key[0], key[1], to_batches(acks), set(acks)))
        return out


def to_batches(acks: dict[int, int]) -> list[AckBatch]:
    """Acknowledgements by offset as batches of consecutive offsets: one type when every
    offset of a batch has the same, else one per offset."""
    out: list[AckBatch] = []
    run: list[int] = []
    for offset in sorted(acks):
        if run and offset != run[-1] + 1:
            out.append(_batch(run, acks))
            run = []
        run.append(offset)
    if run:
        out.append(_batch(run, acks))
    return out


def _batch(run: list[int], acks: dict[int, int]) -> AckBatch:
    types = [acks[offset] for offset in run]
    return (run[0], run[-1], types[:1] if len(set(types)) == 1 else types)
