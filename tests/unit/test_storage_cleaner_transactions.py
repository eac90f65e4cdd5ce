"""The log cleaner's rules for transactions on real logs: aborted records go (and shadow
nothing), markers stay while their transaction has records and then until their delete
horizon, and nothing at or after the last stable offset is cleaned."""

from __future__ import annotations

from pathlib import Path

from storage_helpers import new_cleaner, open_log, records_of

from logbus.records.builder import build_batch
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.storage.cleaner import LogToClean
from logbus.storage.log import Log
from logbus.storage.log_cleaner_manager import cleanable_offsets
from logbus.storage.transaction_index import AbortedTxn
from logbus.types import TopicPartition

NOW = 10_000_000
RETENTION = 1000
P1, P2, P3 = 51, 52, 53


def put(log: Log, key: bytes, value: bytes, pid: int = -1, seq: int = -1) -> None:
    batch = build_batch(
        [(key, value)], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq, is_transactional=pid >= 0,
    )
    log.append_as_leader(batch, 0, now_ms=1000)
    log.high_watermark = log.log_end_offset


def end_txn(log: Log, pid: int, kind: ControlType) -> None:
    marker = build_end_txn_batch(
        kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=1000
    )
    log.append_as_leader(marker, 0, now_ms=1000, from_client=False)
    log.high_watermark = log.log_end_offset


def clean(log: Log, now: int) -> None:
    upper = cleanable_offsets(log, None, now)[1]
    new_cleaner().clean(LogToClean(TopicPartition("compacted", 0), log, 0, upper), now_ms=now)


def markers(log: Log) -> list[tuple[int, int, bool]]:
    """(offset, producer id, has a delete horizon) of every control batch."""
    return [
        (h.base_offset, h.producer_id, bool(h.attributes & 0x40))
        for s in log.segments
        for _, h in s.iter_headers()
        if h.is_control
    ]


def data(log: Log) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every data record."""
    control = {offset for offset, _pid, _h in markers(log)}
    return [(o, v) for o, _k, v in records_of(log) if o not in control]


def test_aborted_records_go_and_markers_outlive_their_records(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100_000, delete_retention_ms=RETENTION)
    put(log, b"a", b"a0")  # 0
    put(log, b"a", b"x1", P1, 0)  # 1, aborted
    end_txn(log, P1, ControlType.ABORT)  # 2
    put(log, b"b", b"c1", P2, 0)  # 3, committed
    end_txn(log, P2, ControlType.COMMIT)  # 4
    put(log, b"c", b"c0")  # 5
    log.roll()
    put(log, b"d", b"d0")  # 6, active segment
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(P1, 1, 2, 3)]
    # the producers expired: no empty batch is kept for their state
    log.remove_expired_producers(now_ms=NOW * 10, expiration_ms=1)

    clean(log, NOW)
    # the aborted a=x1 is gone and did not shadow a=a0
    assert data(log) == [(0, b"a0"), (3, b"c1"), (5, b"c0"), (6, b"d0")]
    # its marker stays this pass (its records were met) and is indexed again
    assert markers(log) == [(2, P1, False), (4, P2, False)]
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(P1, 1, 2, 3)]

    clean(log, NOW)
    # no record of P1's transaction is left: its marker gets a delete horizon; P2's
    # committed record is still there, so its marker stays as it is
    assert markers(log) == [(2, P1, True), (4, P2, False)]
    assert log.collect_aborted_transactions(0, 6) == []
    clean(log, NOW + RETENTION - 1)
    assert markers(log) == [(2, P1, True), (4, P2, False)]
    clean(log, NOW + RETENTION + 1)
    assert markers(log) == [(4, P2, False)]

    # b's committed record is replaced: then P2's marker goes the same way
    log.roll()
    put(log, b"b", b"b2")
    log.roll()
    clean(log, NOW)
    assert (3, b"c1") not in data(log)
    assert markers(log) == [(4, P2, False)]  # its batch was still met in this pass
    clean(log, NOW)
    assert markers(log) == [(4, P2, True)]
    clean(log, NOW + RETENTION + 1)
    assert markers(log) == []
    assert [v for _o, v in data(log)] == [b"a0", b"c0", b"d0", b"b2"]
    log.close()


def test_nothing_at_or_after_the_last_stable_offset_is_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100_000)
    put(log, b"a", b"1")  # 0
    log.roll()
    put(log, b"a", b"2", P3, 0)  # 1, open
    put(log, b"a", b"3")  # 2
    log.roll()
    put(log, b"a", b"4")  # 3
    log.roll()
    assert log.last_stable_offset == 1
    assert cleanable_offsets(log, None, NOW)[1] == 1  # the segment holding the LSO
    clean(log, NOW)
    assert [v for _o, v in data(log)] == [b"1", b"2", b"3", b"4"]
    end_txn(log, P3, ControlType.COMMIT)  # 4
    log.roll()
    assert cleanable_offsets(log, None, NOW)[1] == log.active_segment.base_offset
    clean(log, NOW)
    assert [v for _o, v in data(log)] == [b"4"]
    log.close()
