from __future__ import annotations

import struct
from pathlib import Path

import pytest
from storage_helpers import make_batch

from logbus.records.batch import BatchHeader
from logbus.records.crc32c import crc32c
from logbus.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from logbus.storage.producer_state import (
    DuplicateBatch,
    PendingProducerUpdate,
    ProducerBatch,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)

PID = 4000


def batch(seq: int, count: int = 1, *, epoch: int = 0, pid: int = PID) -> BatchHeader:
    return BatchHeader.parse(
        make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    )


def append(
    state: ProducerStateManager, header: BatchHeader, offset: int, ts: int = 1000
) -> PendingProducerUpdate | DuplicateBatch:
    outcome = state.prepare_append([ProducerBatch(header, offset, ts)], from_client=True)
    if isinstance(outcome, PendingProducerUpdate):
        state.commit(outcome)
    return outcome


def test_in_order_sequences_and_duplicates(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    assert isinstance(append(state, batch(0, 3), 0), PendingProducerUpdate)
    assert isinstance(append(state, batch(3, 2), 3), PendingProducerUpdate)
    entry = state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4 and entry.last_offset == 4
    assert state.map_end_offset == 5

    assert append(state, batch(0, 3), 10) == DuplicateBatch(0, 2, 1000)
    assert append(state, batch(3, 2), 10) == DuplicateBatch(3, 4, 1000)
    with pytest.raises(OutOfOrderSequenceError):
        append(state, batch(7), 5)
    with pytest.raises(OutOfOrderSequenceError):
        append(state, batch(2, 2), 5)  # overlaps but is not an exact earlier batch


def test_only_last_five_batches_are_remembered(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(7):
        append(state, batch(i), i)
    assert isinstance(append(state, batch(2), 7), DuplicateBatch)
    with pytest.raises(OutOfOrderSequenceError):
        append(state, batch(1), 7)  # forgotten, so it looks out of order


def test_epochs(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, batch(0, epoch=2), 0)
    append(state, batch(1, epoch=2), 1)
    with pytest.raises(InvalidProducerEpochError):
        append(state, batch(2, epoch=1), 2)
    with pytest.raises(OutOfOrderSequenceError):
        append(state, batch(5, epoch=3), 2)  # a new epoch must start at 0
    assert isinstance(append(state, batch(0, epoch=3), 2), PendingProducerUpdate)
    entry = state.last_entry(PID)
    assert entry is not None and entry.producer_epoch == 3 and len(entry.batches) == 1


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    # Kafka 2.5+ (KIP-360): the log may have lost the producer's earlier batches.
    state = ProducerStateManager(tmp_path)
    assert isinstance(append(state, batch(17, epoch=0), 0), PendingProducerUpdate)
    assert isinstance(append(state, batch(18, epoch=0), 1), PendingProducerUpdate)


def test_sequence_wraps(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, batch((1 << 31) - 2, 2), 0)
    entry = state.last_entry(PID)
    assert entry is not None and entry.last_seq == (1 << 31) - 1
    assert isinstance(append(state, batch(0), 2), PendingProducerUpdate)


def test_nothing_changes_until_commit(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    outcome = state.prepare_append([ProducerBatch(batch(0), 0, 5)], from_client=True)
    assert isinstance(outcome, PendingProducerUpdate)
    assert state.last_entry(PID) is None
    state.commit(outcome)
    assert state.last_entry(PID) is not None


def test_snapshot_round_trip_and_format(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, batch(0, 3, epoch=1), 10, ts=111)
    append(state, batch(0, 2, epoch=0, pid=77), 13, ts=222)
    path = state.take_snapshot()
    assert path.name == "00000000000000000015.snapshot"
    data = path.read_bytes()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6)[0] == 2
    entries = sorted(struct.iter_unpack(">qhiqiqiq", data[10:]))
    assert entries == [
        (77, 0, 1, 14, 1, 222, -1, -1),
        (PID, 1, 2, 12, 2, 111, -1, -1),
    ]

    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(100) == 15
    assert append(loaded, batch(0, 3, epoch=1), 20) == DuplicateBatch(10, 12, 111)
    assert isinstance(append(loaded, batch(3, epoch=1), 20), PendingProducerUpdate)


def test_load_skips_snapshots_past_the_log_end_and_corrupt_ones(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, batch(0), 0)
    state.take_snapshot(1)
    append(state, batch(1), 1)
    state.take_snapshot(2)
    append(state, batch(2), 2)
    state.take_snapshot(3)
    (tmp_path / "00000000000000000002.snapshot").write_bytes(b"\x00\x01garbage")
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(2) == 1
    assert loaded.snapshot_offsets() == [1]


def test_snapshot_decode_rejects_corruption() -> None:
    data = bytearray(encode_snapshot([]))
    assert decode_snapshot(bytes(data)) == []
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data[:-1]))
    data[-1] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


def test_expiration(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    append(state, batch(0), 0, ts=1000)
    assert state.remove_expired(now_ms=2000, expiration_ms=5000) == 0
    assert state.remove_expired(now_ms=7000, expiration_ms=5000) == 1
    assert state.last_entry(PID) is None
