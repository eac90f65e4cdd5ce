"""Legacy message sets (magic 0 and 1): parsing, up-conversion and down-conversion.

Interoperability is checked byte for byte against kafka-python's own legacy
implementation (`LegacyRecordBatchBuilder`, `LegacyRecordBatch`, `MemoryRecords`) in both
directions, for magic 0 and 1 and every codec legacy messages allow.
"""

from __future__ import annotations

import struct
import zlib
from types import SimpleNamespace

import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from logbus.records.batch import InvalidBatch
from logbus.records.builder import NO_TIMESTAMP, NewRecord, build_batch
from logbus.records.compression import CompressionType, compress
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.records.legacy import (
    _xxh32_short,
    decode_message_set,
    downconvert_record_set,
    is_legacy,
    iter_message_set,
    upconvert_message_set,
    write_message,
)
from logbus.records.reader import iter_record_set
from logbus.records.record import Record

NOW = 1_700_000_123_456
LEGACY_CODECS = [
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
]
_HAS_CODEC = {
    CompressionType.NONE: lambda: True,
    CompressionType.GZIP: kafka.codec.has_gzip,
    CompressionType.SNAPPY: kafka.codec.has_snappy,
    CompressionType.LZ4: kafka.codec.has_lz4,
}

# (key, value, timestamp): null and empty keys and values, values worth compressing.
SAMPLE = [
    (b"key-1", b"value-1 " * 40, 1_700_000_000_000),
    (None, b"value-2 " * 40, 1_700_000_000_500),
    (b"key-3", None, 1_699_999_999_000),
    (b"", b"", 1_700_000_000_200),
]


class _Xxh32:
    """Stand-in for the `xxhash` package kafka-python needs for magic 0 LZ4."""

    def __init__(self, data: bytes) -> None:
        self._value = _xxh32_short(bytes(data))

    def digest(self) -> bytes:
        return self._value.to_bytes(4, "big")


@pytest.fixture
def xxhash_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    if getattr(kafka.codec, "xxhash", None) is None:
        monkeypatch.setattr(kafka.codec, "xxhash", SimpleNamespace(xxh32=_Xxh32))


@pytest.fixture(params=LEGACY_CODECS, ids=lambda c: c.config_name)
def codec(request: pytest.FixtureRequest, xxhash_stand_in: None) -> CompressionType:
    chosen: CompressionType = request.param
    if not _HAS_CODEC[chosen]():
        pytest.skip(f"kafka-python has no {chosen.config_name} library here")
    return chosen


def kafka_python_set(
    magic: int, codec: CompressionType, items: list[tuple[bytes | None, bytes | None, int]]
) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, int(codec), batch_size=1 << 24)
    for offset, (key, value, timestamp) in enumerate(items):
        assert builder.append(offset, timestamp, key, value) is not None
    return bytes(builder.build())


