"""The next transaction's AddPartitionsToTxn while the previous transaction's markers
cannot be written yet, on three real brokers in this process: the request is held until
the markers and the Complete record are written (then answered NONE), or, if they are
not, answered CONCURRENT_TRANSACTIONS after the coordinator's wait
(`COMPLETION_WAIT_S`), as Kafka answers it at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_cluster import InProcessCluster

from logbus.client.connection import Connection
from logbus.coordinator.transaction.coordinator import COMPLETION_WAIT_S
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC
from logbus.protocol import ApiKey, ErrorCode

E = ErrorCode
TXN = "held"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path, transaction_state_log_num_partitions="1")
    running.start()
    try:
        yield running
    finally:
        running.close()


def _request(cluster: InProcessCluster, conn: Connection, key: ApiKey, version: int,
             body: dict[str, Any]) -> dict[str, Any]:
    return cluster.run(conn.request(key, body, version))


def _state(cluster: InProcessCluster, conn: Connection) -> str:
    response = _request(cluster, conn, ApiKey.DESCRIBE_TRANSACTIONS, 0,
                        {"transactional_ids": [TXN]})
    return str(response["transaction_states"][0]["transaction_state"])


def _add_errors(response: dict[str, Any]) -> list[int]:
    return [p["partition_error_code"]
            for t in response["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]]


def _stuck_commit(cluster: InProcessCluster) -> tuple[Connection, dict[str, Any]]:
    """A transaction on work-0 (led by broker 1) and work-1, whose leadership moves to
    broker 1 without broker 1 hearing of it: EndTxn(commit) answers, the work-1 marker
    cannot be written, the transaction stays in PrepareCommit. Returns the coordinator's
    connection and the next transaction's AddPartitionsToTxn body."""
    cluster.create_topic(TRANSACTION_STATE_TOPIC, {0: [0, 1, 2]}, {"cleanup.policy": "compact"})
    cluster.create_topic("work", {0: [1, 0], 1: [2, 1]})
    coordinator = cluster.connect(0)
    deadline = time.monotonic() + 30
    while True:
        init = _request(cluster, coordinator, ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": TXN, "transaction_timeout_ms": 60_000,
            "producer_id": -1, "producer_epoch": -1})
        if init["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert init["error_code"] == E.NONE
    ids = {"producer_id": init["producer_id"], "producer_epoch": init["producer_epoch"]}

    def add(partitions: list[int]) -> dict[str, Any]:
        return {"v3_and_below_transactional_id": TXN,
                "v3_and_below_producer_id": ids["producer_id"],
                "v3_and_below_producer_epoch": ids["producer_epoch"],
                "v3_and_below_topics": [{"name": "work", "partitions": partitions}]}

    added = _request(cluster, coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add([0, 1]))
    assert _add_errors(added) == [E.NONE, E.NONE]
    cluster.elect("work", 1, leader=1, isr=(1,), tell={0})
    ended = _request(cluster, coordinator, ApiKey.END_TXN, 3,
                     {"transactional_id": TXN, **ids, "committed": True})
    assert ended["error_code"] == E.NONE
    assert _state(cluster, coordinator) == "PrepareCommit"
    return coordinator, add([0])


def test_held_until_the_markers_are_written(cluster: InProcessCluster) -> None:
    coordinator, next_add = _stuck_commit(cluster)

    async def add_then_unblock() -> dict[str, Any]:
        pending = asyncio.ensure_future(
            coordinator.request(ApiKey.ADD_PARTITIONS_TO_TXN, next_add, 3))
        await asyncio.sleep(0.05)
        # broker 1 learns it leads work-1: the coordinator's retried marker is written,
        # then CompleteCommit, and the held request is handled
        cluster.link(1).apply_leader_and_isr(cluster.controller.topics["work"], [1])
        return await pending

    answer = cluster.run(add_then_unblock())
    assert _add_errors(answer) == [E.NONE]  # Kafka: CONCURRENT_TRANSACTIONS, then a retry
    assert _state(cluster, coordinator) == "Ongoing"  # the next transaction


def test_answered_concurrent_transactions_when_the_markers_stay_unwritten(
    cluster: InProcessCluster,
) -> None:
    coordinator, next_add = _stuck_commit(cluster)
    started = time.monotonic()
    answer = _request(cluster, coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, next_add)
    assert _add_errors(answer) == [E.CONCURRENT_TRANSACTIONS]
    assert time.monotonic() - started >= COMPLETION_WAIT_S * 0.9  # it was held, then let go
    assert _state(cluster, coordinator) == "PrepareCommit"
