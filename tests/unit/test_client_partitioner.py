"""murmur2 and partition choice, against Kafka's own vectors and kafka-python."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from logbus.client.partitioner import (
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2 (signed 32-bit results, as Java's Utils.murmur2 returns).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@given(st.binary(max_size=200))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    # kafka-python returns the same 32 bits, unsigned.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=64))
def test_murmur2_accepts_any_buffer(key: bytes) -> None:
    assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == murmur2(key)


def test_partition_for_key_clears_the_sign_bit() -> None:
    # toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16
    assert to_positive(murmur2(b"foobar")) == 1357151166
    assert partition_for_key(b"foobar", 50) == 16
    assert to_positive(-(2**31)) == 0


@given(st.binary(max_size=40), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_is_in_range_and_like_kafka_python(key: bytes, n: int) -> None:
    partition = partition_for_key(key, n)
    assert 0 <= partition < n
    assert partition == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def test_sticky_partitioner_round_robins_between_batches() -> None:
    sticky = StickyPartitioner(3, start=2)
    assert sticky.current == 2
    assert [sticky.next_batch() for _ in range(4)] == [0, 1, 2, 0]
    assert 0 <= StickyPartitioner(5).current < 5
    with pytest.raises(ValueError):
        StickyPartitioner(0)


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=200), st.integers(1, 20000),
       st.integers(1, 7), st.integers(0, 6))
def test_spread_moves_on_after_each_batch_size_bytes_as_one_record_at_a_time_would(
    sizes: list[int], batch_size: int, count: int, start: int
) -> None:
    # The vectorized placement the Spark sink uses equals placing the records one by one:
    # a record goes where the bytes before it on this partition are still under batch.size.
    fast = StickyPartitioner(count, start)
    chosen = fast.spread(np.array(sizes, np.int64), batch_size).tolist()
    slow = StickyPartitioner(count, start)
    expected = []
    filled = 0
    for size in sizes:
        while filled >= batch_size:
            slow.next_batch()
            filled -= batch_size
        expected.append(slow.current)
        filled += size
    assert chosen == expected
    # and it goes on from there: the next record lands where one more would have
    while filled >= batch_size:
        slow.next_batch()
        filled -= batch_size
    assert (fast.current, fast.filled) == (slow.current, filled)