def kafka_python_read(
    data: bytes,
) -> list[tuple[int, int | None, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, timestamp_type, key, value) of every message, CRCs checked."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, LegacyRecordBatch)
        assert batch.validate_crc()
        for record in batch:
            assert record.validate_crc()
            out.append(
                (record.offset, record.timestamp, record.timestamp_type, record.key, record.value)
            )
    return out


def upconverted(data: bytes) -> list[Record]:
    batches = iter_record_set(upconvert_message_set(data, now_ms=NOW))
    return [record for _, records in batches for record in records]


def legacy_set(
    magic: int, items: list[tuple[bytes | None, bytes | None, int]], *, first_offset: int = 0
) -> bytes:
    out = bytearray()
    for i, (key, value, timestamp) in enumerate(items):
        write_message(out, first_offset + i, magic, timestamp, key, value)
    return bytes(out)


def wrapper(
    magic: int,
    inner: bytes,
    codec: CompressionType = CompressionType.GZIP,
    *,
    offset: int = 0,
    timestamp: int = 0,
    attributes: int = 0,
) -> bytes:
    out = bytearray()
    write_message(
        out, offset, magic, timestamp, None, compress(codec, inner), int(codec) | attributes
    )
    return bytes(out)


# -- is_legacy -----------------------------------------------------------------------------


def test_is_legacy_tells_formats_apart() -> None:
    assert is_legacy(kafka_python_set(0, CompressionType.NONE, SAMPLE))
    assert is_legacy(kafka_python_set(1, CompressionType.NONE, SAMPLE))
    assert not is_legacy(build_batch([NewRecord(b"k", b"v", (), 1)]))
    assert not is_legacy(b"")
    assert not is_legacy(bytes(16))


# -- up-conversion (Produce v0-2) ----------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_upconvert_kafka_python_sets(magic: int, codec: CompressionType) -> None:
    data = kafka_python_set(magic, codec, SAMPLE)
    assert is_legacy(data)
    batches = list(iter_record_set(upconvert_message_set(data, now_ms=NOW)))
    assert len(batches) == 1
    header, records = batches[0]
    assert header.compression == codec
    assert not header.is_log_append_time
    assert header.base_offset == 0
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in SAMPLE]
    expected = [t if magic == 1 else NO_TIMESTAMP for _, _, t in SAMPLE]
    assert [r.timestamp for r in records] == expected
    assert all(r.headers == () for r in records)


@pytest.mark.parametrize("magic", [0, 1])
def test_parse_agrees_with_kafka_python(magic: int, codec: CompressionType) -> None:
    builder = MemoryRecordsBuilder(magic, int(codec), batch_size=1 << 24)
    for key, value, timestamp in SAMPLE:
        assert builder.append(timestamp, key, value) is not None
    builder.close()
    data = bytes(builder.buffer())
    ours = [
        (m.offset, m.timestamp if magic else None, m.key, m.value) for m in decode_message_set(data)
    ]
    theirs = [(o, t, k, v) for o, t, _, k, v in kafka_python_read(data)]
    assert ours == theirs


def test_upconvert_groups_uncompressed_runs_and_keeps_offsets_contiguous() -> None:
    data = (
        legacy_set(1, SAMPLE[:2])
        + wrapper(1, legacy_set(1, SAMPLE), CompressionType.SNAPPY, offset=5)
        + legacy_set(0, SAMPLE[2:])
    )
    batches = list(iter_record_set(upconvert_message_set(data, now_ms=NOW)))
    assert [(h.base_offset, h.record_count, h.compression) for h, _ in batches] == [
        (0, 2, CompressionType.NONE),
        (2, 4, CompressionType.SNAPPY),
        (6, 2, CompressionType.NONE),
    ]
    records = [r for _, rs in batches for r in rs]
    assert [r.offset for r in records] == list(range(8))
    assert [r.timestamp for r in records][-2:] == [NO_TIMESTAMP, NO_TIMESTAMP]


def test_upconvert_splits_long_uncompressed_runs() -> None:
    items = [(b"k", bytes(100), i) for i in range(10)]
    batches = list(
        iter_record_set(upconvert_message_set(legacy_set(1, items), now_ms=NOW, max_run_bytes=410))
    )
    assert [h.record_count for h, _ in batches] == [3, 3, 3, 1]
    assert [r.timestamp for _, rs in batches for r in rs] == list(range(10))


def test_upconvert_log_append_time() -> None:
    data = upconvert_message_set(legacy_set(1, SAMPLE), now_ms=NOW, log_append_time=True)
    [(header, records)] = list(iter_record_set(data))
    assert header.is_log_append_time
    assert header.max_timestamp == NOW
    assert {r.timestamp for r in records} == {NOW}


def test_upconvert_empty_set() -> None:
    assert upconvert_message_set(b"", now_ms=NOW) == b""


