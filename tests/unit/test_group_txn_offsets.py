"""The group coordinator's transactional offsets as pure state: TxnOffsetCommit keeps
them pending per producer (written as a transactional batch of that producer), the
transaction's marker (`TxnCompletion`) commits or drops them, OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile, and a load replays the same
from the log (`replay_transactional`, then `complete_transaction`)."""

from __future__ import annotations

from typing import Any

from logbus.coordinator.group import GroupConfig, GroupsState, apply
from logbus.coordinator.group import events as ev
from logbus.coordinator.group import records as rec
from logbus.coordinator.group.offsets import complete_transaction
from logbus.coordinator.group.shard import replay, replay_transactional
from logbus.protocol import ErrorCode

E = ErrorCode
CFG = GroupConfig(initial_rebalance_delay_ms=0)


def txn_commit(state: GroupsState, pid: int, offset: int, **extra: Any) -> tuple[Any, Any]:
    token = object()
    event = ev.TxnOffsetCommit(
        token,
        1000,
        "g",
        pid,
        0,
        (("t", (ev.PartitionCommit(0, offset, metadata="m"),)),),
        **extra,
    )
    result = apply(state, event, CFG)
    ((answered, body),) = result.responses
    assert answered is token
    return result, body


def fetch(state: GroupsState, require_stable: bool) -> tuple[int, int]:
    token = object()
    result = apply(state, ev.OffsetFetch(token, 1000, "g", (("t", (0,)),), require_stable), CFG)
    partition = result.responses[0][1]["topics"][0]["partitions"][0]
    return partition["error_code"], partition["committed_offset"]


def test_pending_until_committed() -> None:
    state = GroupsState()
    result, body = txn_commit(state, 7, 42)
    assert body["topics"][0]["partitions"][0]["error_code"] == E.NONE
    assert (result.producer_id, result.producer_epoch) == (7, 0)  # a transactional batch
    assert len(result.records) == 1
    assert fetch(state, False) == (E.NONE, -1)
    assert fetch(state, True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    apply(state, ev.TxnCompletion(1001, 8, True), CFG)  # another producer's marker
    assert fetch(state, True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    apply(state, ev.TxnCompletion(1001, 7, True), CFG)
    assert fetch(state, True) == (E.NONE, 42)


def test_dropped_when_aborted() -> None:
    state = GroupsState()
    txn_commit(state, 7, 42)
    apply(state, ev.TxnCompletion(1001, 7, True), CFG)
    txn_commit(state, 7, 50)
    apply(state, ev.TxnCompletion(1002, 7, False), CFG)
    assert fetch(state, True) == (E.NONE, 42)
    assert not state.groups["g"].pending_txn_offsets


def test_member_checks_and_metadata_size() -> None:
    state = GroupsState()
    _, body = txn_commit(state, 7, 1, generation_id=3, member_id="ghost")
    assert body["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_MEMBER_ID
    _, body = txn_commit(state, 7, 1, generation_id=3)
    assert body["topics"][0]["partitions"][0]["error_code"] == E.ILLEGAL_GENERATION
    big = GroupConfig(initial_rebalance_delay_ms=0, offset_metadata_max_bytes=0)
    token = object()
    result = apply(
        state,
        ev.TxnOffsetCommit(
            token, 1, "g", 7, 0, (("t", (ev.PartitionCommit(0, 1, metadata="m"),)),)
        ),
        big,
    )
    assert result.responses[0][1]["topics"][0]["partitions"][0]["error_code"] == (
        E.OFFSET_METADATA_TOO_LARGE
    )
    assert not result.records


def test_a_load_replays_pending_offsets_and_their_markers() -> None:
    state = GroupsState()
    key = rec.offset_commit_key("g", "t", 0)
    replay(state, key, rec.offset_commit_value(rec.OffsetCommit("g", "t", 0, 5)))
    replay_transactional(state, 7, key, rec.offset_commit_value(rec.OffsetCommit("g", "t", 0, 9)))
    replay_transactional(state, 8, key, rec.offset_commit_value(rec.OffsetCommit("g", "t", 0, 11)))
    assert fetch(state, True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    complete_transaction(state, 8, False)
    complete_transaction(state, 7, True)
    assert fetch(state, True) == (E.NONE, 9)
