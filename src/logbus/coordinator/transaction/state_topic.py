"""The `__transaction_state` topic as the transaction coordinator sees it: its name and
which of its partitions coordinates a transactional id (Kafka's
`TransactionStateManager.partitionFor`: `Utils.abs(transactionalId.hashCode) % n`)."""

from __future__ import annotations

from logbus.coordinator.group.offsets_topic import java_string_hash

TRANSACTION_STATE_TOPIC = "__transaction_state"


def java_abs(n: int) -> int:
    """Kafka's `Utils.abs`: the absolute value, 0 for Integer.MIN_VALUE."""
    return 0 if n == -(1 << 31) else abs(n)


def txn_partition_for(transactional_id: str, partitions: int) -> int:
    return java_abs(java_string_hash(transactional_id)) % partitions
