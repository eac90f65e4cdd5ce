"""Control records: the transaction markers (KIP-98) that end a transaction in a partition.

A control batch holds a single record. Its key is (version int16, type int16) with type
0 for ABORT and 1 for COMMIT; for those types the value is the end-transaction marker
(version int16, coordinatorEpoch int32). Newer marker versions may append fields, which
decoding skips.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from logbus.records.batch import NO_PARTITION_LEADER_EPOCH, InvalidBatch
from logbus.records.builder import NewRecord, build_batch
from logbus.records.record import Record
from logbus.records.varint import Buffer

CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0

_KEY: Final = struct.Struct(">hh")
_MARKER: Final = struct.Struct(">hi")


class ControlType(IntEnum):
    """Control record types this broker writes (others may appear and are kept as ints)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class ControlKey:
    """The key of a control record; `type` may be a value this code does not know."""

    version: int
    type: int

    @property
    def is_commit(self) -> bool:
        return self.type == ControlType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlType.ABORT

    @property
    def is_transaction_marker(self) -> bool:
        return self.type in (ControlType.ABORT, ControlType.COMMIT)


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """The value of an ABORT or COMMIT control record."""

    version: int
    coordinator_epoch: int


def encode_control_key(
    control_type: ControlType | int, version: int = CONTROL_KEY_VERSION
) -> bytes:
    return _KEY.pack(version, control_type)


def decode_control_key(data: Buffer | None) -> ControlKey:
    """Decode a control record's key; raise InvalidBatch if it is missing or short."""
    if data is None or len(data) < _KEY.size:
        raise InvalidBatch("control record key is missing or shorter than 4 bytes")
    version, control_type = _KEY.unpack_from(data)
    return ControlKey(version, control_type)


def encode_end_txn_marker(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    return _MARKER.pack(version, coordinator_epoch)


def decode_end_txn_marker(data: Buffer | None) -> EndTxnMarker:
    """Decode an ABORT/COMMIT control record's value; raise InvalidBatch if it is short."""
    if data is None or len(data) < _MARKER.size:
        raise InvalidBatch("transaction marker value is missing or shorter than 6 bytes")
    version, coordinator_epoch = _MARKER.unpack_from(data)
    return EndTxnMarker(version, coordinator_epoch)


def parse_transaction_marker(record: Record) -> tuple[ControlKey, EndTxnMarker]:
    """Read a COMMIT or ABORT control record; raise InvalidBatch for anything else."""
    key = decode_control_key(record.key)
    if not key.is_transaction_marker:
        raise InvalidBatch(f"control record type {key.type} is not a transaction marker")
    return key, decode_end_txn_marker(record.value)


def build_end_txn_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as a partition leader writes it."""
    marker = NewRecord(
        encode_control_key(control_type),
        encode_end_txn_marker(coordinator_epoch),
        (),
        timestamp,
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
