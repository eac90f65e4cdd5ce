"""The transaction coordinator's pure parts: every transition of `TxnMetadata` and its
refusals, the coordinator's decisions on InitProducerId and EndTxn, the records of
`__transaction_state` through the generated TransactionLogKey/Value, and the partition of
a transactional id."""

from __future__ import annotations

import pytest

from logbus.coordinator.transaction.coordinator import TransactionCoordinator
from logbus.coordinator.transaction.records import (
    InvalidTxnRecord,
    decode_record,
    txn_key,
    txn_value,
)
from logbus.coordinator.transaction.state import (
    MAX_EPOCH,
    VALID_PREVIOUS,
    IllegalTransition,
    TxnMetadata,
    TxnState,
)
from logbus.coordinator.transaction.state_topic import java_abs, txn_partition_for
from logbus.protocol import ErrorCode
from logbus.protocol.schema import message
from logbus.types import TopicPartition

S = TxnState
E = ErrorCode
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def fresh(epoch: int = 0, state: TxnState = S.EMPTY) -> TxnMetadata:
    txn = TxnMetadata.new("tx", 1000, 60_000, 1)
    txn.producer_epoch = epoch
    txn.state = state
    return txn


def ongoing(partitions: frozenset[TopicPartition] = frozenset({A0})) -> TxnMetadata:
    txn = fresh()
    txn.complete_transition(txn.prepare_add_partitions(partitions, 10))
    return txn


# --- the state machine ---------------------------------------------------------------------


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.label) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]  # fmt: skip
    assert S.from_id(4) is S.COMPLETE_COMMIT and S.from_label("Ongoing") is S.ONGOING
    assert S.from_label("Bogus") is None
    with pytest.raises(ValueError):
        S.from_id(9)


def test_a_commit_goes_through_every_state() -> None:
    txn = fresh()
    add = txn.prepare_add_partitions(frozenset({A0}), 10)
    assert txn.pending_state is S.ONGOING and txn.state is S.EMPTY
    txn.complete_transition(add)
    assert (txn.state, txn.partitions, txn.start_timestamp_ms) == (S.ONGOING, {A0}, 10)
    txn.complete_transition(txn.prepare_add_partitions(frozenset({B0}), 20))
    assert txn.partitions == {A0, B0} and txn.start_timestamp_ms == 10
    txn.complete_transition(txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 30))
    assert txn.state is S.PREPARE_COMMIT and txn.partitions == {A0, B0}
    txn.complete_transition(txn.prepare_complete(40))
    assert (txn.state, txn.partitions, txn.pending) == (S.COMPLETE_COMMIT, set(), False)
    # the next transaction starts from CompleteCommit with a new start time
    txn.complete_transition(txn.prepare_add_partitions(frozenset({A1}), 50))
    assert txn.start_timestamp_ms == 50


def test_abort_completes_as_complete_abort() -> None:
    txn = ongoing()
    txn.complete_transition(txn.prepare_abort_or_commit(S.PREPARE_ABORT, 30))
    txn.complete_transition(txn.prepare_complete(40))
    assert txn.state is S.COMPLETE_ABORT


@pytest.mark.parametrize("target", list(S))
@pytest.mark.parametrize("current", list(S))
def test_only_kafkas_transitions_are_allowed(current: TxnState, target: TxnState) -> None:
    txn = fresh(state=current)
    transit = txn.transit()
    allowed = current in VALID_PREVIOUS[target]
    try:
        txn._prepare(target)
    except IllegalTransition:
        assert not allowed
    else:
        assert allowed and txn.pending_state is target
    del transit


def test_one_transition_at_a_time() -> None:
    txn = fresh()
    first = txn.prepare_add_partitions(frozenset({A0}), 10)
    with pytest.raises(IllegalTransition):
        txn.prepare_add_partitions(frozenset({A1}), 11)
    txn.abort_transition()
    assert (txn.state, txn.pending) == (S.EMPTY, False)
    with pytest.raises(IllegalTransition):
        txn.complete_transition(first)  # no longer pending


def test_completion_refuses_epoch_jumps_and_time_going_back() -> None:
    txn = ongoing()
    transit = txn.prepare_abort_or_commit(S.PREPARE_COMMIT, 5)  # older than the last update
    with pytest.raises(IllegalTransition):
        txn.complete_transition(transit)