def test_magic1_wrapper_resolves_relative_offsets_and_log_append_time() -> None:
    inner = legacy_set(1, SAMPLE)  # relative offsets 0..3
    data = wrapper(1, inner, offset=103, timestamp=NOW, attributes=0x08)
    messages = decode_message_set(data)
    assert [m.offset for m in messages] == [100, 101, 102, 103]
    assert {m.timestamp for m in messages} == {NOW}
    assert all(m.is_log_append_time for m in messages)
    theirs = kafka_python_read(data)
    assert [(o, t, tt) for o, t, tt, _, _ in theirs] == [(o, NOW, 1) for o in range(100, 104)]


def test_magic0_wrapper_keeps_absolute_inner_offsets() -> None:
    data = wrapper(0, legacy_set(0, SAMPLE, first_offset=40), offset=43)
    assert [m.offset for m in decode_message_set(data)] == [40, 41, 42, 43]


def test_iter_message_set_entries() -> None:
    data = legacy_set(0, SAMPLE[:1]) + wrapper(0, legacy_set(0, SAMPLE))
    entries = list(iter_message_set(data))
    assert [len(e.messages) for e in entries] == [1, 4]
    assert entries[0].messages == (entries[0].wrapper,)
    assert entries[1].wrapper.compression == CompressionType.GZIP


@pytest.mark.usefixtures("xxhash_stand_in")
def test_lz4_magic0_accepts_both_header_checksums() -> None:
    if not kafka.codec.has_lz4():
        pytest.skip("kafka-python has no lz4 library here")
    inner = legacy_set(0, SAMPLE)
    broken = kafka.codec.lz4_encode_old_kafka(inner)  # KAFKA-3160's checksum
    correct = compress(CompressionType.LZ4, inner)
    assert broken[6] != correct[6]
    for payload in (broken, correct):
        out = bytearray()
        write_message(out, 0, 0, 0, None, payload, int(CompressionType.LZ4))
        assert [m.value for m in decode_message_set(bytes(out))] == [v for _, v, _ in SAMPLE]
    # Kafka checks the header checksum for magic 1, whose writers got it right.
    out = bytearray()
    write_message(out, 0, 1, 0, None, broken, int(CompressionType.LZ4))
    with pytest.raises(InvalidBatch, match="lz4"):
        decode_message_set(bytes(out))


def test_xxh32_known_values() -> None:
    assert _xxh32_short(b"") == 0x02CC5D05
    assert _xxh32_short(b"a") == 0x550D7456
    assert _xxh32_short(b"abc") == 0x32D153FF
    with pytest.raises(ValueError):
        _xxh32_short(bytes(16))


# -- corrupt input -------------------------------------------------------------------------


def _flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0xFF
    return bytes(out)


@pytest.mark.parametrize("magic", [0, 1])
def test_bad_crc(magic: int) -> None:
    data = legacy_set(magic, SAMPLE)
    with pytest.raises(InvalidBatch, match="CRC32 mismatch"):
        upconvert_message_set(_flip(data, 40), now_ms=NOW)
    with pytest.raises(InvalidBatch, match="CRC32 mismatch"):
        upconvert_message_set(_flip(data, 12), now_ms=NOW)  # the CRC itself


def test_bad_crc_inside_wrapper() -> None:
    inner = _flip(legacy_set(1, SAMPLE), 40)
    with pytest.raises(InvalidBatch, match="CRC32 mismatch"):
        decode_message_set(wrapper(1, inner))


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncated_produce_is_an_error_but_a_fetch_may_be_partial(cut: int) -> None:
    data = legacy_set(1, SAMPLE)[:-cut]
    with pytest.raises(InvalidBatch, match=r"truncated|too few"):
        upconvert_message_set(data, now_ms=NOW)
    assert len(decode_message_set(data, allow_partial=True)) == 3


@pytest.mark.parametrize("magic", [2, 3, -1])
def test_wrong_magic(magic: int) -> None:
    data = bytearray(legacy_set(1, SAMPLE[:1]))
    data[16] = magic & 0xFF
    with pytest.raises(InvalidBatch, match="magic"):
        decode_message_set(bytes(data))


