"""The admin client's transaction tools (KIP-664, what kafka-transactions.sh uses): list
the transactions every broker coordinates, describe transactional ids on their
coordinators, describe the producers active on partitions (on their leaders), and abort
a hanging transaction by writing its ABORT marker to a partition's leader
(WriteTxnMarkers, as the coordinator itself would).

`Admin` (`client.py`) exposes these as methods; they use its retries (`_each`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from logbus.client import coordinator_lookup
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.find_coordinator import TRANSACTION_KEY
from logbus.client.requests.transactions import (
    ProducerState,
    describe_producers,
    describe_transactions,
    list_transactions,
)
from logbus.client.requests.transactions_marker import MarkerEntry, write_txn_markers
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

if TYPE_CHECKING:
    from logbus.client.admin.client import Admin


class TransactionListing(NamedTuple):
    """A transaction a broker coordinates (ListTransactions)."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


class TransactionDescription(NamedTuple):
    """A transactional id's state on its coordinator (DescribeTransactions):
    `start_time_ms` is -1 outside a transaction."""

    coordinator_id: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[TopicPartition]


class AbortTransactionSpec(NamedTuple):
    """Which transaction's marker to write to a partition (kafka-transactions.sh
    `abort`): its producer id and epoch, and a coordinator epoch at least the one the
    partition last saw a marker with (DescribeProducers says which)."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


async def list_txns(
    admin: Admin,
    states: Sequence[str],
    producer_ids: Sequence[int],
    duration_ms: int,
    timeout_ms: int | None,
) -> list[TransactionListing]:
    async def attempt(
        node_ids: list[int], _: int
    ) -> dict[int, list[TransactionListing] | KafkaError]:
        out: dict[int, list[TransactionListing] | KafkaError] = {}
        for node_id in node_ids:
            try:
                conn = await admin.cluster.node(node_id)
                listed = await list_transactions(conn, states, producer_ids, duration_ms)
                out[node_id] = [
                    TransactionListing(t.transactional_id, t.producer_id, t.state, node_id)
                    for t in listed
                ]
            except KafkaError as exc:
                out[node_id] = exc
        return out

    md = await admin._single(lambda: admin.cluster.refresh([]), timeout_ms)
    found = await admin._each(sorted(md.brokers), attempt, timeout_ms)
    listings = [t for listed in found.values() for t in listed]
    return sorted(listings, key=lambda t: t.transactional_id)


async def describe_txns(
    admin: Admin, transactional_ids: Sequence[str], timeout_ms: int | None
) -> dict[str, TransactionDescription]:
    async def attempt(batch: list[str], _: int) -> dict[str, TransactionDescription | KafkaError]:
        out: dict[str, TransactionDescription | KafkaError] = {}
        by_node: dict[int, list[str]] = {}
        for txn_id in batch:
            try:
                node_id = await coordinator_lookup.coordinator_id(
                    admin.cluster, txn_id, wait=0, key_type=TRANSACTION_KEY
                )
            except KafkaError as exc:
                out[txn_id] = exc
                continue
            by_node.setdefault(node_id, []).append(txn_id)
        md = admin.cluster.metadata
        if by_node and (md is None or not set(by_node) <= set(md.brokers)):
            await admin.cluster.refresh([])
        for node_id, ids in by_node.items():
            try:
                found = await describe_transactions(await admin.cluster.node(node_id), ids)
            except KafkaError as exc:
                out.update(dict.fromkeys(ids, exc))
                continue
            for txn_id in ids:
                d = found[txn_id]
                out[txn_id] = (
                    d
                    if isinstance(d, KafkaError)
                    else TransactionDescription(
                        node_id,
                        d.transactional_id,
                        d.state,
                        d.producer_id,
                        d.producer_epoch,
                        d.timeout_ms,
                        d.start_time_ms,
                        d.partitions,
                    )
                )
        return out

    return await admin._each(transactional_ids, attempt, timeout_ms)


async def producers_of(
    admin: Admin, partitions: Sequence[TopicPartition], timeout_ms: int | None
) -> dict[TopicPartition, list[ProducerState]]:
    async def attempt(
        batch: list[TopicPartition], _: int
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        return await admin._on_leaders(batch, describe_producers)

    return await admin._each([TopicPartition(*tp) for tp in partitions], attempt, timeout_ms)


async def abort_txn(admin: Admin, spec: AbortTransactionSpec, timeout_ms: int | None) -> None:
    tp = TopicPartition(*spec.partition)
    marker = MarkerEntry(
        spec.producer_id, spec.producer_epoch, spec.coordinator_epoch, False, (tp,)
    )

    async def on_leader(
        conn: Connection, batch: list[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        results = await write_txn_markers(conn, [marker])
        code = results.get(spec.producer_id, {}).get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
        error = (
            None
            if code == ErrorCode.NONE
            else KafkaError(code, f"aborting producer {spec.producer_id}'s transaction on "
                            f"{tp.topic}-{tp.partition}")
        )
        return dict.fromkeys(batch, error)

    async def attempt(
        batch: list[TopicPartition], _: int
    ) -> dict[TopicPartition, KafkaError | None]:
        return await admin._on_leaders(batch, on_leader)

    await admin._each([tp], attempt, timeout_ms)


async def find_hanging_txn(
    admin: Admin, partition: TopicPartition, start_offset: int, timeout_ms: int | None
) -> AbortTransactionSpec:
    """The abort of the transaction that started at `start_offset` of `partition`
    (kafka-transactions.sh abort --start-offset): its producer from DescribeProducers."""
    found = (await producers_of(admin, [partition], timeout_ms))[TopicPartition(*partition)]
    for p in found:
        if p.current_txn_start_offset == start_offset:
            return AbortTransactionSpec(
                TopicPartition(*partition),
                p.producer_id,
                p.producer_epoch,
                max(p.coordinator_epoch, 0),
            )
    raise KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"no open transaction starts at offset {start_offset} of "
        f"{partition[0]}-{partition[1]}",
    )
