"""The log side of transactions: the transaction index, open and completed transactions in
producer state, the last stable offset, aborted-transaction collection, snapshots and
recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from storage_helpers import make_batch

from logbus.records.control import ControlType, build_end_txn_batch
from logbus.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.storage.producer_state import ProducerStateManager, decode_snapshot
from logbus.storage.segment import TXN_INDEX_SUFFIX
from logbus.storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    decode_entries,
)

P1, P2 = 7001, 7002


def open_log(tmp_path: Path, **config: object) -> Log:
    return Log(tmp_path / "txns-0", LogConfig(**config), now_ms=0)  # type: ignore[arg-type]


def txn_data(log: Log, pid: int, seq: int, count: int = 2, epoch: int = 0) -> int:
    """Append a transactional batch; returns its first offset."""
    batch = make_batch(
        count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    return log.append_as_leader(batch, leader_epoch=0, now_ms=1).first_offset


def marker(
    log: Log, pid: int, kind: ControlType, *, epoch: int = 0, coordinator_epoch: int = 0
) -> int:
    batch = build_end_txn_batch(
        kind, producer_id=pid, producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
        timestamp=2,
    )
    return log.append_as_leader(batch, leader_epoch=0, now_ms=2, from_client=False).first_offset


def plain(log: Log, count: int = 1) -> int:
    return log.append_as_leader(make_batch(count), leader_epoch=0, now_ms=1).first_offset


def test_txn_index_uses_kafkas_34_byte_entries(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / f"{0:020d}{TXN_INDEX_SUFFIX}")
    index.append(AbortedTxn(5, 10, 20, 11))
    index.append(AbortedTxn(6, 12, 30, 31))
    data = index.path.read_bytes()
    assert ENTRY_SIZE == 34 and len(data) == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 5, 10, 20, 11)
    assert decode_entries(data) == [AbortedTxn(5, 10, 20, 11), AbortedTxn(6, 12, 30, 31)]
    # read back by a fresh object, as after a restart
    again = TransactionIndex(index.path)
    assert again.collect_aborted(0, 15).aborted == [
        AbortedTxn(5, 10, 20, 11), AbortedTxn(6, 12, 30, 31)
    ]
    assert again.collect_aborted(21, 100).aborted == [AbortedTxn(6, 12, 30, 31)]
    assert again.collect_aborted(0, 10).aborted == []  # both start at or after the bound
    assert again.collect_aborted(0, 11).is_complete  # the first entry's LSO reaches 11
    again.truncate_to(30)
    assert TransactionIndex(index.path).entries == [AbortedTxn(5, 10, 20, 11)]
    with pytest.raises(ValueError):
        again.append(AbortedTxn(9, 1, 5, 6))  # not after the last marker
    again.truncate_to(0)
    assert not index.path.exists()


def test_a_torn_txn_index_entry_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    TransactionIndex(path).append(AbortedTxn(1, 0, 3, 4))
    with path.open("ab") as f:
        f.write(b"\x00" * 10)
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 3, 4)]


def test_lso_follows_open_transactions_and_the_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    plain(log, 3)  # 0-2
    first1 = txn_data(log, P1, 0)  # 3-4
    txn_data(log, P2, 0)  # 5-6
    txn_data(log, P1, 2)  # 7-8, continues P1's transaction
    plain(log)  # 9
    log.high_watermark = log.log_end_offset
    assert log.producer_state.ongoing_txns == {P1: 3, P2: 5}
    assert log.last_stable_offset == first1 == 3
    commit_at = marker(log, P1, ControlType.COMMIT)  # 10
    # the marker is above the high watermark: P1's transaction is not stable yet
    assert log.last_stable_offset == 3
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 5  # now P2's open transaction bounds it
    abort_at = marker(log, P2, ControlType.ABORT)  # 11
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset == 12
    assert log.producer_state.ongoing_txns == {}
    # only the aborted transaction is indexed, with the LSO at its completion (12: no
    # other transaction was open)
    assert log.collect_aborted_transactions(0, 12) == [AbortedTxn(P2, 5, abort_at, 12)]
    assert log.collect_aborted_transactions(7, 12) == [AbortedTxn(P2, 5, abort_at, 12)]
    assert log.collect_aborted_transactions(abort_at + 1, 12) == []
    assert commit_at == 10


def test_aborted_entry_lso_is_the_oldest_other_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)  # 0-1
    txn_data(log, P2, 0)  # 2-3
    at = marker(log, P2, ControlType.ABORT)  # 4, while P1 is open from 0
    assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(P2, 2, at, 0)]


def test_marker_checks_coordinator_and_producer_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0, epoch=3)
    marker(log, P1, ControlType.COMMIT, epoch=3, coordinator_epoch=5)
    txn_data(log, P1, 2, epoch=3)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, P1, ControlType.ABORT, epoch=3, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        marker(log, P1, ControlType.ABORT, epoch=2, coordinator_epoch=5)
    assert log.log_end_offset == end and log.producer_state.ongoing_txns == {P1: 3}
    # a newer epoch (the coordinator fenced the producer) ends the open transaction
    marker(log, P1, ControlType.ABORT, epoch=4, coordinator_epoch=6)
    assert log.producer_state.ongoing_txns == {}
    entry = log.producer_state.last_entry(P1)
    assert entry is not None and entry.producer_epoch == 4 and entry.coordinator_epoch == 6


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)
    idempotent = make_batch(1, producer_id=P1, producer_epoch=0, base_sequence=2)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(idempotent, leader_epoch=0, now_ms=1)


def test_open_transactions_never_expire_and_survive_snapshots(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)  # 0-1
    txn_data(log, P2, 0)  # 2-3
    marker(log, P2, ControlType.COMMIT)  # 4
    assert log.remove_expired_producers(now_ms=10**12, expiration_ms=1) == 1  # P2 only
    assert set(log.producer_state.producers) == {P1}
    log.close()
    snapshots = sorted(log.dir.glob("*.snapshot"))
    entries = decode_snapshot(snapshots[-1].read_bytes())
    assert [(e.producer_id, e.current_txn_first_offset) for e in entries] == [(P1, 0)]
    again = open_log(tmp_path)
    try:
        again.high_watermark = again.log_end_offset
        assert again.producer_state.ongoing_txns == {P1: 0}
        assert again.last_stable_offset == 0
    finally:
        again.close()


def test_snapshot_round_trip_in_the_state_manager(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)
    log.take_producer_snapshot()
    log.close(clean=False)
    state = ProducerStateManager(log.dir)
    assert state.load(10) == 2
    assert state.ongoing_txns == {P1: 0} and state.first_undecided_offset() == 0


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)  # 0-1
    at = marker(log, P1, ControlType.ABORT)  # 2
    plain(log)  # 3
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(P1, 0, at, 3)]
    log.truncate_to(at)  # a follower loses the marker
    assert log.collect_aborted_transactions(0, 4) == []
    assert log.producer_state.ongoing_txns == {P1: 0}
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    log.close()


def test_txn_index_follows_its_segment_on_roll_and_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    txn_data(log, P1, 0)  # 0-1
    marker(log, P1, ControlType.ABORT)  # 2, in segment 0
    log.roll(now_ms=5)
    txn_data(log, P2, 0)  # 3-4
    at = marker(log, P2, ControlType.ABORT)  # 5, in segment 3
    assert [len(s.txn_index.entries) for s in log.segments] == [1, 1]
    assert log.collect_aborted_transactions(0, 6) == [
        AbortedTxn(P1, 0, 2, 3), AbortedTxn(P2, 3, at, 6)
    ]
    # a read from offset 3 starts in the second segment
    assert log.collect_aborted_transactions(3, 6) == [AbortedTxn(P2, 3, at, 6)]
    first_index = log.segments[0].txn_index.path
    log.high_watermark = log.log_end_offset
    log.maybe_increment_log_start_offset(3)
    log.delete_old_segments(now_ms=10)
    log.remove_deleted_segments(force=True)
    assert not first_index.exists()
    assert not any(log.dir.glob(f"*{TXN_INDEX_SUFFIX}.deleted"))
    log.close()


def test_recovery_after_a_crash_mid_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    plain(log)  # 0
    txn_data(log, P1, 0)  # 1-2
    txn_data(log, P2, 0)  # 3-4
    aborted_at = marker(log, P2, ControlType.ABORT)  # 5
    txn_data(log, P1, 2)  # 6-7, P1 still open
    assert len(log.segments) > 1  # spread over segments by segment.bytes
    expected = log.collect_aborted_transactions(0, log.log_end_offset)
    assert expected == [AbortedTxn(P2, 3, aborted_at, 1)]
    end = log.log_end_offset
    # a crash: nothing flushed, no snapshot, and the indexes lost
    log.close(clean=False)
    for path in log.dir.glob("*.snapshot"):
        path.unlink()
    for path in log.dir.glob(f"*{TXN_INDEX_SUFFIX}"):
        path.unlink()
    # and a torn tail: half of a batch that never made it whole
    with (log.dir / f"{log.segments[-1].base_offset:020d}.log").open("ab") as f:
        f.write(make_batch(3)[:40])
    again = Log(log.dir, LogConfig(segment_bytes=400), now_ms=0, had_clean_shutdown=False)
    try:
        assert again.log_end_offset == end
        again.high_watermark = again.log_end_offset
        assert again.producer_state.ongoing_txns == {P1: 1}
        assert again.last_stable_offset == 1
        assert again.collect_aborted_transactions(0, end) == expected
    finally:
        again.close()
