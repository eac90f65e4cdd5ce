"""Building and reading whole batches: round trips, header fields, corrupt input."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbus.records.batch import (
    CRC_START,
    HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    compute_crc,
    crc_is_valid,
    set_base_offset,
    set_partition_leader_epoch,
    split_batches,
)
from logbus.records.builder import NewRecord, build_batch, now_ms
from logbus.records.compression import CompressionType
from logbus.records.reader import decode_batch, decode_records, is_control_batch, iter_record_set
from logbus.records.record import Record

ALL_CODECS = list(CompressionType)
codec_ids = pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.config_name)

nullable_bytes = st.none() | st.binary(max_size=200)
new_records = st.lists(
    st.builds(
        NewRecord,
        key=nullable_bytes,
        value=nullable_bytes,
        headers=st.lists(st.tuples(st.text(max_size=10), nullable_bytes), max_size=3).map(tuple),
        timestamp=st.integers(0, 2**45),
    ),
    min_size=1,
    max_size=20,
)

SAMPLE = [
    NewRecord(b"key-1", b"value-1" * 20, (("trace", b"abc"), ("empty", None)), 1_700_000_000_000),
    NewRecord(None, b"value-2" * 20, (), 1_700_000_000_500),
    NewRecord(b"key-3", None, (), 1_699_999_999_000),
]


def resign(batch: bytearray) -> bytes:
    """Recompute the CRC after a deliberate edit, so a test reaches the check after it."""
    struct.pack_into(">I", batch, CRC_START - 4, compute_crc(batch))
    return bytes(batch)


@codec_ids
def test_round_trip_and_header_fields(codec: CompressionType) -> None:
    batch = build_batch(
        SAMPLE,
        base_offset=42,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=100,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    header, records = decode_batch(batch)
    assert header.size == len(batch)
    assert header.base_offset == 42
    assert header.partition_leader_epoch == 5
    assert header.compression == codec
    assert header.is_transactional
    assert not header.is_control
    assert not header.is_log_append_time
    assert header.last_offset_delta == 2
    assert header.record_count == 3
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_500
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 100)
    assert header.last_sequence == 102
    assert crc_is_valid(batch, header)
    assert records == [
        Record(42 + i, r.timestamp or 0, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(SAMPLE)
    ]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(records=new_records, codec=st.sampled_from(ALL_CODECS), base_offset=st.integers(0, 2**40))
def test_round_trip_property(
    records: list[NewRecord], codec: CompressionType, base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset, compression=codec)
    decoded = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]


def test_plain_pairs_and_default_timestamps() -> None:
    before = now_ms()
    batch = build_batch([(b"k", b"v"), (None, None)])
    after = now_ms()
    header, records = decode_batch(batch)
    assert [(r.key, r.value) for r in records] == [(b"k", b"v"), (None, None)]
    assert before <= records[0].timestamp == records[1].timestamp <= after
    assert header.base_timestamp == header.max_timestamp == records[0].timestamp


def test_base_and_max_timestamp_overrides() -> None:
    batch = build_batch(SAMPLE, base_timestamp=1_600_000_000_000, max_timestamp=1_800_000_000_000)
    header, records = decode_batch(batch)
    assert header.base_timestamp == 1_600_000_000_000
    assert header.max_timestamp == 1_800_000_000_000
    assert [r.timestamp for r in records] == [r.timestamp for r in SAMPLE]


def test_log_append_time_reports_max_timestamp_for_every_record() -> None:
    batch = build_batch(SAMPLE, log_append_time=True, max_timestamp=1_900_000_000_000)
    header, records = decode_batch(batch)
    assert header.is_log_append_time
    assert {r.timestamp for r in records} == {1_900_000_000_000}


def test_records_keep_their_offsets_and_gaps() -> None:
    kept = [Record(103, 5, b"a", b"1"), Record(107, 6, b"b", None, (("h", b"x"),))]
    batch = build_batch(kept, base_offset=100, last_offset_delta=9)
    header, records = decode_batch(batch)
    assert records == kept
    assert header.last_offset == 109
    assert header.record_count == 2


def test_new_records_follow_the_previous_offset() -> None:
    batch = build_batch([Record(105, 1, None, b"a"), NewRecord(None, b"b", (), 2)], base_offset=100)
    assert [r.offset for r in decode_records(batch)] == [105, 106]


@codec_ids
def test_empty_batch_keeps_its_offset_range(codec: CompressionType) -> None:
    batch = build_batch(
        [],
        base_offset=10,
        last_offset_delta=4,
        compression=codec,
        producer_id=1,
        producer_epoch=0,
        base_sequence=50,
    )
    header, records = decode_batch(batch)
    assert records == []
    assert len(batch) == HEADER_SIZE
    assert (header.last_offset, header.record_count, header.last_sequence) == (14, 0, 54)
    assert header.base_timestamp == header.max_timestamp == -1


def test_delete_horizon() -> None:
    batch = build_batch([Record(0, 1000, b"k", None)], delete_horizon_ms=5000)
    header, records = decode_batch(batch)
    assert header.attributes & 0x40
    assert header.base_timestamp == 5000
    assert records[0].timestamp == 1000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"records": []}, "empty batch needs last_offset_delta"),
        ({"records": [Record(5, 0, None, None), Record(5, 0, None, None)]}, "does not follow"),
        ({"records": [Record(3, 0, None, None)], "base_offset": 4}, "does not follow"),
        ({"records": [(None, b"a"), (None, b"b")], "last_offset_delta": 0}, "before the last"),
        ({"records": [(None, b"a")], "is_transactional": True}, "needs a producer id"),
        ({"records": [(None, b"a")], "producer_epoch": 1 << 20}, "out of range"),
        ({"records": [(None, b"a")], "base_timestamp": 1, "delete_horizon_ms": 2}, "not both"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    records = kwargs.pop("records")
    with pytest.raises(ValueError, match=message):
        build_batch(records, **kwargs)  # type: ignore[arg-type]


def test_broker_rewrites_keep_the_crc_valid() -> None:
    batch = bytearray(build_batch(SAMPLE))
    set_base_offset(batch, 1234)
    set_partition_leader_epoch(batch, 9)
    header, records = decode_batch(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 9)
    assert [r.offset for r in records] == [1234, 1235, 1236]


# Corrupt input


@codec_ids
def test_any_flipped_byte_after_the_crc_field_is_caught(codec: CompressionType) -> None:
    batch = build_batch(SAMPLE, compression=codec)
    for position in range(CRC_START - 4, len(batch)):
        corrupt = bytearray(batch)
        corrupt[position] ^= 0x01
        with pytest.raises(InvalidBatch, match="CRC32C mismatch"):
            decode_records(corrupt)


@codec_ids
def test_truncated_batch(codec: CompressionType) -> None:
    batch = build_batch(SAMPLE, compression=codec)
    for length in range(len(batch)):
        with pytest.raises(InvalidBatch):
            decode_records(batch[:length])
    with pytest.raises(InvalidBatch, match="truncated"):
        decode_records(batch[:-1])


def test_trailing_bytes_after_one_batch() -> None:
    with pytest.raises(InvalidBatch, match="expected exactly one batch"):
        decode_records(build_batch(SAMPLE) + b"\x00")


@codec_ids
@pytest.mark.parametrize(
    ("count", "message"), [(4, "data ends after 3"), (2, "left over after the 2")]
)
def test_record_count_lies(codec: CompressionType, count: int, message: str) -> None:
    batch = bytearray(build_batch(SAMPLE, compression=codec))
    struct.pack_into(">i", batch, HEADER_SIZE - 4, count)
    with pytest.raises(InvalidBatch, match=message):
        decode_records(resign(batch))


def test_negative_record_count() -> None:
    batch = bytearray(build_batch(SAMPLE))
    struct.pack_into(">i", batch, HEADER_SIZE - 4, -1)
    with pytest.raises(InvalidBatch, match="negative record count"):
        decode_records(resign(batch))


def test_record_truncated_inside_a_consistent_batch() -> None:
    batch = bytearray(build_batch(SAMPLE))
    del batch[-3:]
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(InvalidBatch, match="record at byte"):
        decode_records(resign(batch))


def test_unknown_codec_id() -> None:
    batch = bytearray(build_batch(SAMPLE))
    struct.pack_into(">h", batch, CRC_START, 5)
    with pytest.raises(InvalidBatch, match="unknown compression codec id 5"):
        decode_records(resign(batch))


@pytest.mark.parametrize("codec", ALL_CODECS[1:], ids=lambda c: c.config_name)
def test_corrupt_compressed_body(codec: CompressionType) -> None:
    batch = bytearray(build_batch(SAMPLE, compression=codec))
    batch[HEADER_SIZE + 2 :] = b"\xff" * (len(batch) - HEADER_SIZE - 2)
    with pytest.raises(InvalidBatch, match=f"corrupt {codec.config_name}"):
        decode_records(resign(batch))


def test_bad_magic() -> None:
    batch = bytearray(build_batch(SAMPLE))
    batch[16] = 1
    with pytest.raises(InvalidBatch, match="magic 1"):
        decode_records(batch)


def test_crc_check_can_be_skipped() -> None:
    batch = bytearray(build_batch(SAMPLE))
    batch[HEADER_SIZE + 20] ^= 0x20  # inside the first record's value
    with pytest.raises(InvalidBatch, match="CRC32C"):
        decode_records(batch)
    records = decode_records(batch, verify_crc=False)
    assert records[0].value != SAMPLE[0].value


@settings(max_examples=300)
@given(
    codec=st.sampled_from(ALL_CODECS),
    edits=st.lists(st.tuples(st.integers(CRC_START, 10_000), st.integers(0, 255)), min_size=1),
)
def test_mutated_batches_raise_only_invalid_batch(
    codec: CompressionType, edits: list[tuple[int, int]]
) -> None:
    batch = bytearray(build_batch(SAMPLE, compression=codec))
    for position, value in edits:
        batch[position % len(batch)] = value
    with contextlib.suppress(InvalidBatch):
        decode_records(resign(batch))


# Record sets (fetch responses, segments)


def test_record_set_ignores_a_partial_batch_at_the_end() -> None:
    first = build_batch(SAMPLE, base_offset=0)
    second = build_batch(SAMPLE, base_offset=3, compression=CompressionType.GZIP)
    data = first + second
    for cut in range(len(data) + 1):
        got = list(iter_record_set(data[:cut]))
        whole = 0 if cut < len(first) else 1 if cut < len(data) else 2
        assert [h.base_offset for h, _ in got] == [0, 3][:whole]
        assert [len(records) for _, records in got] == [3] * whole
        assert [pos for pos, _ in split_batches(memoryview(data)[:cut])] == [0, len(first)][:whole]


def test_record_set_raises_on_a_corrupt_complete_batch() -> None:
    corrupt = bytearray(build_batch(SAMPLE, base_offset=3))
    corrupt[-1] ^= 1
    records = iter_record_set(build_batch(SAMPLE) + bytes(corrupt))
    next(records)
    with pytest.raises(InvalidBatch, match="offset 3: CRC32C mismatch"):
        next(records)


def test_record_set_rejects_an_impossible_batch_length() -> None:
    data = build_batch(SAMPLE) + struct.pack(">qi", 3, 10) + b"\x00" * 60
    with pytest.raises(InvalidBatch, match="length 10 is impossible"):
        list(iter_record_set(data))


def test_record_set_yields_control_batches() -> None:
    data = build_batch(SAMPLE) + build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")],
        base_offset=3,
        is_control=True,
        is_transactional=True,
        producer_id=1,
        producer_epoch=0,
    )
    headers = [header for header, _ in iter_record_set(data)]
    assert [is_control_batch(h) for h in headers] == [False, True]


def test_header_parse_matches_builder() -> None:
    batch = build_batch(SAMPLE, base_offset=9)
    assert BatchHeader.parse(batch).next_offset == 12
