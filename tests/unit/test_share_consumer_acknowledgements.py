"""The share consumer's pure parts: which records of a ShareFetch answer are this member's
(`read_delivery`: acquired offsets only, control records and other missing offsets as
gaps), and the acknowledgement bookkeeping (`AcknowledgementTracker`: each record of the
last poll acknowledged once, implicit acceptance, batches as the wire carries them)."""

from __future__ import annotations

import pytest

from logbus.client.consumer.records import IllegalStateError
from logbus.client.share.acknowledgements import AcknowledgementTracker, to_batches
from logbus.client.share.records import (
    GAP,
    AcknowledgeType,
    AcquiredRange,
    ShareConsumerRecord,
    read_delivery,
)
from logbus.client.types import TopicPartition
from logbus.records.builder import NewRecord, build_batch
from logbus.records.control import ControlType, encode_control_key, encode_end_txn_marker

TP = TopicPartition("jobs", 0)
ACCEPT, RELEASE, REJECT = (int(t) for t in AcknowledgeType)


def batch(base_offset: int, count: int) -> bytes:
    return build_batch(
        [NewRecord(None, b"v%d" % (base_offset + i), (), 1_700_000_000_000)
         for i in range(count)],
        base_offset=base_offset,
    )


def commit_marker(offset: int) -> bytes:
    marker = NewRecord(
        encode_control_key(ControlType.COMMIT), encode_end_txn_marker(0), (), 1_700_000_000_000
    )
    return build_batch(
        [marker], base_offset=offset, is_control=True, is_transactional=True,
        producer_id=7, producer_epoch=0,
    )


def record(offset: int, partition: int = 0) -> ShareConsumerRecord:
    return ShareConsumerRecord("jobs", partition, offset, 0, 0, None, b"", (), 1)


def test_only_acquired_offsets_are_delivered_with_their_delivery_count() -> None:
    records = batch(0, 5) + batch(5, 5)  # whole batches: 0-9
    delivery = read_delivery(TP, records, [AcquiredRange(2, 3, 1), AcquiredRange(6, 7, 3)])
    assert [(r.offset, r.value, r.delivery_count) for r in delivery.records] == [
        (2, b"v2", 1), (3, b"v3", 1), (6, b"v6", 3), (7, b"v7", 3)
    ]
    assert delivery.gaps == []


def test_acquired_offsets_without_a_record_are_gaps() -> None:
    records = batch(0, 3) + commit_marker(3) + batch(4, 2)
    delivery = read_delivery(TP, records, [AcquiredRange(0, 6, 1)])
    assert [r.offset for r in delivery.records] == [0, 1, 2, 4, 5]
    assert delivery.gaps == [3, 6]  # the marker, and an offset the answer did not hold


def test_each_record_of_the_last_poll_is_acknowledged_once() -> None:
    tracker = AcknowledgementTracker()
    tracker.delivered(1, TP, [record(0), record(1), record(2)], gaps=[3])
    tracker.acknowledge(record(0), AcknowledgeType.RELEASE)
    with pytest.raises(IllegalStateError, match="acknowledged already"):
        tracker.acknowledge(record(0), AcknowledgeType.ACCEPT)
    with pytest.raises(IllegalStateError, match="not returned by the last poll"):
        tracker.acknowledge(record(9), AcknowledgeType.ACCEPT)
    with pytest.raises(IllegalStateError):
        tracker.acknowledge(record(1, partition=1), AcknowledgeType.ACCEPT)
    assert tracker.unacknowledged() == 2
    tracker.accept_rest()  # implicit mode: 1 and 2 accepted
    assert tracker.unacknowledged() == 0
    assert tracker.nodes() == {1}
    [pending] = tracker.take()
    assert (pending.node_id, pending.tp, pending.offsets) == (1, TP, {0, 1, 2, 3})
    assert pending.batches == [(0, 3, [RELEASE, ACCEPT, ACCEPT, GAP])]
    assert tracker.take() == [] and tracker.nodes() == set()


def test_acknowledgements_are_kept_per_broker_and_taken_per_broker() -> None:
    tracker = AcknowledgementTracker()
    other = TopicPartition("jobs", 1)
    tracker.delivered(1, TP, [record(0)], gaps=[])
    tracker.delivered(2, other, [record(5, partition=1)], gaps=[])
    tracker.accept_rest()
    [second] = tracker.take(2)
    assert (second.node_id, second.tp, second.batches) == (2, other, [(5, 5, [ACCEPT])])
    assert tracker.nodes() == {1}


def test_batches_are_runs_of_consecutive_offsets() -> None:
    assert to_batches({}) == []
    assert to_batches({4: ACCEPT, 5: ACCEPT, 6: ACCEPT}) == [(4, 6, [ACCEPT])]
    assert to_batches({1: ACCEPT, 2: REJECT, 7: RELEASE, 8: RELEASE, 10: GAP}) == [
        (1, 2, [ACCEPT, REJECT]), (7, 8, [RELEASE]), (10, 10, [GAP])
    ]
