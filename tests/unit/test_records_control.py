"""Control records: transaction marker keys and values, and control batches."""

from __future__ import annotations

import pytest

from logbus.records.batch import InvalidBatch
from logbus.records.control import (
    ControlKey,
    ControlType,
    EndTxnMarker,
    build_end_txn_batch,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
    parse_transaction_marker,
)
from logbus.records.reader import decode_batch, is_control_batch
from logbus.records.record import Record


def test_key_bytes() -> None:
    assert encode_control_key(ControlType.ABORT) == b"\x00\x00\x00\x00"
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    assert decode_control_key(b"\x00\x00\x00\x01") == ControlKey(0, ControlType.COMMIT)


def test_value_bytes() -> None:
    assert encode_end_txn_marker(258) == b"\x00\x00\x00\x00\x01\x02"
    assert decode_end_txn_marker(b"\x00\x00\x00\x00\x01\x02") == EndTxnMarker(0, 258)


def test_newer_versions_with_extra_fields_decode() -> None:
    assert decode_control_key(b"\x00\x01\x00\x00extra") == ControlKey(1, 0)
    assert decode_end_txn_marker(b"\x00\x01\xff\xff\xff\xffextra") == EndTxnMarker(1, -1)


def test_unknown_control_type_is_kept() -> None:
    key = decode_control_key(b"\x00\x00\x00\x03")
    assert key.type == 3
    assert not key.is_transaction_marker
    with pytest.raises(InvalidBatch, match="type 3 is not a transaction marker"):
        parse_transaction_marker(Record(0, 0, b"\x00\x00\x00\x03", b""))


@pytest.mark.parametrize("data", [None, b"", b"\x00\x00\x00"])
def test_short_key(data: bytes | None) -> None:
    with pytest.raises(InvalidBatch, match="control record key"):
        decode_control_key(data)


@pytest.mark.parametrize("data", [None, b"\x00\x00\x00\x00\x01"])
def test_short_value(data: bytes | None) -> None:
    with pytest.raises(InvalidBatch, match="transaction marker value"):
        decode_end_txn_marker(data)


@pytest.mark.parametrize("control_type", list(ControlType))
def test_end_txn_batch(control_type: ControlType) -> None:
    data = build_end_txn_batch(
        control_type,
        producer_id=11,
        producer_epoch=2,
        coordinator_epoch=9,
        base_offset=500,
        timestamp=1234,
        partition_leader_epoch=3,
    )
    header, (record,) = decode_batch(data)
    assert is_control_batch(header)
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (11, 2, -1)
    assert (header.base_offset, header.partition_leader_epoch) == (500, 3)
    assert record.offset == 500
    assert record.timestamp == 1234
    key, marker = parse_transaction_marker(record)
    assert key.is_commit == (control_type == ControlType.COMMIT)
    assert key.is_abort == (control_type == ControlType.ABORT)
    assert marker == EndTxnMarker(0, 9)