def test_epoch_bumps_with_and_without_an_expected_epoch() -> None:
    txn = TxnMetadata.new("tx", 1000, 60_000, 1)
    first = txn.prepare_increment_epoch(60_000, None, 2)
    assert first is not None and (first.producer_epoch, first.last_producer_epoch) == (0, -1)
    txn.complete_transition(first)
    # KIP-360: the producer's own epoch is bumped, the previous one remembered
    bumped = txn.prepare_increment_epoch(60_000, 0, 3)
    assert bumped is not None and (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    txn.complete_transition(bumped)
    # a retry of that bump (the answer was lost) gets the same epoch again
    retried = txn.prepare_increment_epoch(60_000, 0, 4)
    assert retried is not None and (retried.producer_epoch, retried.last_producer_epoch) == (1, 0)
    txn.complete_transition(retried)
    # an epoch that is neither is fenced
    assert txn.prepare_increment_epoch(60_000, 7, 5) is None
    assert not txn.pending


def test_fence_bumps_once_even_after_a_failed_write() -> None:
    txn = ongoing()
    fence = txn.prepare_fence_epoch()
    assert (fence.state, fence.producer_epoch, txn.pending_state) == (
        S.PREPARE_EPOCH_FENCE, 1, S.PREPARE_EPOCH_FENCE,
    )  # fmt: skip
    txn.apply_epoch_fence(fence.producer_epoch)
    abort = txn.prepare_abort_or_commit(S.PREPARE_ABORT, 20)
    assert abort.producer_epoch == 1
    txn.abort_transition()
    txn.has_failed_epoch_fence = True
    assert txn.prepare_fence_epoch().producer_epoch == 1  # not bumped twice
    with pytest.raises(IllegalTransition):
        fresh(MAX_EPOCH, S.ONGOING).prepare_fence_epoch()


def test_rotation_to_a_new_producer_id() -> None:
    txn = fresh(MAX_EPOCH - 1, S.COMPLETE_COMMIT)
    assert txn.epoch_exhausted
    with pytest.raises(IllegalTransition):
        txn.prepare_increment_epoch(60_000, None, 2)
    rotated = txn.prepare_producer_id_rotation(2000, 60_000, 2, True)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_epoch) == (
        2000, 0, MAX_EPOCH - 1,
    )  # fmt: skip
    txn.complete_transition(rotated)
    assert (txn.producer_id, txn.last_producer_id) == (2000, 1000)


def test_dead_from_idle_states_only() -> None:
    for state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
        txn = fresh(state=state)
        txn.complete_transition(txn.prepare_dead())
        assert txn.state is S.DEAD
    with pytest.raises(IllegalTransition):
        ongoing().prepare_dead()


# --- the coordinator's decisions -------------------------------------------------------------


def test_init_producer_id_decisions() -> None:
    prepare = TransactionCoordinator._prepare_init
    # an open transaction is fenced (then aborted)
    fence = prepare(ongoing(), 60_000, None, None)
    assert not isinstance(fence, ErrorCode) and fence.state is S.PREPARE_EPOCH_FENCE
    # while the end of a transaction is in flight: retry
    preparing = fresh(state=S.PREPARE_COMMIT)
    assert prepare(preparing, 60_000, None, None) is E.CONCURRENT_TRANSACTIONS
    pending = fresh()
    pending.prepare_add_partitions(frozenset({A0}), 10)
    assert prepare(pending, 60_000, None, None) is E.CONCURRENT_TRANSACTIONS
    # KIP-360: another producer id, or an unknown epoch, is fenced
    assert prepare(fresh(3), 60_000, (999, 3), None) is E.PRODUCER_FENCED
    assert prepare(fresh(3), 60_000, (1000, 1), None) is E.PRODUCER_FENCED
    ok = prepare(fresh(3), 60_000, (1000, 3), None)
    assert not isinstance(ok, ErrorCode) and (ok.producer_id, ok.producer_epoch) == (1000, 4)


