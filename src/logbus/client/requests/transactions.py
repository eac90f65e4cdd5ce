"""Transactions (KIP-98, KIP-664): what a transactional producer asks of its transaction
coordinator (InitProducerId with a transactional id, AddPartitionsToTxn v0-3,
AddOffsetsToTxn v0-4, EndTxn v0-5) and of its group's coordinator (TxnOffsetCommit
v0-4), and what the admin tools ask (DescribeTransactions v0, ListTransactions v0-1 of
every broker, DescribeProducers v0 of a partition's leader).

The producer's requests keep their error codes (as `KafkaError`s) for the transaction
manager to decide: retry, find the coordinator again, abortable, or fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.common import by_topic, fill_missing, per_partition
from logbus.client.requests.group_membership import NOT_A_MEMBER, MemberIdentity
from logbus.client.requests.producer_id import (
    NO_PRODUCER,
    ProducerIdAndEpoch,
    build_init_producer_id,
    read_init_producer_id,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.types import TopicPartition

# AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890); a client sends v0-3.
ADD_PARTITIONS_CLIENT_MAX = 3
_ADD_PARTITIONS_BATCHED_FROM = 4
_TXN_OFFSET_MEMBER_FROM = 3  # TxnOffsetCommit: generation, member and instance id (KIP-447)
_LIST_DURATION_FROM = 1


# --- InitProducerId with a transactional id ---------------------------------------------


def build_init_transactional_id(
    version: int,
    transactional_id: str,
    timeout_ms: int,
    current: ProducerIdAndEpoch = NO_PRODUCER,
) -> dict[str, Any]:
    """A producer id and epoch for `transactional_id` (fencing earlier producers with the
    same id); from v3, `current` asks for its epoch bumped (KIP-360)."""
    return build_init_producer_id(
        version, current, transactional_id=transactional_id, timeout_ms=timeout_ms
    )


async def init_transactional_id(
    conn: Connection,
    transactional_id: str,
    timeout_ms: int,
    current: ProducerIdAndEpoch = NO_PRODUCER,
) -> ProducerIdAndEpoch:
    """InitProducerId to the transaction coordinator `conn` (raises its error)."""
    version = conn.choose_version(ApiKey.INIT_PRODUCER_ID)
    body = build_init_transactional_id(version, transactional_id, timeout_ms, current)
    response = await conn.request(ApiKey.INIT_PRODUCER_ID, body, version)
    return read_init_producer_id(response)


# --- AddPartitionsToTxn -----------------------------------------------------------------


def build_add_partitions_to_txn(
    version: int,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: Iterable[TopicPartition],
) -> dict[str, Any]:
    grouped = by_topic((tp, tp[1]) for tp in partitions)
    topics = [{"name": t, "partitions": ps} for t, ps in grouped.items()]
    if version >= _ADD_PARTITIONS_BATCHED_FROM:
        return {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer.producer_id,
                    "producer_epoch": producer.epoch,
                    "verify_only": False,
                    "topics": topics,
                }
            ]
        }
    return {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": producer.producer_id,
        "v3_and_below_producer_epoch": producer.epoch,
        "v3_and_below_topics": topics,
    }


def read_add_partitions_to_txn(
    response: dict[str, Any], version: int, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    """Each partition: None when added, else its error (a request-wide error, v4+,
    is every partition's)."""
    asked = list(partitions)
    if version >= _ADD_PARTITIONS_BATCHED_FROM:
        code = response.get("error_code", ErrorCode.NONE)
        if code != ErrorCode.NONE:
            return dict.fromkeys(asked, KafkaError(code, "AddPartitionsToTxn"))
        results = response["results_by_transaction"]
        topics = results[0]["topic_results"] if results else []
    else:
        topics = response["results_by_topic_v3_and_below"]
    entries = (
        (TopicPartition(t["name"], p["partition_index"]), p)
        for t in topics
        for p in t["results_by_partition"]
    )
    out: dict[TopicPartition, KafkaError | None] = {}
    for tp, p in entries:
        code = p["partition_error_code"]
        out[tp] = (
            None
            if code == ErrorCode.NONE
            else KafkaError(code, f"AddPartitionsToTxn {tp[0]}-{tp[1]}")
        )
    fill_missing(out, asked, "AddPartitionsToTxn")
    return out


async def add_partitions_to_txn(
    conn: Connection,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: Sequence[TopicPartition],
) -> dict[TopicPartition, KafkaError | None]:
    version = conn.choose_version(ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_CLIENT_MAX)
    body = build_add_partitions_to_txn(version, transactional_id, producer, partitions)
    response = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, body, version)
    return read_add_partitions_to_txn(response, version, partitions)