def test_v2_batch_is_not_a_legacy_set() -> None:
    with pytest.raises(InvalidBatch, match="magic 2"):
        upconvert_message_set(build_batch([NewRecord(b"k", b"v", (), 1)]), now_ms=NOW)


def test_nested_wrappers_rejected() -> None:
    nested = wrapper(1, wrapper(1, legacy_set(1, SAMPLE)))
    with pytest.raises(InvalidBatch, match="is compressed"):
        decode_message_set(nested)


def test_inner_magic_must_match_wrapper() -> None:
    with pytest.raises(InvalidBatch, match="differs"):
        decode_message_set(wrapper(1, legacy_set(0, SAMPLE)))


@pytest.mark.parametrize("codec_id", [4, 5, 7])
def test_zstd_and_unknown_codecs_rejected(codec_id: int) -> None:
    out = bytearray()
    payload = compress(CompressionType.ZSTD, legacy_set(1, SAMPLE))
    write_message(out, 0, 1, 0, None, payload, codec_id)
    with pytest.raises(InvalidBatch, match=f"codec id {codec_id}"):
        upconvert_message_set(bytes(out), now_ms=NOW)


@pytest.mark.parametrize(
    ("value", "match"),
    [(None, "null value"), (b"not gzip at all", "corrupt gzip"), (compress(1, b""), "no messages")],
)
def test_bad_wrapper_values(value: bytes | None, match: str) -> None:
    out = bytearray()
    write_message(out, 0, 1, 0, None, value, int(CompressionType.GZIP))
    with pytest.raises(InvalidBatch, match=match):
        decode_message_set(bytes(out))


def _reframe(message: bytes) -> bytes:
    """An entry around `message` (crc onwards) with a correct CRC."""
    body = message[4:]
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (struct.pack(">IBBii", 0, 0, 0, 5, -1), "impossible key length"),
        (struct.pack(">IBBii", 0, 0, 0, -2, -1), "impossible key length"),
        (struct.pack(">IBBii", 0, 0, 0, -1, 9), "impossible value length"),
        (struct.pack(">IBBiiB", 0, 0, 0, -1, -1, 0), "bytes after its value"),
        (struct.pack(">IBBii", 0, 1, 0, -1, -1), "too short for magic 1"),
        (struct.pack(">IBBi4s", 0, 0, 0, 4, b"abcd"), "ends before its value length"),
    ],
)
def test_malformed_fields(message: bytes, match: str) -> None:
    with pytest.raises(InvalidBatch, match=match):
        decode_message_set(_reframe(message))


def test_impossible_size() -> None:
    with pytest.raises(InvalidBatch, match="impossible size"):
        decode_message_set(struct.pack(">qi", 0, 3) + bytes(3), allow_partial=True)


# -- down-conversion (Fetch v0-3) ----------------------------------------------------------

V2_RECORDS = [
    NewRecord(b"key-1", b"value-1 " * 40, (("trace", b"abc"),), 1_700_000_000_000),
    NewRecord(None, b"value-2", (), 1_700_000_000_500),
    NewRecord(b"key-3", None, (("h", None),), 1_699_999_999_000),
    NewRecord(b"", b"", (), 1_700_000_000_200),
]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("batch_codec", list(CompressionType), ids=lambda c: c.config_name)
def test_downconvert_reads_in_kafka_python(magic: int, batch_codec: CompressionType) -> None:
    data = build_batch(V2_RECORDS, base_offset=500, compression=batch_codec) + build_batch(
        V2_RECORDS[:1], base_offset=504
    )
    legacy = downconvert_record_set(data, magic)
    expected = [
        (
            500 + i,
            r.timestamp if magic else None,
            0 if magic else None,
            r.key,
            r.value,
        )
        for i, r in enumerate([*V2_RECORDS, V2_RECORDS[0]])
    ]
    assert kafka_python_read(legacy) == expected
    assert all(m.magic == magic and m.compression == 0 for m in decode_message_set(legacy))