def test_end_txn_decisions() -> None:
    end = TransactionCoordinator._prepare_end
    assert end(None, 1000, 0, True, True) is E.INVALID_PRODUCER_ID_MAPPING
    assert end(ongoing(), 1001, 0, True, True) is E.INVALID_PRODUCER_ID_MAPPING
    assert end(ongoing(), 1000, 1, True, True) is E.PRODUCER_FENCED
    assert end(fresh(), 1000, 0, True, True) is E.INVALID_TXN_STATE
    assert end(fresh(state=S.COMPLETE_COMMIT), 1000, 0, True, True) is E.NONE  # a retry
    assert end(fresh(state=S.COMPLETE_COMMIT), 1000, 0, False, True) is E.INVALID_TXN_STATE
    assert end(fresh(state=S.COMPLETE_ABORT), 1000, 0, False, True) is E.NONE
    assert end(fresh(state=S.COMPLETE_ABORT), 1000, 0, True, True) is E.INVALID_TXN_STATE
    assert end(fresh(state=S.PREPARE_COMMIT), 1000, 0, True, True) is E.CONCURRENT_TRANSACTIONS
    assert end(fresh(state=S.PREPARE_COMMIT), 1000, 0, False, True) is E.INVALID_TXN_STATE
    assert end(fresh(state=S.PREPARE_ABORT), 1000, 0, False, True) is E.CONCURRENT_TRANSACTIONS
    assert end(fresh(state=S.PREPARE_ABORT), 1000, 0, True, True) is E.INVALID_TXN_STATE
    commit = end(ongoing(), 1000, 0, True, True)
    assert not isinstance(commit, ErrorCode) and commit[0].state is S.PREPARE_COMMIT
    # a fence pending: the coordinator's own abort goes through with the bumped epoch
    txn = ongoing()
    fence = txn.prepare_fence_epoch()
    assert end(txn, 1000, 0, False, True) is E.CONCURRENT_TRANSACTIONS  # the client waits
    aborted = end(txn, 1000, fence.producer_epoch, False, False)
    assert not isinstance(aborted, ErrorCode)
    assert aborted[1] and aborted[0].state is S.PREPARE_ABORT and aborted[0].producer_epoch == 1


# --- records ---------------------------------------------------------------------------------


def test_records_round_trip_through_the_generated_schemas() -> None:
    txn = ongoing(frozenset({A0, A1, B0}))
    transit = txn.transit()
    key, value = txn_key("tx"), txn_value(transit)
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"
    decoded_value = message("TransactionLogValue").decode(value[2:], 0)
    assert decoded_value["transaction_status"] == 1
    assert decoded_value["transaction_partitions"] == [
        {"topic": "a", "partition_ids": [0, 1]},
        {"topic": "b", "partition_ids": [0]},
    ]
    assert message("TransactionLogKey").decode(key[2:], 0) == {"transactional_id": "tx"}
    record = decode_record(key, value)
    assert record.transactional_id == "tx"
    assert record.transit is not None
    assert record.transit.partitions == transit.partitions
    assert (record.transit.producer_id, record.transit.producer_epoch) == (1000, 0)
    assert record.transit.state is S.ONGOING
    assert (record.transit.start_timestamp_ms, record.transit.last_update_timestamp_ms) == (10, 10)
    assert decode_record(key, None).transit is None  # a tombstone
    # the flexible v1 Kafka 4 writes is read too
    v1 = message("TransactionLogValue").encode(
        {**decoded_value, "previous_producer_id": 77, "client_transaction_version": 2}, 1
    )
    again = decode_record(key, b"\x00\x01" + v1).transit
    assert again is not None and again.last_producer_id == 77


def test_bad_records_are_refused() -> None:
    with pytest.raises(InvalidTxnRecord):
        decode_record(b"\x00", None)
    with pytest.raises(InvalidTxnRecord):
        decode_record(b"\x00\x05" + txn_key("tx")[2:], None)
    with pytest.raises(InvalidTxnRecord):
        decode_record(txn_key("tx"), b"\x00\x00\x00")
    bad_state = bytearray(txn_value(ongoing().transit()))
    bad_state[2 + 8 + 2 + 4] = 42  # transaction_status
    with pytest.raises(InvalidTxnRecord):
        decode_record(txn_key("tx"), bytes(bad_state))


def test_partition_of_a_transactional_id_is_kafkas() -> None:
    # Java: "my-txn".hashCode() == -1061187895: Utils.abs gives partition 45 of 50 (a
    # sign mask would give 3); "polygenelubricants".hashCode() == Integer.MIN_VALUE -> 0
    assert txn_partition_for("my-txn", 50) == 45
    assert java_abs(-(1 << 31)) == 0
    assert txn_partition_for("polygenelubricants", 50) == 0
    assert txn_partition_for("tx-0", 50) == 3572519 % 50
