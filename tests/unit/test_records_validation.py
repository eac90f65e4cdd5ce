"""The fast record validator (`records.validation`: its compiled walker and its numpy one,
every test run with both) and its numpy varints, pinned to the reference decoder
(`records.record.decode_record`, `records.varint`) by differential
property tests: every batch the builder writes is accepted, and a mutated records section
is refused whenever the reference cannot read it (the validator may refuse more, e.g.
offset deltas out of order, but never accepts what the reference refuses)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import (
    CompressionError,
    CompressionType,
    compress,
    decompress_bounded,
)
from logbus.records.reader import decode_batch
from logbus.records.record import decode_record
from logbus.records.validation import COMPILED, InvalidRecords, RecordsCheck, check_records
from logbus.records.varint import VarintError, decode_varint, decode_varlong
from logbus.records.varint_arrays import VARINT_BYTES, VARLONG_BYTES, varints

headers = st.lists(
    st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3
)
records = st.builds(
    NewRecord,
    st.none() | st.binary(max_size=20),
    st.none() | st.binary(max_size=300),
    headers,
    st.none() | st.integers(0, 2**41),
)
codecs = st.sampled_from(list(CompressionType))

# Every test that checks records runs with both walkers. The compiled one is built by
# `pip install -e .` (setup.py); a source tree without it skips those runs.
WALKERS = [
    pytest.param(True, id="compiled",
                 marks=pytest.mark.skipif(not COMPILED, reason="records._validate not built")),
    pytest.param(False, id="numpy"),
]
walkers = pytest.mark.parametrize("compiled", WALKERS)


def check(body: bytes, header: BatchHeader, compiled: bool) -> RecordsCheck:
    return check_records(body, header, compiled=compiled)


def reference_reads(data: bytes, count: int) -> bool:
    """Whether the reference decoder reads exactly `count` records filling `data`, with
    offset deltas 0..count-1."""
    pos = 0
    try:
        for index in range(count):
            if pos >= len(data):
                return False
            record, pos = decode_record(data, pos, 0, 0)
            if record.offset != index:
                return False
    except InvalidBatch:
        return False
    return pos == len(data)


def section(batch: bytes) -> tuple[BatchHeader, bytes]:
    header = BatchHeader.parse(batch)
    body = batch[HEADER_SIZE:]
    if header.compression:
        body = bytes(decompress_bounded(header.compression, body, 1 << 24))
    return header, body


@walkers
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=40), codecs)
def test_every_built_batch_is_accepted_with_its_timestamps_and_keys(
    compiled: bool, batch_records: list[NewRecord], codec: CompressionType
) -> None:
    assert_accepted(build_batch(batch_records, compression=codec), compiled)


def assert_accepted(batch: bytes, compiled: bool) -> None:
    """The batch is accepted, with the reference decoder's timestamps and null keys."""
    header, body = section(batch)
    checked = check(body, header, compiled)
    _, decoded = decode_batch(batch)
    stamps = [r.timestamp for r in decoded]
    assert (checked.min_timestamp, checked.max_timestamp) == (min(stamps), max(stamps))
    assert checked.keyless == [i for i, r in enumerate(decoded) if r.key is None]


@walkers
@pytest.mark.parametrize("count", [300, 5000, 9000])
@pytest.mark.parametrize("key", [None, b"key"])
@pytest.mark.parametrize("spread", [3, 50, 5000])
def test_long_regular_batches_are_accepted(
    compiled: bool, count: int, key: bytes | None, spread: int
) -> None:
    # runs of equal records, crossing the offset deltas' width changes at 64 and 8192,
    # timestamp deltas of one and two bytes, some below the first record's
    stamps = [1000 + (i * 7919) % spread - spread // 2 for i in range(count)]
    stamps[0] = 1000
    batch = build_batch([NewRecord(key, b"v" * 100, (), t) for t in stamps])
    header, body = section(batch)
    checked = check(body, header, compiled)
    assert (checked.min_timestamp, checked.max_timestamp) == (min(stamps), max(stamps))
    assert len(checked.keyless) == (count if key is None else 0)


mutations = st.lists(
    st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, 10**6),
              st.integers(0, 255)),
    min_size=1,
    max_size=3,
)


def mutate(body: bytes, steps: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(body)
    for kind, at, value in steps:
        at %= max(len(out), 1)
        if kind == "set" and out:
            out[at] = value
        elif kind == "insert":
            out.insert(at, value)
        elif out:
            del out[at]
    return bytes(out)


def assert_agrees(body: bytes, header: BatchHeader, compiled: bool) -> None:
    try:
        check(body, header, compiled)
    except InvalidRecords:
        return  # refusing is always allowed; accepting must be backed by the reference
    assert reference_reads(body, header.record_count)


@walkers
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=20), mutations)
def test_a_mutated_records_section_is_never_accepted_unless_the_reference_reads_it(
    compiled: bool, batch_records: list[NewRecord], steps: list[tuple[str, int, int]]
) -> None:
    header, body = section(build_batch(batch_records))
    assert_agrees(mutate(body, steps), header, compiled)


