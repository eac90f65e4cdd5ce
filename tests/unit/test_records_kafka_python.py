"""Interoperability with kafka-python's own RecordBatch v2 implementation.

Batches we build must decode in kafka-python (`DefaultRecordBatch`, `MemoryRecords`) and
batches it builds (`DefaultRecordBatchBuilder`) must decode here, for every codec. Where
kafka-python lacks a codec library (python-snappy, lz4, zstandard), a cramjam-backed
stand-in is plugged into kafka-python's codec hooks, so its own framing and batch code
still run; with the libraries installed the real ones are used.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import cramjam
import kafka.codec
import kafka.record.default_records as kafka_default_records
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from logbus.records.batch import HEADER_SIZE, BatchHeader
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType, decompress
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.records.reader import decode_batch, iter_record_set
from logbus.records.record import Record

ALL_CODECS = list(CompressionType)

SAMPLE = [
    NewRecord(b"key-1", b"value-1 " * 40, (("trace", b"abc"), ("empty", None)), 1_700_000_000_000),
    NewRecord(None, b"value-2 " * 40, (), 1_700_000_000_500),
    NewRecord(b"key-3", None, (("h", b""),), 1_699_999_999_000),
    NewRecord(b"", b"", (), 1_700_000_000_200),
]


def _plug_stand_in(codec: CompressionType, monkeypatch: pytest.MonkeyPatch) -> None:
    if codec == CompressionType.SNAPPY:
        # kafka-python's own xerial framing code runs around these block functions.
        monkeypatch.setattr(
            kafka.codec,
            "snappy",
            SimpleNamespace(
                compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
                decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
            ),
        )
    elif codec == CompressionType.LZ4:
        monkeypatch.setattr(kafka.codec, "lz4", SimpleNamespace())
        # cramjam's default frame has linked blocks and checksums: a second frame style.
        monkeypatch.setattr(
            kafka_default_records, "lz4_encode", lambda data: bytes(cramjam.lz4.compress(data))
        )
        monkeypatch.setattr(
            kafka_default_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data))
        )
    elif codec == CompressionType.ZSTD:
        monkeypatch.setattr(kafka.codec, "zstd", SimpleNamespace())
        monkeypatch.setattr(
            kafka_default_records, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(data))
        )
        monkeypatch.setattr(
            kafka_default_records, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(data))
        )


_HAS_CODEC = {
    CompressionType.NONE: lambda: True,
    CompressionType.GZIP: kafka.codec.has_gzip,
    CompressionType.SNAPPY: kafka.codec.has_snappy,
    CompressionType.LZ4: kafka.codec.has_lz4,
    CompressionType.ZSTD: kafka.codec.has_zstd,
}


@pytest.fixture(params=ALL_CODECS, ids=lambda c: c.config_name)
def codec(request: pytest.FixtureRequest) -> Iterator[CompressionType]:
    """Every codec, with kafka-python able to use it (natively or through a stand-in)."""
    chosen: CompressionType = request.param
    with pytest.MonkeyPatch.context() as monkeypatch:
        if not _HAS_CODEC[chosen]():
            _plug_stand_in(chosen, monkeypatch)
        yield chosen


def kafka_python_build(
    records: list[NewRecord],
    codec: CompressionType,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 24,
    )
    for offset, record in enumerate(records):
        builder.append(
            offset, record.timestamp, record.key, record.value, [tuple(h) for h in record.headers]
        )
    return bytes(builder.build())


def kafka_python_records(batch: DefaultRecordBatch) -> list[Record]:
    return [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


@pytest.mark.parametrize("log_append_time", [False, True])
@pytest.mark.parametrize("transactional", [False, True])
def test_our_batches_decode_in_kafka_python(
    codec: CompressionType, transactional: bool, log_append_time: bool
) -> None:
    data = build_batch(
        SAMPLE,
        base_offset=1000,
        compression=codec,
        producer_id=77 if transactional else -1,
        producer_epoch=2 if transactional else -1,
        base_sequence=10 if transactional else -1,
        is_transactional=transactional,
        log_append_time=log_append_time,
        partition_leader_epoch=4,
    )
    batch = MemoryRecords(data).next_batch()
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.validate_crc()
    assert batch.base_offset == 1000
    assert batch.leader_epoch == 4
    assert batch.compression_type == codec
    assert batch.is_transactional == transactional
    assert batch.timestamp_type == int(log_append_time)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        (77, 2, 10) if transactional else (-1, -1, -1)
    )
    assert batch.records_count == len(SAMPLE)
    assert batch.last_offset == 1000 + len(SAMPLE) - 1
    assert batch.first_timestamp == SAMPLE[0].timestamp
    assert batch.max_timestamp == max(r.timestamp or 0 for r in SAMPLE)
    ours = decode_batch(data)[1]
    assert kafka_python_records(batch) == ours
    if log_append_time:
        assert {r.timestamp for r in ours} == {batch.max_timestamp}


@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_batches_decode_here(codec: CompressionType, transactional: bool) -> None:
    data = kafka_python_build(
        SAMPLE,
        codec,
        producer_id=77 if transactional else -1,
        producer_epoch=2 if transactional else -1,
        base_sequence=10 if transactional else -1,
        is_transactional=transactional,
    )
    header, records = decode_batch(data)
    assert header.compression == codec
    assert header.is_transactional == transactional
    assert header.record_count == len(SAMPLE)
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.base_timestamp == SAMPLE[0].timestamp
    assert header.max_timestamp == max(r.timestamp or 0 for r in SAMPLE)
    assert records == [
        Record(i, r.timestamp or 0, r.key, r.value, tuple(r.headers)) for i, r in enumerate(SAMPLE)
    ]
    assert records == kafka_python_records(DefaultRecordBatch(data))


def test_same_record_bytes_as_kafka_python(codec: CompressionType) -> None:
    """Byte for byte: the whole batch uncompressed, the decompressed records otherwise
    (compressors may differ in their choices while both are valid)."""
    theirs = kafka_python_build(SAMPLE, codec)
    ours = build_batch(SAMPLE, compression=codec, partition_leader_epoch=0)
    if codec == CompressionType.NONE:
        assert ours == theirs
        return
    our_header, their_header = BatchHeader.parse(ours), BatchHeader.parse(theirs)
    ignored = {"batch_length": 0, "crc": 0}
    assert {**_fields(our_header), **ignored} == {**_fields(their_header), **ignored}
    assert decompress(codec, ours[HEADER_SIZE:]) == decompress(codec, theirs[HEADER_SIZE:])


def _fields(header: BatchHeader) -> dict[str, Any]:
    return {name: getattr(header, name) for name in BatchHeader.__slots__}


nullable_bytes = st.none() | st.binary(max_size=100)
random_records = st.lists(
    st.builds(
        NewRecord,
        key=nullable_bytes,
        value=nullable_bytes,
        headers=st.lists(st.tuples(st.text(max_size=8), nullable_bytes), max_size=3).map(tuple),
        timestamp=st.integers(0, 2**45),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(records=random_records)
def test_uncompressed_batches_match_kafka_python_exactly(records: list[NewRecord]) -> None:
    theirs = kafka_python_build(records, CompressionType.NONE)
    assert build_batch(records, partition_leader_epoch=0) == theirs
    assert decode_batch(theirs)[1] == kafka_python_records(DefaultRecordBatch(theirs))


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(records=random_records)
def test_gzip_batches_cross_decode(records: list[NewRecord]) -> None:
    ours = build_batch(records, compression=CompressionType.GZIP)
    assert kafka_python_records(DefaultRecordBatch(ours)) == decode_batch(ours)[1]
    theirs = kafka_python_build(records, CompressionType.GZIP)
    assert decode_batch(theirs)[1] == kafka_python_records(DefaultRecordBatch(theirs))


def test_record_sets_split_like_kafka_python(codec: CompressionType) -> None:
    data = b"".join(
        build_batch(SAMPLE, base_offset=offset, compression=codec) for offset in (0, 4, 8)
    )
    for cut in (len(data), len(data) - 1, len(data) - 70, len(data) // 2, 30, 0):
        view = data[:cut]
        theirs = []
        records = MemoryRecords(view)
        while records.has_next():
            batch = records.next_batch()
            theirs.append((batch.base_offset, kafka_python_records(batch)))
        ours = [(header.base_offset, recs) for header, recs in iter_record_set(view)]
        assert ours == theirs


@pytest.mark.parametrize("control_type", list(ControlType))
def test_transaction_markers_read_by_kafka_python(control_type: ControlType) -> None:
    data = build_end_txn_batch(
        control_type, producer_id=5, producer_epoch=1, coordinator_epoch=3, base_offset=20
    )
    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    (marker,) = list(batch)
    assert marker.type == int(control_type)
    assert marker.commit == (control_type == ControlType.COMMIT)
    assert marker.abort == (control_type == ControlType.ABORT)
    assert marker.offset == 20
