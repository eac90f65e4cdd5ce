"""CompletedFetch: how fetched bytes become records (positions, control and aborted
batches, CRC checks, deserializers), driven by bytes only."""

from __future__ import annotations

import pytest

from logbus.client.consumer.fetcher import CompletedFetch
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.control import ControlType, build_end_txn_batch

TP = TopicPartition("t", 0)


def data(base: int, *values: bytes, **kwargs: object) -> bytes:
    return build_batch([NewRecord(None, v) for v in values], base_offset=base, **kwargs)  # type: ignore[arg-type]


def txn(base: int, pid: int, *values: bytes) -> bytes:
    return data(base, *values, producer_id=pid, producer_epoch=0, base_sequence=0,
                is_transactional=True)


def marker(base: int, pid: int, kind: ControlType) -> bytes:
    return build_end_txn_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                               base_offset=base)


# 0-2 plain, 3-4 producer 7 (aborted at 5), 6-7 producer 8 (committed at 8), 9 plain
RECORD_SET = b"".join([
    data(0, b"0", b"1", b"2"),
    txn(3, 7, b"3", b"4"),
    marker(5, 7, ControlType.ABORT),
    txn(6, 8, b"6", b"7"),
    marker(8, 8, ControlType.COMMIT),
    data(9, b"9"),
])


def fetch(raw: bytes, offset: int = 0, aborted: list[tuple[int, int]] | None = None,
          **kwargs: object) -> CompletedFetch:
    options: dict[str, object] = {"check_crcs": True, "key_deserializer": None,
                                  "value_deserializer": None, **kwargs}
    return CompletedFetch(TP, 0, offset, memoryview(raw), aborted=aborted, **options)  # type: ignore[arg-type]


def test_read_uncommitted_returns_every_data_record_and_skips_markers() -> None:
    f = fetch(RECORD_SET)
    records = f.take(100)
    assert [r.value for r in records] == [b"0", b"1", b"2", b"3", b"4", b"6", b"7", b"9"]
    assert [r.offset for r in records] == [0, 1, 2, 3, 4, 6, 7, 9]
    assert f.next_offset == 10 and f.empty


def test_read_committed_drops_aborted_transactions() -> None:
    f = fetch(RECORD_SET, aborted=[(7, 3)])
    assert [r.value for r in f.take(100)] == [b"0", b"1", b"2", b"6", b"7", b"9"]
    assert f.next_offset == 10


def test_take_in_steps_moves_next_offset_and_starts_at_the_fetch_offset() -> None:
    f = fetch(RECORD_SET, offset=1)
    assert [r.offset for r in f.take(2)] == [1, 2]
    assert f.next_offset == 3
    assert [r.offset for r in f.take(3)] == [3, 4, 6]
    assert f.next_offset == 7
    assert [r.offset for r in f.take(10)] == [7, 9]
    assert f.empty and f.next_offset == 10


def test_a_trailing_partial_batch_is_left_for_the_next_fetch() -> None:
    whole = data(0, b"a", b"b")
    f = fetch(whole + data(2, b"c")[:30])
    assert [r.value for r in f.take(10)] == [b"a", b"b"]
    assert f.next_offset == 2


def test_corrupt_batch_raises_until_the_application_seeks() -> None:
    raw = bytearray(data(0, b"good") + data(1, b"value"))
    raw[-2] ^= 0xFF  # inside the second batch's value
    f = fetch(bytes(raw))
    assert [r.value for r in f.take(1)] == [b"good"]
    with pytest.raises(KafkaError, match="CRC32C mismatch") as caught:
        f.take(1)
    assert caught.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError):
        f.take(1)
    assert f.next_offset == 1
    unchecked = fetch(bytes(raw), check_crcs=False)
    assert len(unchecked.take(2)) == 2


def test_deserializers_and_record_fields() -> None:
    raw = build_batch([NewRecord(b"k", b"5", (("h", b"v"),), 1234)], base_offset=4,
                      log_append_time=True, max_timestamp=9999)
    f = fetch(raw, offset=4, key_deserializer=bytes.decode, value_deserializer=int)
    (record,) = f.take(5)
    assert record == ("t", 0, 4, 9999, 1, "k", 5, (("h", b"v"),))


def test_a_failing_deserializer_delivers_the_records_before_and_stops_at_its_record() -> None:
    raw = data(0, b"1", b"2", b"x", b"4") + data(4, b"5")
    f = fetch(raw, value_deserializer=int)
    assert [r.value for r in f.take(10)] == [1, 2]  # what came before the bad record
    assert f.next_offset == 2
    for _ in range(2):  # it stays there: the application has to seek past it
        with pytest.raises(ValueError):
            f.take(10)
        assert f.next_offset == 2
    past = fetch(raw, offset=3, value_deserializer=int)
    assert [r.value for r in past.take(10)] == [4, 5]


def test_read_committed_keeps_a_producers_next_transaction_after_its_abort() -> None:
    # producer 7: aborted 0-1 (marker 2), committed 3 (marker 4), aborted 5 (marker 6);
    # producer 8 interleaved: committed 7 (marker 8). Aborted list as the broker sends it.
    raw = b"".join([
        txn(0, 7, b"a0", b"a1"),
        marker(2, 7, ControlType.ABORT),
        txn(3, 7, b"c3"),
        marker(4, 7, ControlType.COMMIT),
        txn(5, 7, b"a5"),
        marker(6, 7, ControlType.ABORT),
        txn(7, 8, b"c7"),
        marker(8, 8, ControlType.COMMIT),
    ])
    f = fetch(raw, aborted=[(7, 5), (7, 0)])
    assert [(r.offset, r.value) for r in f.take(100)] == [(3, b"c3"), (7, b"c7")]
    assert f.next_offset == 9 and f.empty
    # read_uncommitted returns every data record, never a marker
    assert [r.offset for r in fetch(raw).take(100)] == [0, 1, 3, 5, 7]


def test_read_committed_skips_an_aborted_transaction_whose_marker_is_not_fetched_yet() -> None:
    raw = txn(0, 7, b"a0") + data(1, b"p1") + txn(2, 7, b"a2")
    f = fetch(raw, aborted=[(7, 0)])
    assert [r.value for r in f.take(100)] == [b"p1"]
    assert f.next_offset == 3


def test_end_offset_is_where_the_partitions_next_fetch_starts() -> None:
    # Known before any record is taken: the next fetch goes out while these are read.
    f = fetch(RECORD_SET, offset=4)
    assert f.end_offset == 10 and f.next_offset == 4
    f.take(2)
    assert f.end_offset == 10
    # A record set cut inside its last batch (a fetch's size limit) ends before it.
    cut = fetch(RECORD_SET[: len(RECORD_SET) - 5])
    assert cut.end_offset == 9
    assert [r.offset for r in cut.take(100)] == [0, 1, 2, 3, 4, 6, 7]
    assert cut.next_offset == cut.end_offset == 9
