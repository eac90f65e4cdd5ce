"""The run decoder (`logbus.records.stride`): `decode_record_columns` returns exactly what
its per-record path returns (and what `decode_batch` reads) for regular, irregular and
mixed batches, and raises the same `InvalidBatch` for any corrupted byte."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.records import reader
from logbus.records.batch import BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType
from logbus.records.reader import RecordColumns, decode_batch, decode_record_columns
from logbus.records.stride import MIN_RUN, decode_run

BASE_TIME = 1_700_000_000_000


def run_columns(raw: bytes, verify_crc: bool = True) -> RecordColumns:
    return decode_record_columns(raw, BatchHeader.parse(raw), verify_crc=verify_crc)


def per_record_columns(raw: bytes, verify_crc: bool = True) -> RecordColumns:
    """The columns without any run: the per-record path alone."""
    saved = reader.MIN_RUN
    reader.MIN_RUN = 1 << 62
    try:
        return run_columns(raw, verify_crc)
    finally:
        reader.MIN_RUN = saved


def outcome(decode: object, raw: bytes) -> RecordColumns | str:
    try:
        return decode(raw, False)  # type: ignore[operator, no-any-return]
    except InvalidBatch as exc:
        return f"InvalidBatch: {exc}"


def from_decode_batch(raw: bytes) -> list[tuple[object, ...]]:
    _, records = decode_batch(raw)
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def as_rows(columns: RecordColumns) -> list[tuple[object, ...]]:
    headers = columns.headers or [()] * len(columns.offsets)
    return list(zip(columns.offsets, columns.timestamps, columns.keys, columns.values,
                    headers, strict=True))


def assert_same_everywhere(raw: bytes) -> None:
    fast = run_columns(raw)
    assert fast == per_record_columns(raw)
    assert as_rows(fast) == from_decode_batch(raw)


def regular(count: int, value_size: int, key: bytes | None = None,
            step_ms: float = 0.0) -> list[NewRecord]:
    return [NewRecord(key, bytes([i % 251]) * value_size, (), BASE_TIME + int(i * step_ms))
            for i in range(count)]


# A batch as clients write them, then changed at a few records: another value size,
# a key, a header, a timestamp jump (forward or back), a null value.
def _changed(record: NewRecord, change: int, seed: int) -> NewRecord:
    key, value, headers, timestamp = record.key, record.value, record.headers, record.timestamp
    if change == 0:
        value = bytes([seed % 256]) * (seed % 300)
    elif change == 1:
        key = bytes([seed % 256]) * (seed % 5)
    elif change == 2:
        headers = (("h", bytes([seed % 256])),)
    elif change == 3:
        timestamp = BASE_TIME + seed * 997 - 50_000
    else:
        value = None
    return NewRecord(key, value, headers, timestamp)


@st.composite
def mixed_batches(draw: st.DrawFn) -> list[NewRecord]:
    count = draw(st.integers(1, 300))
    key = draw(st.one_of(st.none(), st.binary(max_size=4)))
    value_size = draw(st.sampled_from([0, 1, 10, 63, 64, 100, 1024, 8200]))
    step = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, 30.0]))
    records = regular(count, value_size, key, step)
    changes = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, 4),
                                      st.integers(0, 10_000)), max_size=6))
    for where, change, seed in changes:
        records[where] = _changed(records[where], change, seed)
    return records


@settings(max_examples=200, deadline=None)
@given(mixed_batches(), st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
       st.booleans(), st.integers(0, 2**40))
def test_mixed_batches_read_the_same_as_record_by_record(
    records: list[NewRecord], codec: CompressionType, log_append: bool, base: int
) -> None:
    raw = build_batch(records, base_offset=base, compression=codec, log_append_time=log_append)
    assert_same_everywhere(raw)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(NewRecord, st.one_of(st.none(), st.binary(max_size=3)),
                          st.one_of(st.none(), st.binary(max_size=3)),
                          st.just(()), st.integers(BASE_TIME - 100, BASE_TIME + 100)),
                min_size=1, max_size=120))
def test_random_records_read_the_same_as_record_by_record(records: list[NewRecord]) -> None:
    # Random sizes per record: runs are short or none, and the result is the same.
    assert_same_everywhere(build_batch(records, base_offset=7))


@pytest.mark.parametrize("count", [MIN_RUN, 64, 65, 200, 8192, 8193, 9000])
@pytest.mark.parametrize("step_ms", [0.0, 0.05, 3.0])
def test_regular_batches_of_every_offset_delta_width(count: int, step_ms: float) -> None:
    for key in (None, b"key"):
        assert_same_everywhere(build_batch(regular(count, 3, key, step_ms), base_offset=99))


def test_more_than_8192_records_with_irregular_records_between() -> None:
    records = regular(9000, 20, None, 0.02)
    for i in range(5, 9000, 700):
        records[i] = _changed(records[i], i % 5, i)
    assert_same_everywhere(build_batch(records, base_offset=3))


def corruptions(raw: bytes) -> Iterator[bytes]:
    for position in range(len(raw)):
        for byte in {0x00, 0x01, 0x7F, 0x80, 0xFF, raw[position] ^ 0x01, raw[position] ^ 0x80}:
            if byte != raw[position]:
                yield raw[:position] + bytes([byte]) + raw[position + 1 :]


def two_byte_timestamps(count: int) -> list[NewRecord]:
    # Record 0 at the base time, the others 64 ms and more later: from record 1 on, a
    # run whose timestamp deltas take two bytes.
    return [NewRecord(None, b"v%d" % (i % 10), (), BASE_TIME + (i and 64 + 3 * i))
            for i in range(count)]


SMALL_BATCHES = {
    "null keys": regular(10, 5, None, 1.0),
    "keys": regular(10, 5, b"ab", 1.0),
    "two-byte timestamps": two_byte_timestamps(10),
}


@pytest.mark.parametrize("name", list(SMALL_BATCHES))
def test_every_corrupted_byte_gives_what_the_per_record_path_gives(name: str) -> None:
    # A small batch that is read as a run, a byte at a time set to a few values: it
    # decodes to the same columns or fails with the same message either way.
    raw = build_batch(SMALL_BATCHES[name], base_offset=1000)
    assert run_columns(raw) == per_record_columns(raw)
    data = raw[61:]
    first = 0 if name != "two-byte timestamps" else data[0] // 2 + 1
    assert decode_run(data, first, int(first > 0), 10, BASE_TIME) is not None
    failures = 0
    for bad in corruptions(raw):
        try:
            header = BatchHeader.parse(bad)
        except InvalidBatch:
            continue
        if header.size != len(bad) or header.compression != CompressionType.NONE:
            continue
        expected = outcome(per_record_columns, bad)
        assert outcome(run_columns, bad) == expected
        failures += isinstance(expected, str)
    assert failures > 100  # the corruptions do reach the record checks


def test_a_compacted_batch_with_offset_gaps() -> None:
    from logbus.records.record import Record

    kept = [Record(10 + i + (i >= 20) * 5, BASE_TIME, None, b"%03d" % i) for i in range(40)]
    raw = build_batch(kept, base_offset=10, last_offset_delta=50)
    columns = run_columns(raw)
    assert columns == per_record_columns(raw)
    assert columns.offsets == [10 + i + (i >= 20) * 5 for i in range(40)]


def test_a_regular_batch_is_one_run_per_offset_delta_width() -> None:
    raw = build_batch(regular(9000, 10), base_offset=0)
    data = raw[61:]
    runs = []
    pos, index = 0, 0
    while index < 9000:
        found = decode_run(data, pos, index, 9000 - index, BASE_TIME)
        assert found is not None
        part, pos = found
        assert not part.cut
        runs.append(part.length)
        index += part.length
    assert runs == [64, 8192 - 64, 9000 - 8192]
    assert pos == len(data)


def test_a_run_stops_before_the_first_irregular_record() -> None:
    records = regular(50, 10)
    records[30] = NewRecord(None, b"x" * 11, (), BASE_TIME)
    data = build_batch(records)[61:]
    found = decode_run(data, 0, 0, 50, BASE_TIME)
    assert found is not None
    part, pos = found
    assert (part.length, part.cut) == (30, True)
    assert pos == 30 * (data[0] // 2 + 1)
    assert part.values == [bytes([i]) * 10 for i in range(30)]
    assert part.timestamps == [BASE_TIME] * 30


def test_no_run_for_records_with_headers_or_too_few_records() -> None:
    with_headers = [NewRecord(None, b"v", (("h", b"1"),), BASE_TIME)] * 20
    assert decode_run(build_batch(with_headers)[61:], 0, 0, 20, BASE_TIME) is None
    short = build_batch(regular(MIN_RUN - 1, 4))[61:]
    assert decode_run(short, 0, 0, MIN_RUN - 1, BASE_TIME) is None


def test_timestamp_deltas_of_two_bytes_and_negative_deltas() -> None:
    records = [NewRecord(None, b"v", (), BASE_TIME + 64 + 37 * i) for i in range(40)]
    records[0] = NewRecord(None, b"v", (), BASE_TIME)
    records[1] = NewRecord(None, b"v", (), BASE_TIME + 64)  # the run starts at record 1
    records.append(NewRecord(None, b"v", (), BASE_TIME - 8000))
    raw = build_batch(records, base_offset=5)
    assert_same_everywhere(raw)
    assert run_columns(raw).timestamps[-1] == BASE_TIME - 8000


@pytest.mark.parametrize(("field", "byte"), [
    ("header count", 0x02),  # one header, with no bytes for it
    ("key length", 0x03),  # -2
    ("value length", 0x05),  # -3
])
def test_the_same_fault_in_every_record_is_named(field: str, byte: int) -> None:
    # A run checks that its records agree with the first; the first is checked itself.
    raw = bytearray(build_batch(regular(20, 4, None, 0.0)))
    size = raw[61] // 2 + 1  # 1 length byte, attributes, 3 one-byte deltas and lengths
    at = {"header count": size - 1, "key length": 4, "value length": 5}[field]
    for start in range(61, len(raw), size):
        raw[start + at] = byte
    with pytest.raises(InvalidBatch) as per_record:
        per_record_columns(bytes(raw), False)
    with pytest.raises(InvalidBatch) as by_runs:
        run_columns(bytes(raw), False)
    assert str(by_runs.value) == str(per_record.value)