# --- AddOffsetsToTxn --------------------------------------------------------------------


def build_add_offsets_to_txn(
    version: int, transactional_id: str, producer: ProducerIdAndEpoch, group_id: str
) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "group_id": group_id,
    }


def read_add_offsets_to_txn(response: dict[str, Any], group_id: str) -> None:
    check(response["error_code"], f"AddOffsetsToTxn for group '{group_id}'")


async def add_offsets_to_txn(
    conn: Connection, transactional_id: str, producer: ProducerIdAndEpoch, group_id: str
) -> None:
    version = conn.choose_version(ApiKey.ADD_OFFSETS_TO_TXN)
    body = build_add_offsets_to_txn(version, transactional_id, producer, group_id)
    read_add_offsets_to_txn(await conn.request(ApiKey.ADD_OFFSETS_TO_TXN, body, version), group_id)


# --- TxnOffsetCommit --------------------------------------------------------------------


class TxnOffset(NamedTuple):
    """An offset committed with a transaction: where to resume, its metadata string and
    the leader epoch of the last record consumed (-1 unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


def build_txn_offset_commit(
    version: int,
    transactional_id: str,
    group_id: str,
    producer: ProducerIdAndEpoch,
    offsets: Mapping[TopicPartition, TxnOffset],
    member: MemberIdentity = NOT_A_MEMBER,
) -> dict[str, Any]:
    grouped = by_topic(
        (
            tp,
            {
                "partition_index": tp[1],
                "committed_offset": o.offset,
                "committed_leader_epoch": o.leader_epoch,
                "committed_metadata": o.metadata,
            },
        )
        for tp, o in offsets.items()
    )
    body: dict[str, Any] = {
        "transactional_id": transactional_id,
        "group_id": group_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
    }
    if version >= _TXN_OFFSET_MEMBER_FROM:
        body["generation_id"] = member.generation_id
        body["member_id"] = member.member_id
        body["group_instance_id"] = member.group_instance_id
    return body


def read_txn_offset_commit(
    response: dict[str, Any], offsets: Iterable[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    return per_partition(response["topics"], offsets, "TxnOffsetCommit", lambda _: None)


async def txn_offset_commit(
    conn: Connection,
    transactional_id: str,
    group_id: str,
    producer: ProducerIdAndEpoch,
    offsets: Mapping[TopicPartition, TxnOffset],
    member: MemberIdentity = NOT_A_MEMBER,
) -> dict[TopicPartition, KafkaError | None]:
    version = conn.choose_version(ApiKey.TXN_OFFSET_COMMIT)
    body = build_txn_offset_commit(version, transactional_id, group_id, producer, offsets, member)
    response = await conn.request(ApiKey.TXN_OFFSET_COMMIT, body, version)
    return read_txn_offset_commit(response, offsets)


# --- EndTxn -----------------------------------------------------------------------------


def build_end_txn(
    version: int, transactional_id: str, producer: ProducerIdAndEpoch, committed: bool
) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "producer_id": producer.producer_id,
        "producer_epoch": producer.epoch,
        "committed": committed,
    }


def read_end_txn(response: dict[str, Any], committed: bool) -> None:
    check(response["error_code"], "EndTxn " + ("commit" if committed else "abort"))


async def end_txn(
    conn: Connection, transactional_id: str, producer: ProducerIdAndEpoch, committed: bool
) -> None:
    version = conn.choose_version(ApiKey.END_TXN)
    body = build_end_txn(version, transactional_id, producer, committed)
    read_end_txn(await conn.request(ApiKey.END_TXN, body, version), committed)


# --- DescribeTransactions ---------------------------------------------------------------


class TransactionDescription(NamedTuple):
    """A transactional id's state on its coordinator (DescribeTransactions)."""

    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]


