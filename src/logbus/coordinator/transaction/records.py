"""The records of `__transaction_state` (Kafka's `TransactionLog`): the key is
TransactionLogKey v0 (the transactional id), the value TransactionLogValue v0 (the
transaction's metadata); a null value is the tombstone of an expired id. Each is
prefixed with its int16 version, as Kafka writes them."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from logbus.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    TxnState,
    TxnTransit,
)
from logbus.protocol import schema
from logbus.types import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0
MAX_VALUE_VERSION = 1
_INT16 = struct.Struct(">h")


class InvalidTxnRecord(ValueError):
    """A `__transaction_state` record that does not decode."""


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One decoded record: `transit` None is a tombstone."""

    transactional_id: str
    transit: TxnTransit | None


def _encode(name: str, version: int, body: dict[str, Any]) -> bytes:
    return _INT16.pack(version) + schema.message(name).encode(body, version)


def _decode(name: str, data: bytes, max_version: int) -> dict[str, Any]:
    if len(data) < 2:
        raise InvalidTxnRecord(f"{name} too short: {len(data)} bytes")
    (version,) = _INT16.unpack_from(data)
    if not 0 <= version <= max_version:
        raise InvalidTxnRecord(f"unknown {name} version {version}")
    try:
        body: dict[str, Any] = schema.message(name).decode(data[2:], version)
    except (ValueError, IndexError, struct.error) as exc:
        raise InvalidTxnRecord(f"corrupt {name} v{version}: {exc}") from exc
    return body


def txn_key(transactional_id: str) -> bytes:
    return _encode("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def txn_value(t: TxnTransit) -> bytes:
    topics: dict[str, list[int]] = {}
    for tp in sorted(t.partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return _encode(
        "TransactionLogValue",
        VALUE_VERSION,
        {
            "producer_id": t.producer_id,
            "producer_epoch": t.producer_epoch,
            "transaction_timeout_ms": t.timeout_ms,
            "transaction_status": t.state.id,
            # Kafka writes no partitions for Empty and the Complete states
            "transaction_partitions": [
                {"topic": topic, "partition_ids": ids} for topic, ids in topics.items()
            ],
            "transaction_last_update_timestamp_ms": t.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": t.start_timestamp_ms,
        },
    )


def decode_record(key: bytes, value: bytes | None) -> TxnRecord:
    k = _decode("TransactionLogKey", key, KEY_VERSION)
    txn_id: str = k["transactional_id"]
    if value is None:
        return TxnRecord(txn_id, None)
    v = _decode("TransactionLogValue", value, MAX_VALUE_VERSION)
    try:
        state = TxnState.from_id(v["transaction_status"])
    except ValueError as exc:
        raise InvalidTxnRecord(str(exc)) from exc
    partitions = frozenset(
        TopicPartition(t["topic"], p)
        for t in v.get("transaction_partitions") or ()
        for p in t["partition_ids"]
    )
    producer_id: int = v["producer_id"]
    previous = v.get("previous_producer_id", -1)
    return TxnRecord(
        txn_id,
        TxnTransit(
            producer_id=producer_id,
            last_producer_id=previous if previous >= 0 else producer_id,
            producer_epoch=v["producer_epoch"],
            last_producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=v["transaction_timeout_ms"],
            state=state,
            partitions=partitions,
            start_timestamp_ms=v["transaction_start_timestamp_ms"],
            last_update_timestamp_ms=v["transaction_last_update_timestamp_ms"],
        ),
    )
