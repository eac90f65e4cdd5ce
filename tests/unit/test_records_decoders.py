"""Every record decoder reads what the reference decoder reads (`records.reader.
decode_batch`, built on `records.record.decode_record`): the consumer's list columns
(`reader.decode_record_columns`), the Spark reader's Arrow columns
(`columnar.decode_columns`) and both validator walkers (`validation.check_records`, C
and numpy), over batches as producers write them, changed at a few records, and with a
corrupted byte: the same records, or the same `InvalidBatch`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbus.records import validation
from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.columnar import decode_columns
from logbus.records.compression import CompressionType
from logbus.records.reader import _batch_data, decode_batch, decode_record_columns
from logbus.records.validation import check_records

BASE_TIME = 1_700_000_000_000
Rows = list[tuple[Any, ...]] | str
WALKERS = [False, True] if validation.COMPILED else [False]


def reference(raw: bytes) -> Rows:
    try:
        _, records = decode_batch(raw, verify_crc=False)
    except InvalidBatch as exc:
        return str(exc)
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def consumer(raw: bytes) -> Rows:
    try:
        columns = decode_record_columns(raw, BatchHeader.parse(raw), verify_crc=False)
    except InvalidBatch as exc:
        return str(exc)
    headers = columns.headers or [()] * len(columns.offsets)
    return list(zip(columns.offsets, columns.timestamps, columns.keys, columns.values,
                    headers, strict=True))


def spark(raw: bytes) -> Rows:
    try:
        # every offset (the reader's default window starts at 0, and a corrupted offset
        # delta may put a record below it)
        columns = decode_columns(
            [(raw, BatchHeader.parse(raw))], min_offset=-(1 << 63), verify_crc=False
        )
    except InvalidBatch as exc:
        return str(exc)
    headers = columns.headers or [()] * len(columns)
    return list(zip(columns.offsets.tolist(), columns.timestamps.tolist(),
                    columns.keys.to_pylist(), columns.values.to_pylist(), headers,
                    strict=True))


def assert_validators_agree(raw: bytes, expected: Rows) -> None:
    """Each walker accepts exactly the batches the reference reads with offset deltas 0,
    1, ..., and learns the same timestamps and keyless records."""
    header = BatchHeader.parse(raw)
    section = _batch_data(memoryview(raw), header)
    sequential = not isinstance(expected, str) and [row[0] for row in expected] == list(
        range(header.base_offset, header.base_offset + len(expected)))
    for compiled in WALKERS:
        try:
            check = check_records(section, header, compiled=compiled)
        except InvalidBatch:
            assert not sequential, compiled
            continue
        assert sequential, compiled
        assert not isinstance(expected, str)
        if expected:
            stamps = [row[1] for row in expected]
            assert (check.min_timestamp, check.max_timestamp) == (min(stamps), max(stamps))
        assert check.keyless == [i for i, row in enumerate(expected) if row[2] is None]


def assert_all_agree(raw: bytes) -> Rows:
    expected = reference(raw)
    assert consumer(raw) == expected
    assert spark(raw) == expected
    assert_validators_agree(raw, expected)
    return expected


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    """A batch as a producer writes it (one key length, one value length, timestamps a
    few ms apart), some records changed: another value length, a key, a header, a
    timestamp far off, a null value."""
    count = draw(st.sampled_from([1, 7, 40, 300, 700]))
    key_size = draw(st.sampled_from([None, 0, 8]))
    value_size = draw(st.sampled_from([0, 5, 100, 1024]))
    spread = draw(st.sampled_from([0, 5, 200]))
    records = [
        NewRecord(None if key_size is None else (b"k%07d" % i)[:key_size],
                  bytes([i % 251]) * value_size, (), BASE_TIME + spread * i // count)
        for i in range(count)
    ]
    for where, change in draw(st.lists(st.tuples(st.integers(0, count - 1),
                                                 st.integers(0, 4)), max_size=4)):
        key, value, headers, stamp = records[where]
        if change == 0:
            value = bytes(where % 300)
        elif change == 1:
            key = b"key-%d" % where
        elif change == 2:
            headers = (("h", b"%d" % where),)
        elif change == 3:
            stamp = BASE_TIME - 100_000 + where
        else:
            value = None
        records[where] = NewRecord(key, value, headers, stamp)
    return build_batch(records, base_offset=draw(st.sampled_from([0, 5_000_000])),
                       compression=draw(st.sampled_from([CompressionType.NONE,
                                                         CompressionType.ZSTD])),
                       log_append_time=draw(st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_every_decoder_reads_what_the_reference_reads(raw: bytes) -> None:
    assert not isinstance(assert_all_agree(raw), str)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.data())
def test_a_corrupted_byte_is_read_or_refused_alike(raw: bytes, data: st.DataObject) -> None:
    header = BatchHeader.parse(raw)
    if header.compression != CompressionType.NONE:
        return
    position = data.draw(st.integers(HEADER_SIZE, len(raw) - 1))
    byte = data.draw(st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF,
                                      raw[position] ^ 0x02]))
    assert_all_agree(raw[:position] + bytes([byte]) + raw[position + 1 :])


@pytest.mark.parametrize("count", [6, 64, 65, 8193])
def test_runs_on_both_sides_of_the_offset_delta_widths(count: int) -> None:
    records = [NewRecord(None, b"value", (), BASE_TIME + i % 3) for i in range(count)]
    assert len(assert_all_agree(build_batch(records))) == count