def build_describe_transactions(version: int, transactional_ids: Sequence[str]) -> dict[str, Any]:
    return {"transactional_ids": list(transactional_ids)}


def read_describe_transactions(
    response: dict[str, Any], transactional_ids: Iterable[str]
) -> dict[str, TransactionDescription | KafkaError]:
    def read(s: dict[str, Any]) -> TransactionDescription:
        return TransactionDescription(
            s["transactional_id"],
            s["transaction_state"],
            s["transaction_timeout_ms"],
            s["transaction_start_time_ms"],
            s["producer_id"],
            s["producer_epoch"],
            sorted(TopicPartition(t["topic"], p) for t in s["topics"] for p in t["partitions"]),
        )

    out: dict[str, TransactionDescription | KafkaError] = {}
    for s in response["transaction_states"]:
        key, code = s["transactional_id"], s["error_code"]
        out[key] = (
            read(s)
            if code == ErrorCode.NONE
            else KafkaError(code, f"DescribeTransactions for '{key}'")
        )
    fill_missing(out, transactional_ids, "DescribeTransactions")
    return out


async def describe_transactions(
    conn: Connection, transactional_ids: Sequence[str]
) -> dict[str, TransactionDescription | KafkaError]:
    version = conn.choose_version(ApiKey.DESCRIBE_TRANSACTIONS)
    body = build_describe_transactions(version, transactional_ids)
    response = await conn.request(ApiKey.DESCRIBE_TRANSACTIONS, body, version)
    return read_describe_transactions(response, transactional_ids)


# --- ListTransactions -------------------------------------------------------------------


class ListedTransaction(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


def build_list_transactions(
    version: int,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    duration_ms: int = -1,
) -> dict[str, Any]:
    """Every transaction the broker coordinates, filtered by state, producer id and
    (v1+, KIP-994) running for at least `duration_ms` (-1: any)."""
    body: dict[str, Any] = {
        "state_filters": list(states),
        "producer_id_filters": list(producer_ids),
    }
    if version >= _LIST_DURATION_FROM:
        body["duration_filter"] = duration_ms
    elif duration_ms >= 0:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            "the broker's ListTransactions cannot filter by duration (v1+)",
        )
    return body


def read_list_transactions(response: dict[str, Any]) -> list[ListedTransaction]:
    check(response["error_code"], "ListTransactions")
    return [
        ListedTransaction(s["transactional_id"], s["producer_id"], s["transaction_state"])
        for s in response["transaction_states"]
    ]


async def list_transactions(
    conn: Connection,
    states: Sequence[str] = (),
    producer_ids: Sequence[int] = (),
    duration_ms: int = -1,
) -> list[ListedTransaction]:
    version = conn.choose_version(ApiKey.LIST_TRANSACTIONS)
    body = build_list_transactions(version, states, producer_ids, duration_ms)
    return read_list_transactions(await conn.request(ApiKey.LIST_TRANSACTIONS, body, version))


# --- DescribeProducers ------------------------------------------------------------------


class ProducerState(NamedTuple):
    """A producer active on a partition, as its leader knows it (DescribeProducers);
    `current_txn_start_offset` is -1 outside a transaction, `coordinator_epoch` -1 when
    no marker has been written for it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def build_describe_producers(
    version: int, partitions: Iterable[TopicPartition]
) -> dict[str, Any]:
    grouped = by_topic((tp, tp[1]) for tp in partitions)
    return {"topics": [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]}


def read_describe_producers(
    response: dict[str, Any], partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
    def read(p: dict[str, Any]) -> list[ProducerState]:
        return [
            ProducerState(
                s["producer_id"],
                s["producer_epoch"],
                s["last_sequence"],
                s["last_timestamp"],
                s["coordinator_epoch"],
                s["current_txn_start_offset"],
            )
            for s in p["active_producers"]
        ]

    return per_partition(response["topics"], partitions, "DescribeProducers", read)


async def describe_producers(
    conn: Connection, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
    version = conn.choose_version(ApiKey.DESCRIBE_PRODUCERS)
    body = build_describe_producers(version, partitions)
    response = await conn.request(ApiKey.DESCRIBE_PRODUCERS, body, version)
    return read_describe_producers(response, partitions)
