"""The producer's incremental batch path: records written one by one (`write_plain_record`,
`write_record`), sealed once (`seal_batch`), restamped for a new epoch (`restamp_batch`),
byte-identical to `build_batch`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from record_strategies import large_bytes

from logbus.records.batch import BatchHeader, compute_crc
from logbus.records.builder import (
    NewRecord,
    build_batch,
    new_batch_buffer,
    restamp_batch,
    seal_batch,
)
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_batch
from logbus.records.record import write_plain_record, write_record

maybe_bytes = st.none() | st.binary(max_size=300) | large_bytes


@given(
    st.integers(0, 20_000),
    st.integers(-(2**40), 2**40),
    maybe_bytes,
    maybe_bytes,
)
def test_plain_record_equals_write_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None
) -> None:
    plain, general = bytearray(b"prefix"), bytearray(b"prefix")
    write_plain_record(plain, offset_delta, timestamp_delta, key, value)
    write_record(general, offset_delta, timestamp_delta, key, value, ())
    assert plain == general


@pytest.mark.parametrize("codec", list(CompressionType))
def test_sealed_batch_equals_build_batch(codec: CompressionType) -> None:
    records = [
        NewRecord(b"k%d" % i if i % 3 else None, b"v" * i, (), 1_000 + i * 7) for i in range(50)
    ]
    records.append(NewRecord(b"h", b"with headers", (("a", b"1"), ("b", None)), 990))
    buf = new_batch_buffer()
    for index, r in enumerate(records):
        assert r.timestamp is not None
        if r.headers:
            write_record(buf, index, r.timestamp - 1_000, r.key, r.value, r.headers)
        else:
            write_plain_record(buf, index, r.timestamp - 1_000, r.key, r.value)
    sealed = seal_batch(
        buf,
        count=len(records),
        base_timestamp=1_000,
        max_timestamp=max(r.timestamp or 0 for r in records),
        compression=codec,
        producer_id=7,
        producer_epoch=2,
        base_sequence=100,
    )
    expected = build_batch(
        records, compression=codec, producer_id=7, producer_epoch=2, base_sequence=100
    )
    assert bytes(sealed) == expected


def test_restamp_rewrites_producer_fields_and_crc() -> None:
    buf = new_batch_buffer()
    write_plain_record(buf, 0, 0, b"k", b"v")
    sealed = seal_batch(
        buf, count=1, base_timestamp=5, max_timestamp=5, producer_id=1, producer_epoch=0,
        base_sequence=40,
    )  # fmt: skip
    restamp_batch(sealed, producer_id=1, producer_epoch=1, base_sequence=0)
    header = BatchHeader.parse(sealed)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1, 1, 0)
    assert header.crc == compute_crc(sealed)
    _, [record] = decode_batch(sealed)
    assert (record.key, record.value, record.timestamp) == (b"k", b"v", 5)
