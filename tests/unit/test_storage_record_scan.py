"""storage.record_scan reads records with the records package's reference decoder and
control records with records.control (one implementation of each), and stored data it
cannot read never raises where a reader must go on."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from logbus.records.batch import HEADER_SIZE, BatchHeader, InvalidBatch, compute_crc
from logbus.records.builder import NewRecord, build_batch
from logbus.records.control import ControlType, build_end_txn_batch
from logbus.records.reader import decode_batch, iter_record_set
from logbus.storage.record_scan import default_decompressor, iter_records, read_control_marker

records = st.lists(
    st.builds(
        NewRecord,
        st.none() | st.binary(max_size=8),
        st.none() | st.binary(max_size=40),
        st.just(()),
        st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=20,
)


@given(records, st.integers(0, 4), st.booleans())
def test_iter_records_reads_what_the_reference_decoder_reads(
    batch_records: list[NewRecord], codec: int, log_append_time: bool
) -> None:
    batch = bytearray(build_batch(batch_records, compression=codec, base_offset=100))
    if log_append_time:
        struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | 0x08)
    header, decoded = decode_batch(bytes(batch), verify_crc=False)
    found = iter_records(memoryview(bytes(batch)), header, default_decompressor())
    assert found is not None
    assert [(r.offset, r.timestamp, r.key, r.value) for r in found] == [
        (r.offset, r.timestamp, r.key, r.value) for r in decoded
    ]


def garbled(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[HEADER_SIZE] = 0x7E  # the first record's length runs past the batch
    struct.pack_into(">I", out, 17, compute_crc(out))
    return bytes(out)


def test_a_control_marker_is_read_and_an_unreadable_one_is_none() -> None:
    marker = build_end_txn_batch(
        ControlType.COMMIT, producer_id=3, producer_epoch=1, coordinator_epoch=9
    )
    header = BatchHeader.parse(marker)
    found = read_control_marker(memoryview(marker), header)
    assert found is not None
    assert (found.control_type, found.coordinator_epoch) == (ControlType.COMMIT, 9)
    assert read_control_marker(memoryview(garbled(marker)), header) is None


def test_stored_readers_skip_an_unreadable_batch_when_asked() -> None:
    good = build_batch([(b"k", b"v")], base_offset=0)
    bad = garbled(build_batch([(b"k", b"v")] * 2, base_offset=1))
    skipped: list[tuple[int, str]] = []

    def note(header: BatchHeader, error: InvalidBatch) -> None:
        skipped.append((header.base_offset, str(error)))

    read = list(iter_record_set(good + bad + good, on_unreadable=note))
    assert [len(found) for _, found in read] == [1, 0, 1]
    assert [offset for offset, _ in skipped] == [1]
