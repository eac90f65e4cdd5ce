"""The admin client's transaction tools (KIP-664, what kafka-transactions.sh uses): list
the transactions every broker coordinates, describe transactional ids on their
coordinators, describe the producers active on partitions (on their leaders), and abort
a hanging transaction by writing its ABORT marker to a partition's leader
(WriteTxnMarkers, as the coordinator itself would).

`Admin` (`client.py`) exposes these as methods; they are sent and retried with its
`AdminCalls` (`calls.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from logbus.client.admin.calls import AdminCalls
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.find_coordinator import TRANSACTION_KEY
from logbus.client.requests.transactions import (
    ListedTransaction,
    ProducerState,
    describe_producers,
    describe_transactions,
    list_transactions,
)
from logbus.client.requests.transactions_marker import MarkerEntry, write_txn_markers
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode


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
    calls: AdminCalls,
    states: Sequence[str],
    producer_ids: Sequence[int],
    duration_ms: int,
    timeout_ms: int | None,
) -> list[TransactionListing]:
    async def list_on(conn: Connection) -> list[ListedTransaction]:
        return await list_transactions(conn, states, producer_ids, duration_ms)

    found = await calls.on_each_broker(None, list_on, timeout_ms)
    listings = [
        TransactionListing(t.transactional_id, t.producer_id, t.state, node_id)
        for node_id, listed in found.items()
        for t in listed
    ]
    return sorted(listings, key=lambda t: t.transactional_id)


async def describe_txns(
    calls: AdminCalls, transactional_ids: Sequence[str], timeout_ms: int | None
) -> dict[str, TransactionDescription]:
    async def on_coordinator(
        conn: Connection, node_id: int, ids: list[str]
    ) -> dict[str, TransactionDescription | KafkaError]:
        found = await describe_transactions(conn, ids)
        return {
            txn_id: d
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
            for txn_id, d in found.items()
        }

    async def attempt(batch: list[str], _: int) -> dict[str, TransactionDescription | KafkaError]:
        return await calls.on_coordinators(batch, on_coordinator, TRANSACTION_KEY)

    return await calls.each(transactional_ids, attempt, timeout_ms)


async def producers_of(
    calls: AdminCalls, partitions: Sequence[TopicPartition], timeout_ms: int | None
) -> dict[TopicPartition, list[ProducerState]]:
    async def attempt(
        batch: list[TopicPartition], _: int
    ) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        return await calls.on_leaders(batch, describe_producers)

    return await calls.each([TopicPartition(*tp) for tp in partitions], attempt, timeout_ms)


async def abort_txn(calls: AdminCalls, spec: AbortTransactionSpec, timeout_ms: int | None) -> None:
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
        return await calls.on_leaders(batch, on_leader)

    await calls.each([tp], attempt, timeout_ms)


async def find_hanging_txn(
    calls: AdminCalls, partition: TopicPartition, start_offset: int, timeout_ms: int | None
) -> AbortTransactionSpec:
    """The abort of the transaction that started at `start_offset` of `partition`
    (kafka-transactions.sh abort --start-offset): its producer from DescribeProducers."""
    found = (await producers_of(calls, [partition], timeout_ms))[TopicPartition(*partition)]
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