def test_downconvert_log_append_time() -> None:
    data = build_batch(V2_RECORDS, log_append_time=True, max_timestamp=NOW)
    assert {(t, tt) for _, t, tt, _, _ in kafka_python_read(downconvert_record_set(data, 1))} == {
        (NOW, 1)
    }
    assert {(t, tt) for _, t, tt, _, _ in kafka_python_read(downconvert_record_set(data, 0))} == {
        (None, None)
    }


def test_downconvert_keeps_compaction_gaps_and_skips_control_batches() -> None:
    kept = [Record(10, 1, b"a", b"1"), Record(13, 2, b"b", b"2")]
    data = (
        build_batch(kept, base_offset=10, last_offset_delta=4)
        + build_end_txn_batch(
            ControlType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0, base_offset=15
        )
        + build_batch([NewRecord(b"c", b"3", (), 3)], base_offset=16)
    )
    messages = decode_message_set(downconvert_record_set(data, 1))
    assert [(m.offset, m.key, m.timestamp) for m in messages] == [
        (10, b"a", 1),
        (13, b"b", 2),
        (16, b"c", 3),
    ]


def test_downconvert_partial_trailing_batch() -> None:
    whole = build_batch(V2_RECORDS, base_offset=7)
    data = whole + whole[:30]
    assert downconvert_record_set(data, 1) == downconvert_record_set(whole, 1)
    with pytest.raises(InvalidBatch):
        downconvert_record_set(data, 1, stop_at_partial=False)
    assert downconvert_record_set(b"", 0) == b""


def test_downconvert_rejects_corrupt_batch_and_bad_magic() -> None:
    data = _flip(build_batch(V2_RECORDS), 70)
    with pytest.raises(InvalidBatch, match="CRC32C"):
        downconvert_record_set(data, 1)
    with pytest.raises(ValueError, match="0 or 1"):
        downconvert_record_set(build_batch(V2_RECORDS), 2)


# -- properties ----------------------------------------------------------------------------

_bytes_or_none = st.none() | st.binary(max_size=40)
_items = st.lists(
    st.tuples(_bytes_or_none, _bytes_or_none, st.integers(-1, 2**62)), min_size=1, max_size=12
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=_items,
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
)
def test_legacy_up_then_down_preserves_messages(
    items: list[tuple[bytes | None, bytes | None, int]], magic: int, codec: CompressionType
) -> None:
    data = legacy_set(magic, items)
    if codec != CompressionType.NONE:
        data = wrapper(magic, data, codec, offset=len(items) - 1 if magic else 0)
    back = decode_message_set(
        downconvert_record_set(upconvert_message_set(data, now_ms=NOW), magic)
    )
    expected_ts = [t if magic else NO_TIMESTAMP for _, _, t in items]
    assert [(m.key, m.value) for m in back] == [(k, v) for k, v, _ in items]
    assert [m.timestamp for m in back] == expected_ts
    assert [m.offset for m in back] == list(range(len(items)))


@settings(max_examples=150, deadline=None)
@given(
    items=_items,
    base_offset=st.integers(0, 2**40),
    codec=st.sampled_from(list(CompressionType)),
)
def test_v2_down_then_up_preserves_records(
    items: list[tuple[bytes | None, bytes | None, int]], base_offset: int, codec: CompressionType
) -> None:
    records = [NewRecord(k, v, (("h", b"x"),), t) for k, v, t in items]
    stored = build_batch(records, base_offset=base_offset, compression=codec)
    legacy = downconvert_record_set(stored, 1)
    assert [m.offset for m in decode_message_set(legacy)] == [
        base_offset + i for i in range(len(items))
    ]
    back = upconverted(legacy)
    assert [(r.key, r.value, r.timestamp) for r in back] == items
