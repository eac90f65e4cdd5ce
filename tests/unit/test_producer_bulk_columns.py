"""Which records `send_many` takes down its bulk path, and the bulk path's partitioning and
result ordering helpers (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbus.client.partitioner import partition_for_key
from logbus.client.producer.accumulator import ProducerBatch, record_size
from logbus.client.producer.bulk import (
    PlainRecords,
    Run,
    encoded_overhead,
    group_by_partition,
    metadata_of,
    plain_records,
    record_sizes,
    unsort,
)
from logbus.client.producer.records import ProducerRecord, RecordMetadata
from logbus.client.types import TopicPartition
from logbus.records.record import size_of_record


def test_keyless_records_of_one_topic_are_plain() -> None:
    records = [ProducerRecord("t", b"a"), ProducerRecord("t", b"bb")]
    assert plain_records(records, True, True) == PlainRecords("t", [b"a", b"bb"], None)


def test_records_with_bytes_keys_are_plain_with_their_keys() -> None:
    records = [ProducerRecord("t", b"a", b"k1"), ProducerRecord("t", b"b", b"k2")]
    assert plain_records(records, True, True) == PlainRecords("t", [b"a", b"b"], [b"k1", b"k2"])
    # ...but only with the identity key serializer
    assert plain_records(records, False, True) is None


@pytest.mark.parametrize(
    "other",
    [
        ProducerRecord("u", b"v"),  # a second topic
        ProducerRecord("t", b"v", partition=0),
        ProducerRecord("t", b"v", timestamp=5),
        ProducerRecord("t", b"v", headers=[("h", b"1")]),
        ProducerRecord("t", None),  # a tombstone
        ProducerRecord("t", "text"),  # for the value serializer
        ProducerRecord("t", bytearray(b"v")),
        ProducerRecord("t", b"v", key=b"k"),  # keys neither all None nor all bytes
        ("t", b"v"),  # not a ProducerRecord's six fields
        "not a record",
    ],
)
def test_records_needing_their_own_decision_take_the_general_path(other: Any) -> None:
    records: list[Any] = [ProducerRecord("t", b"v"), other]
    assert plain_records(records, True, True) is None


def test_nothing_or_a_value_serializer_means_the_general_path() -> None:
    assert plain_records([], True, True) is None
    assert plain_records([ProducerRecord("t", b"v")], True, False) is None


def test_record_sizes_are_the_accounted_sizes_and_their_running_totals() -> None:
    plain = PlainRecords("t", [b"a" * 10, b""], [b"k", b"key"])
    sizes, ends, same_length = record_sizes(plain)
    assert list(sizes) == [record_size(b"k", b"a" * 10, ()), record_size(b"key", b"", ())]
    assert list(ends) == [sizes[0], sizes[0] + sizes[1]]
    assert not same_length
    # Keyless values of one length: computed, not listed.
    sizes, ends, same_length = record_sizes(PlainRecords("t", [b"abc"] * 4, None))
    assert same_length
    assert list(sizes) == [record_size(None, b"abc", ())] * 4
    assert list(ends) == [sizes[0] * n for n in range(1, 5)]
    sizes, ends, same_length = record_sizes(PlainRecords("t", [b"abc", b"ab"], None))
    assert not same_length
    assert list(ends) == [sizes[0], sizes[0] + sizes[1]]


def test_group_by_partition_uses_murmur2_and_keeps_each_keys_order() -> None:
    keys = [b"key-%d" % (i % 13) for i in range(200)]
    cache: dict[bytes, int] = {}
    order, counts = group_by_partition(keys, 5, cache, 65536)
    assert sorted(order) == list(range(200))
    partitions = [partition_for_key(keys[i], 5) for i in order]
    assert partitions == sorted(partitions)  # grouped by partition, in partition order
    assert counts == [partitions.count(p) for p in range(5)]
    for key in set(keys):
        mine = [i for i in order if keys[i] == key]
        assert mine == sorted(mine)  # a key's records keep the order they were given in
    assert cache == {k: partition_for_key(k, 5) for k in set(keys)}
    # A full cache is emptied rather than grown.
    small: dict[bytes, int] = {}
    group_by_partition(keys, 5, small, 4)
    assert len(small) <= 4


def test_metadata_follows_runs_and_unsort_restores_the_callers_order() -> None:
    first = ProducerBatch(TopicPartition("t", 1), 100, 0.0)
    first.append_values([b"a", b"b", b"c"], None, 100, 0)
    second = ProducerBatch(TopicPartition("t", 0), 200, 0.0)
    second.append_values([b"d"], None, 200, 0)
    first.complete(10, -1)
    second.complete(-1, -1)  # acks=0: no offset
    runs = [Run(first, 1, 2), Run(second, 0, 1), Run(first, 0, 1)]
    mds = metadata_of(runs)
    assert mds == [
        RecordMetadata("t", 1, 11, 100),
        RecordMetadata("t", 1, 12, 100),
        RecordMetadata("t", 0, -1, 200),
        RecordMetadata("t", 1, 10, 100),
    ]
    assert all(type(md) is RecordMetadata for md in mds)
    # mds[i] belongs to the caller's record order[i]
    assert unsort(mds, [2, 0, 3, 1]) == [mds[1], mds[3], mds[0], mds[2]]


@given(
    st.integers(0, 70_000),
    st.data(),
    st.booleans(),
    st.integers(0, 1 << 21),
    st.integers(-(2**40), 2**40),
)
def test_encoded_overhead_bounds_every_record_it_covers(
    largest: int, data: st.DataObject, keyed: bool, last_offset_delta: int, timestamp_delta: int
) -> None:
    key_size = data.draw(st.integers(0, largest)) if keyed else 0
    value_size = data.draw(st.integers(0, largest - key_size))
    offset_delta = data.draw(st.integers(0, last_offset_delta))
    key = b"k" * key_size if keyed else None
    encoded = size_of_record(offset_delta, timestamp_delta, key, b"v" * value_size)
    bound = encoded_overhead(largest, keyed, last_offset_delta, timestamp_delta)
    assert encoded - key_size - value_size <= bound
    if not keyed:  # ...and tight for the largest keyless record at the last offset
        top = size_of_record(last_offset_delta, timestamp_delta, None, b"v" * largest)
        assert top - largest == bound
