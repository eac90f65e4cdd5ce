"""The producer's bulk encoding: `plain_record_parts` and `ProducerBatch.append_values`
write exactly the bytes of the one-record-at-a-time path, and sealed batches are
byte-identical to `build_batch`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_strategies import large_bytes

from logbus.client.producer.accumulator import ProducerBatch
from logbus.client.types import TopicPartition
from logbus.records.builder import NewRecord, build_batch, build_plain_batch
from logbus.records.compression import CompressionType
from logbus.records.record import plain_record_parts, write_plain_record, write_plain_records

some_bytes = st.binary(max_size=300) | large_bytes


def one_by_one(
    values: list[bytes], keys: list[bytes] | None, first: int, timestamp_delta: int
) -> bytes:
    out = bytearray()
    for index, value in enumerate(values):
        key = None if keys is None else keys[index]
        write_plain_record(out, first + index, timestamp_delta, key, value)
    return bytes(out)


@given(
    st.lists(some_bytes, max_size=40),
    st.booleans(),
    st.integers(0, 20_000),
    st.integers(-(2**40), 2**40) | st.just(0),
    st.data(),
)
def test_parts_equal_records_written_one_by_one(
    values: list[bytes], keyed: bool, first: int, timestamp_delta: int, data: st.DataObject
) -> None:
    keys = data.draw(st.lists(some_bytes, min_size=len(values), max_size=len(values)))
    keys_or_none = keys if keyed else None
    parts = plain_record_parts(
        values, keys_or_none, first_offset_delta=first, timestamp_delta=timestamp_delta
    )
    assert b"".join(parts) == one_by_one(values, keys_or_none, first, timestamp_delta)


@given(
    st.integers(0, 9000),
    st.integers(0, 300),
    st.integers(0, 10_000),
    st.sampled_from([0, 1, -1, 70, 9000, 2**33]),
)
def test_keyless_values_of_one_length_across_varint_widths(
    length: int, count: int, first: int, timestamp_delta: int
) -> None:
    # Offset deltas crossing 64 and 8192 change the width of their varint and so the
    # record's length prefix: the cached prefixes must follow.
    values = [bytes([n % 251]) * length for n in range(count)]
    out = bytearray(b"before")
    write_plain_records(out, values, first_offset_delta=first, timestamp_delta=timestamp_delta)
    assert bytes(out) == b"before" + one_by_one(values, None, first, timestamp_delta)
    told = plain_record_parts(
        values, first_offset_delta=first, timestamp_delta=timestamp_delta, same_length=True
    )
    assert b"".join(told) == bytes(out)[len(b"before") :]


def test_many_records_past_the_prefix_cache() -> None:
    values = [b"v"] * 40_000  # offset deltas past the cache and past 3-byte varints' start
    assert b"".join(plain_record_parts(values)) == one_by_one(values, None, 0, 0)
    for first in ((1 << 20) - 25, 1 << 20):  # across and past 3-byte offset deltas
        parts = plain_record_parts(values[:50], first_offset_delta=first)
        assert b"".join(parts) == one_by_one(values[:50], None, first, 0)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_batch_filled_in_bulk_seals_like_build_batch(codec: CompressionType) -> None:
    tp = TopicPartition("t", 0)
    batch = ProducerBatch(tp, 1_000, 0.0)
    expected: list[NewRecord] = []
    # A fresh batch filled in bulk, then records one by one, then bulk again with a later
    # timestamp and keys, then records of differing lengths.
    runs: list[tuple[list[bytes], list[bytes] | None, int]] = [
        ([b"a" * 100] * 70, None, 1_000),
        ([b"b" * 10] * 3, [b"k1", b"k2", b"k3"], 1_005),
        ([b"c" * n for n in range(30)], None, 990),
    ]
    for values, keys, timestamp in runs[:1]:
        batch.append_values(values, keys, timestamp, 0)
        expected += [NewRecord(None, v, (), timestamp) for v in values]
    for n in range(5):
        batch.append(b"x%d" % n, b"single", (), 1_002, None, 0)
        expected.append(NewRecord(b"x%d" % n, b"single", (), 1_002))
    for values, keys, timestamp in runs[1:]:
        first = batch.append_values(values, keys, timestamp, 0)
        assert first == len(expected)
        expected += [
            NewRecord(None if keys is None else keys[i], v, (), timestamp)
            for i, v in enumerate(values)
        ]
    batch.seal(codec, None, 42, 3, 17)
    assert batch.data is not None
    assert batch.count == len(expected)
    assert batch.timestamps == [r.timestamp for r in expected]
    assert bytes(batch.data) == build_batch(
        expected, compression=codec, producer_id=42, producer_epoch=3, base_sequence=17
    )


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("keyed", [False, True])
def test_build_plain_batch_equals_build_batch(codec: CompressionType, keyed: bool) -> None:
    values = [b"value %d " % i * (i % 9) for i in range(300)]
    keys = [b"key-%d" % (i % 17) for i in range(300)] if keyed else None
    records = [
        NewRecord(None if keys is None else keys[i], v, (), 1_700_000_000_000)
        for i, v in enumerate(values)
    ]
    fields = {"compression": codec, "producer_id": 9, "producer_epoch": 1, "base_sequence": 5}
    assert build_plain_batch(
        values, keys, timestamp=1_700_000_000_000, **fields  # type: ignore[arg-type]
    ) == build_batch(records, **fields)  # type: ignore[arg-type]


def test_build_plain_batch_refuses_no_records_and_mismatched_keys() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_plain_batch([], timestamp=0)
    with pytest.raises(ValueError, match="2 keys for 1 values"):
        build_plain_batch([b"v"], [b"a", b"b"], timestamp=0)


@given(
    st.lists(st.tuples(some_bytes, st.integers(-(2**40), 2**40) | st.integers(0, 100)),
             max_size=40),
    st.booleans(),
    st.integers(0, 20_000),
    st.data(),
)
def test_parts_with_a_timestamp_per_record_equal_records_written_one_by_one(
    records: list[tuple[bytes, int]], keyed: bool, first: int, data: st.DataObject
) -> None:
    values = [value for value, _ in records]
    deltas = [delta for _, delta in records]
    keys = data.draw(st.lists(some_bytes, min_size=len(values), max_size=len(values)))
    keys_or_none = keys if keyed else None
    parts = plain_record_parts(
        values, keys_or_none, first_offset_delta=first, timestamp_deltas=deltas
    )
    out = bytearray()
    for index, (value, delta) in enumerate(records):
        key = None if keys_or_none is None else keys_or_none[index]
        write_plain_record(out, first + index, delta, key, value)
    assert b"".join(parts) == bytes(out)


def test_batch_filled_in_bulk_with_timestamps_of_their_own_seals_like_build_batch() -> None:
    batch = ProducerBatch(TopicPartition("t", 0), 5_000, 0.0)
    stamps = [5_000, 4_990, 5_200, 5_100]  # earlier than the batch's base too
    batch.append_values([b"v" * 10] * 4, None, max(stamps), 0, timestamps=stamps)
    later = [6_000, 5_999]
    batch.append_values([b"a", b"bc"], [b"k1", b"k2"], max(later), 0, timestamps=later)
    batch.seal(CompressionType.NONE, None, -1, -1, -1)
    expected = [NewRecord(None, b"v" * 10, (), t) for t in stamps] + [
        NewRecord(b"k1", b"a", (), 6_000), NewRecord(b"k2", b"bc", (), 5_999)
    ]
    assert batch.timestamps == stamps + later
    assert batch.data is not None
    assert bytes(batch.data) == build_batch(expected)
