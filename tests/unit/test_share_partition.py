"""The share-group state machines with plain values (KIP-932): `SharePartition` (acquire,
acknowledge, locks, the delivery limit, persistence) and `ShareGroup` (epochs and the simple
assignor), plus a property test over random operation sequences."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st
from share_partition_model import PerOffsetModel

from logbus.coordinator.share.share_group import ShareGroup, ShareGroupError, simple_assignment
from logbus.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRange,
    RecordState,
    SharePartition,
)
from logbus.coordinator.share.state_records import (
    SavedState,
    ShareStateKey,
    decode_snapshot,
    encode_snapshot,
)
from logbus.protocol import ErrorCode

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


def test_acquire_accept_moves_the_start_offset() -> None:
    share = SharePartition(0)
    assert share.acquire("a", 0, 9, 500, now_ms=0) == [AcquiredRange(0, 9, 1)]
    assert share.acquire("b", 0, 9, 500, now_ms=0) == []  # all held by a
    assert share.acknowledge("a", [ack(0, 4, ACCEPT)]) == ErrorCode.NONE
    assert share.start_offset == 5
    assert share.first_acquirable(10) is None  # 5-9 still held, nothing new in the log


def test_release_redelivers_and_the_limit_archives() -> None:
    share = SharePartition(0, delivery_count_limit=3)
    for delivery in (1, 2, 3):
        assert share.acquire("a", 0, 0, 500, now_ms=0) == [AcquiredRange(0, 0, delivery)]
        assert share.acknowledge("a", [ack(0, 0, RELEASE)]) == ErrorCode.NONE
    assert share.start_offset == 1  # archived at the third release
    assert share.acquire("a", 0, 0, 500, now_ms=0) == []


def test_expired_lock_releases() -> None:
    share = SharePartition(0, record_lock_duration_ms=1000)
    share.acquire("a", 0, 2, 500, now_ms=0)
    assert share.expire_locks(999) == 0
    assert share.expire_locks(1000) == 3
    assert share.acquire("b", 0, 2, 500, now_ms=1000) == [AcquiredRange(0, 2, 2)]
    # a's late acknowledgement is refused: the records are b's now
    assert share.acknowledge("a", [ack(0, 2, ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE


def test_bad_acknowledgements_change_nothing() -> None:
    share = SharePartition(0)
    share.acquire("a", 0, 4, 500, now_ms=0)
    before = share.state_batches()
    assert share.acknowledge("a", [ack(0, 6, ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert share.acknowledge("a", [ack(3, 4, ACCEPT), ack(0, 1, ACCEPT)]) == (
        ErrorCode.INVALID_REQUEST
    )
    assert share.acknowledge("a", [ack(0, 4, ACCEPT, REJECT)]) == ErrorCode.INVALID_REQUEST
    assert share.acknowledge("a", [ack(0, 0, 7)]) == ErrorCode.INVALID_REQUEST
    assert share.acknowledge("a", [ack(4, 3, ACCEPT)]) == ErrorCode.INVALID_REQUEST
    assert share.acknowledge("b", [ack(0, 0, ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    # a range of 10**15 offsets is refused without walking it
    assert share.acknowledge("a", [ack(0, 10**15, ACCEPT)]) == ErrorCode.INVALID_RECORD_STATE
    assert share.state_batches() == before
    assert share.counts()[RecordState.ACQUIRED] == 5


def test_per_offset_types_and_gaps() -> None:
    share = SharePartition(0)
    share.acquire("a", 0, 3, 500, now_ms=0)
    assert share.acknowledge("a", [ack(0, 3, ACCEPT, GAP, RELEASE, REJECT)]) == ErrorCode.NONE
    assert share.start_offset == 2
    assert share.acquire("b", 0, 3, 500, now_ms=0) == [AcquiredRange(2, 2, 2)]


def test_max_records_and_in_flight_limit() -> None:
    share = SharePartition(0, max_in_flight=4)
    assert share.acquire("a", 0, 9, 3, now_ms=0) == [AcquiredRange(0, 2, 1)]
    assert share.acquire("b", 0, 9, 500, now_ms=0) == [AcquiredRange(3, 3, 1)]  # room for 4
    assert share.first_acquirable(10) is None


def test_whole_batches_pass_the_limits_at_batch_boundaries() -> None:
    """Kafka's batch-optimized acquisition: a batch is taken whole when the member may
    take anything, past MaxRecords and the in-flight limit; the limits stop the next."""
    share = SharePartition(0, max_in_flight=4)
    assert share.acquire("a", 0, 9, 3, now_ms=0, whole_batch=True) == [AcquiredRange(0, 9, 1)]
    assert share.first_acquirable(20) is None  # 10 in flight: no room for a new batch
    assert share.acquire("b", 10, 19, 500, now_ms=0, whole_batch=True) == []
    assert share.acknowledge("a", [ack(0, 9, RELEASE)]) == ErrorCode.NONE
    # released offsets are taken whole too; a member with nothing left to take gets nothing
    assert share.acquire("b", 0, 9, 1, now_ms=0, whole_batch=True) == [AcquiredRange(0, 9, 2)]
    assert share.acquire("c", 0, 9, 0, now_ms=0, whole_batch=True) == []


def test_state_survives_a_round_trip_through_the_records() -> None:
    share = SharePartition(0)
    share.acquire("a", 0, 9, 500, now_ms=0)
    share.acknowledge("a", [ack(0, 2, ACCEPT), ack(5, 6, REJECT), ack(7, 7, RELEASE)])
    saved = SavedState(share.start_offset, 4, share.state_batches(), 2)
    key = ShareStateKey("g", UUID(int=7), 0)
    decoded = decode_snapshot(*encode_snapshot(key, saved))
    assert decoded == (key, saved)
    restored = SharePartition(0)
    restored.restore(saved.start_offset, saved.batches)
    # the ACQUIRED ones (3, 4, 8, 9) come back available with their count
    assert restored.acquire("b", 0, 9, 500, now_ms=0) == [
        AcquiredRange(3, 4, 2), AcquiredRange(7, 9, 2)
    ]


def test_heartbeat_epochs_and_fencing() -> None:
    group = ShareGroup("g")

    def partitions(topic: str) -> int:
        return 1

    a = group.heartbeat(member_id="a", member_epoch=0, rack_id=None, subscribed_topics=["t"],
                        client_id="c", client_host="/h", now_ms=0, max_size=10,
                        partitions=partitions)
    assert a is not None and a.assignment == {"t": (0,)}
    epoch = a.member_epoch
    b = group.heartbeat(member_id="b", member_epoch=0, rack_id=None, subscribed_topics=["t"],
                        client_id="c", client_host="/h", now_ms=0, max_size=10,
                        partitions=partitions)
    assert b is not None and b.assignment == {"t": (0,)}  # the partition is shared
    assert a.member_epoch > epoch
    for bad_epoch, error in ((a.member_epoch + 1, ErrorCode.FENCED_MEMBER_EPOCH),):
        try:
            group.heartbeat(member_id="a", member_epoch=bad_epoch, rack_id=None,
                            subscribed_topics=None, client_id="c", client_host="/h", now_ms=0,
                            max_size=10, partitions=partitions)
        except ShareGroupError as exc:
            assert exc.error == error
        else:
            raise AssertionError("a stale epoch was accepted")
    # the previous epoch is tolerated (the answer that bumped it may be lost)
    assert group.heartbeat(member_id="a", member_epoch=epoch, rack_id=None,
                           subscribed_topics=None, client_id="c", client_host="/h", now_ms=0,
                           max_size=10, partitions=partitions) is a
    assert group.expire(now_ms=10_000, session_timeout_ms=5_000, partitions=partitions) == [
        "a", "b"
    ]


def test_simple_assignor_covers_every_partition() -> None:
    group = ShareGroup("g")
    for member_id in "abc":
        group.heartbeat(member_id=member_id, member_epoch=0, rack_id=None,
                        subscribed_topics=["t"], client_id="c", client_host="/h", now_ms=0,
                        max_size=10, partitions=lambda topic: 7)
    assignment = simple_assignment(group.members, lambda topic: 7)
    owned = sorted(p for a in assignment.values() for p in a["t"])
    assert owned == list(range(7))


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "ack", "expire", "leave"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 19),
        st.integers(0, 5),
        st.sampled_from([ACCEPT, RELEASE, REJECT]),
    ),
    max_size=60,
)


@given(OPERATIONS)
def test_done_records_are_never_delivered_again(
    operations: list[tuple[str, str, int, int, int]],
) -> None:
    share = SharePartition(0, record_lock_duration_ms=10, delivery_count_limit=3)
    done: set[int] = set()
    now = 0
    start = 0
    for op, member, first, span, kind in operations:
        now += 3
        if op == "acquire":
            for r in share.acquire(member, first, min(19, first + span), 5, now):
                offsets = set(range(r.first_offset, r.last_offset + 1))
                assert not offsets & done, "a finished record was delivered again"
                assert 1 <= r.delivery_count <= 3
        elif op == "ack":
            held = {o for o, rec in share.in_flight.items()
                    if rec.state == RecordState.ACQUIRED and rec.member_id == member}
            batch = ack(first, min(19, first + span), kind)
            wanted = set(range(batch.first_offset, batch.last_offset + 1))
            result = share.acknowledge(member, [batch])
            assert (result == ErrorCode.NONE) == (wanted <= held)
            if result == ErrorCode.NONE and kind in (ACCEPT, REJECT):
                done |= wanted
        elif op == "expire":
            share.expire_locks(now)
        else:
            share.release_member(member)
        done |= {o for o, rec in share.in_flight.items() if rec.state == RecordState.ARCHIVED}
        assert share.start_offset >= start
        start = share.start_offset


KINDS = st.sampled_from([GAP, ACCEPT, RELEASE, REJECT])
BATCH = st.tuples(st.integers(0, 30), st.integers(0, 6), st.lists(KINDS, min_size=1, max_size=7))
STEP = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from("ab"), st.integers(0, 30),
              st.integers(0, 12), st.integers(0, 8), st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from("ab"), st.lists(BATCH, min_size=1, max_size=3)),
    st.tuples(st.just("ack held"), st.sampled_from("ab"), st.lists(KINDS, min_size=1, max_size=9)),
    st.tuples(st.just("expire"), st.integers(0, 4)),
    st.tuples(st.just("leave"), st.sampled_from("ab")),
    st.tuples(st.just("log start"), st.integers(0, 30)),
    st.tuples(st.just("restore")),
)


def _held_batch(model: PerOffsetModel, member: str, kinds: list[int]) -> AcknowledgementBatch:
    """An acknowledgement of the first run of offsets `member` holds (per offset when
    `kinds` has one type for each), or of offset 0 when it holds none."""
    held = sorted(o for o, r in model.in_flight.items()
                  if r.state == RecordState.ACQUIRED and r.member_id == member)
    first = last = held[0] if held else 0
    while last + 1 in held:
        last += 1
    size = last - first + 1
    return AcknowledgementBatch(first, last, tuple(kinds[:size]) if len(kinds) >= size
                                else (kinds[0],))


def _batches(specs: list[tuple[int, int, list[int]]]) -> list[AcknowledgementBatch]:
    """Acknowledgement batches from (first, span, types): one type for the whole batch,
    or one per offset when the list is as long as the batch."""
    batches = []
    for first, span, kinds in specs:
        types = tuple(kinds[: span + 1]) if len(kinds) > span else (kinds[0],)
        batches.append(AcknowledgementBatch(first, first + span, types))
    return batches


@settings(max_examples=150)
@given(st.lists(STEP, min_size=30, max_size=100), st.integers(2, 12))
def test_runs_answer_as_the_per_offset_model(steps: list[tuple], max_in_flight: int) -> None:
    """The partition keeps runs of offsets; every answer and every state it reaches is the
    one the per-offset model reaches."""
    settings = {"record_lock_duration_ms": 10, "delivery_count_limit": 3,
                "max_in_flight": max_in_flight}
    share, model = SharePartition(0, **settings), PerOffsetModel(0, **settings)
    now = 0
    for step in steps:
        now += 3
        match step:
            case ("acquire", member, first, span, most, whole):
                assert share.acquire(
                    member, first, first + span, most, now, whole_batch=whole
                ) == model.acquire(member, first, first + span, most, now, whole_batch=whole)
            case ("ack", member, specs):
                batches = _batches(specs)
                assert share.acknowledge(member, batches) == model.acknowledge(member, batches)
            case ("ack held", member, kinds):
                batch = _held_batch(model, member, kinds)
                assert share.acknowledge(member, [batch]) == model.acknowledge(member, [batch])
            case ("expire", later):
                now += later
                assert share.expire_locks(now) == model.expire_locks(now)
            case ("leave", member):
                assert share.release_member(member) == model.release_member(member)
            case ("log start", offset):
                share.move_start(offset)
                model.move_start(offset)
            case _:
                share.restore(share.start_offset, share.state_batches())
                model.restore(model.start_offset, model.state_batches())
        assert (share.start_offset, share.next_fetch_offset) == (
            model.start_offset, model.next_fetch_offset)
        assert share.in_flight == model.in_flight
        assert share.state_batches() == model.state_batches()
        assert share.counts() == model.counts()
        assert share.next_lock_deadline() == model.next_lock_deadline()
        assert share.first_acquirable(40) == model.first_acquirable(40)