@walkers
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(256, 2000), st.integers(0, 200), mutations)
def test_a_mutated_long_regular_batch_is_never_accepted_unless_the_reference_reads_it(
    compiled: bool, count: int, size: int, steps: list[tuple[str, int, int]]
) -> None:
    header, body = section(build_batch([(None, b"x" * size)] * count))
    assert_agrees(mutate(body, steps), header, compiled)


@pytest.mark.skipif(not COMPILED, reason="records._validate not built")
@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=20), mutations)
def test_the_compiled_walker_accepts_exactly_what_the_reference_reads(
    batch_records: list[NewRecord], steps: list[tuple[str, int, int]]
) -> None:
    header, body = section(build_batch(batch_records))
    body = mutate(body, steps)
    try:
        check(body, header, True)
    except InvalidRecords:
        assert not reference_reads(body, header.record_count)
    else:
        assert reference_reads(body, header.record_count)


irregular = st.lists(st.integers(0, 300), min_size=130, max_size=300).map(
    lambda sizes: [
        NewRecord(
            None if n % 7 == 0 else b"k%d" % n,
            b"v" * n,
            (("h", b"x"),) if n % 5 == 0 else (),
            1000 + n % 11,
        )
        for n in sizes
    ]
)


@walkers
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(irregular)
def test_long_irregular_batches_are_accepted(
    compiled: bool, batch_records: list[NewRecord]
) -> None:
    assert_accepted(build_batch(batch_records), compiled)


@walkers
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(irregular, mutations)
def test_a_mutated_long_irregular_batch_is_never_accepted_unless_the_reference_reads_it(
    compiled: bool, batch_records: list[NewRecord], steps: list[tuple[str, int, int]]
) -> None:
    header, body = section(build_batch(batch_records))
    assert_agrees(mutate(body, steps), header, compiled)


@walkers
@settings(max_examples=200)
@given(st.lists(records, min_size=1, max_size=10), st.integers(-3, 3))
def test_a_lying_record_count_is_refused(
    compiled: bool, batch_records: list[NewRecord], lie: int
) -> None:
    batch = build_batch(batch_records)
    header, body = section(batch)
    if lie == 0:
        return
    liar = replace(header, record_count=max(0, header.record_count + lie))
    if liar.record_count == header.record_count:
        return
    with pytest.raises(InvalidRecords):
        check(body, liar, compiled)


@walkers
def test_a_lie_of_two_billion_records_is_refused_before_any_work(compiled: bool) -> None:
    header, body = section(build_batch([(None, b"v")] * 2))
    with pytest.raises(InvalidRecords, match="cannot hold"):
        check(body, replace(header, record_count=2**31 - 1), compiled)


@walkers
def test_the_first_bad_record_is_named(compiled: bool) -> None:
    header, body = section(build_batch([(b"k", b"v" * 10)] * 5))
    size = len(body) // 5
    bad = bytearray(body)
    bad[2 * size] = 0x7F  # record 2's length varint: -64
    with pytest.raises(InvalidRecords) as caught:
        check(bytes(bad), header, compiled)
    assert caught.value.index == 2


@settings(max_examples=500)
@given(st.binary(min_size=1, max_size=12), st.sampled_from([VARINT_BYTES, VARLONG_BYTES]))
def test_numpy_varints_accept_exactly_what_the_reference_accepts(
    data: bytes, max_bytes: int
) -> None:
    reference = decode_varint if max_bytes == VARINT_BYTES else decode_varlong
    values, after, ok = varints(np.frombuffer(data, np.uint8), np.zeros(1, np.int64), max_bytes)
    try:
        value, end = reference(data, 0)
    except VarintError:
        assert not ok[0] or after[0] > len(data)
        return
    assert ok[0]
    assert (int(values[0]), int(after[0])) == (value, end)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_decompression_is_bounded(codec: CompressionType) -> None:
    data = bytes(1 << 20)  # compresses to almost nothing
    packed = compress(codec, data)
    assert bytes(decompress_bounded(codec, packed, len(data))) == data
    with pytest.raises(CompressionError):
        decompress_bounded(codec, packed, len(data) - 1)


@pytest.mark.skipif(not COMPILED, reason="records._validate not built")
def test_appends_are_validated_without_loading_numpy() -> None:
    # numpy costs the broker ~16 MB of memory; with the compiled walker, validating an
    # append (every codec, keys read for a compacted topic) needs none of it.
    script = """
import sys
from logbus.records.builder import build_batch
from logbus.storage.log_validator import analyze_records
for codec in range(5):
    batch = build_batch([(b"k", b"v" * 100)] * 300, compression=codec)
    analyze_records(batch, max_message_bytes=1 << 20, from_client=True, compact=True)
print("numpy" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "False"
