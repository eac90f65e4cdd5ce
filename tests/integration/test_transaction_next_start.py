"""The next transaction of a producer starts as soon as the previous one is complete: an
AddPartitionsToTxn (or AddOffsetsToTxn) that reaches the coordinator while the previous
transaction's markers are still being written is answered once its CompleteCommit /
CompleteAbort record is written, instead of with CONCURRENT_TRANSACTIONS and a client
backoff (20 ms in Kafka's clients, several times what the markers take).

EndTxn and the next AddPartitionsToTxn go pipelined on one connection: the broker answers
requests of a connection in order, so the second is handled right after EndTxn wrote
PrepareCommit, while the markers (appended by this broker, the partition's leader, in a
task of their own) have not been written yet."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode

E = ErrorCode
TIMEOUT = 20


@pytest.fixture
def bootstrap(broker_factory: Any) -> str:
    running = broker_factory(
        transaction_state_log_num_partitions="1", offsets_topic_num_partitions="1"
    )
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    for future in admin.create_topics([NewTopic("t", 2, 1)]).values():
        future.result(TIMEOUT)
    return str(running.bootstrap)


async def _until(conn: Connection, api_key: ApiKey, version: int, body: dict[str, Any],
                 retriable: tuple[ErrorCode, ...]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while True:
        response = await conn.request(api_key, body, version)
        if response["error_code"] not in retriable or loop.time() > deadline:
            return response
        await asyncio.sleep(0.05)


def _add(txn_id: str, pid: int, epoch: int, partitions: list[int]) -> dict[str, Any]:
    return {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": "t", "partitions": partitions}],
    }


def _errors(response: dict[str, Any]) -> dict[int, int]:
    return {
        p["partition_index"]: p["partition_error_code"]
        for t in response["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }


async def _pipelined(bootstrap: str, txn_id: str, committed: bool,
                     offsets_next: bool) -> tuple[int, dict[str, Any], str]:
    host, port = bootstrap.rsplit(":", 1)
    async with await Connection.connect(host, int(port)) as conn:
        await _until(conn, ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1},
                     (E.COORDINATOR_NOT_AVAILABLE,))
        init = await _until(
            conn, ApiKey.INIT_PRODUCER_ID, 4,
            {"transactional_id": txn_id, "transaction_timeout_ms": 60_000,
             "producer_id": -1, "producer_epoch": -1},
            (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR),
        )
        assert init["error_code"] == E.NONE, init
        pid, epoch = init["producer_id"], init["producer_epoch"]
        first = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, _add(txn_id, pid, epoch, [0]), 3)
        assert _errors(first) == {0: E.NONE}
        end = conn.request(
            ApiKey.END_TXN,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
             "committed": committed},
            3,
        )
        if offsets_next:
            nxt = conn.request(
                ApiKey.ADD_OFFSETS_TO_TXN,
                {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                 "group_id": "g"},
                3,
            )
        else:
            nxt = conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, _add(txn_id, pid, epoch, [1]), 3)
        ended, started = await asyncio.gather(end, nxt)
        described = await conn.request(
            ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]}, 0
        )
        (state,) = described["transaction_states"]
        return int(ended["error_code"]), started, str(state["transaction_state"])


@pytest.mark.parametrize("committed", [True, False], ids=["after-commit", "after-abort"])
def test_add_partitions_right_after_end_txn_waits_for_the_complete_record(
    bootstrap: str, committed: bool
) -> None:
    ended, started, state = asyncio.run(_pipelined(bootstrap, f"next-{committed}", committed,
                                                   offsets_next=False))
    assert ended == E.NONE
    assert _errors(started) == {1: E.NONE}
    assert state == "Ongoing"  # the next transaction, with the new partition


def test_add_offsets_right_after_end_txn_waits_for_the_complete_record(bootstrap: str) -> None:
    ended, started, state = asyncio.run(_pipelined(bootstrap, "next-offsets", True,
                                                   offsets_next=True))
    assert ended == E.NONE
    assert started["error_code"] == E.NONE
    assert state == "Ongoing"
