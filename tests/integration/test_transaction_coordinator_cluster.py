"""The transaction coordinator with three real brokers replicating in this process: the
markers go over the wire to leaders on other brokers, and when the coordinator's
`__transaction_state` partition moves, the new leader loads the state and completes a
commit its predecessor could not finish (markers sent again with its coordinator epoch)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_cluster import InProcessCluster

from logbus.client.connection import Connection
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.batch import split_batches
from logbus.records.control import parse_transaction_marker
from logbus.records.reader import iter_record_set

E = ErrorCode
TXN = "moved"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path, transaction_state_log_num_partitions="1")
    running.start()
    try:
        yield running
    finally:
        running.close()


def request(
    cluster: InProcessCluster, conn: Connection, key: ApiKey, version: int, body: dict[str, Any]
) -> dict[str, Any]:
    return cluster.run(conn.request(key, body, version))


def describe(cluster: InProcessCluster, conn: Connection) -> dict[str, Any]:
    response = request(cluster, conn, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]})
    return response["transaction_states"][0]  # type: ignore[no-any-return]


def wait_state(cluster: InProcessCluster, conn: Connection, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (found := describe(cluster, conn))["transaction_state"] != state:
        assert time.monotonic() < deadline, f"still {found}"
        time.sleep(0.05)
    return found


def markers(cluster: InProcessCluster, broker_id: int, partition: int) -> list[tuple[bool, int]]:
    """(committed, coordinator epoch) of each transaction marker in the partition."""
    out = []
    data = cluster.log_bytes(broker_id, "work", partition)
    if not split_batches(data):
        return out
    for header, batch_records in iter_record_set(data):
        if header.is_control:
            for record in batch_records:
                key, marker = parse_transaction_marker(record)
                out.append((key.is_commit, marker.coordinator_epoch))
    return out


def test_markers_cross_brokers_and_a_new_coordinator_finishes_the_commit(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic(TRANSACTION_STATE_TOPIC, {0: [0, 1, 2]}, {"cleanup.policy": "compact"})
    cluster.create_topic("work", {0: [1, 0], 1: [2, 1]})
    coordinator = cluster.connect(0)
    deadline = time.monotonic() + 30
    while True:
        init = request(
            cluster,
            coordinator,
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": TXN,
                "transaction_timeout_ms": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        if init["error_code"] != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert init["error_code"] == E.NONE
    ids = {"producer_id": init["producer_id"], "producer_epoch": init["producer_epoch"]}
    add = {
        "v3_and_below_transactional_id": TXN,
        "v3_and_below_producer_id": ids["producer_id"],
        "v3_and_below_producer_epoch": ids["producer_epoch"],
        "v3_and_below_topics": [{"name": "work", "partitions": [0, 1]}],
    }
    end = {"transactional_id": TXN, **ids, "committed": True}
    # a first transaction: markers to brokers 1 and 2 over the wire
    assert request(cluster, coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)[
        "results_by_topic_v3_and_below"
    ][0]["results_by_partition"] == [
        {"partition_index": 0, "partition_error_code": 0},
        {"partition_index": 1, "partition_error_code": 0},
    ]
    assert request(cluster, coordinator, ApiKey.END_TXN, 3, end)["error_code"] == E.NONE
    wait_state(cluster, coordinator, "CompleteCommit")
    epoch0 = cluster.state(TRANSACTION_STATE_TOPIC, 0).leader_epoch
    assert markers(cluster, 1, 0) == [(True, epoch0)]
    assert markers(cluster, 2, 1) == [(True, epoch0)]
    # work-1 moves to broker 1, but broker 1 has not heard yet: its marker cannot be
    # written and the second commit stays in PrepareCommit
    cluster.elect("work", 1, leader=1, isr=(1,), tell={0})
    request(cluster, coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert request(cluster, coordinator, ApiKey.END_TXN, 3, end)["error_code"] == E.NONE
    cluster.wait_for(lambda: len(markers_now(cluster, 1, 0)) == 2, "the work-0 marker")
    assert describe(cluster, coordinator)["transaction_state"] == "PrepareCommit"
    # the coordinator moves to broker 1: broker 0 stops answering, broker 1 loads the
    # PrepareCommit and sends the markers again with its epoch
    cluster.elect(TRANSACTION_STATE_TOPIC, 0, leader=1, isr=(1, 0, 2))
    epoch1 = cluster.state(TRANSACTION_STATE_TOPIC, 0).leader_epoch
    assert describe(cluster, coordinator)["error_code"] == E.NOT_COORDINATOR
    successor = cluster.connect(1)
    cluster.tell(1, "work", 1)  # broker 1 leads work-1 now
    found = wait_state(cluster, successor, "CompleteCommit")
    assert (found["producer_id"], found["producer_epoch"]) == (
        ids["producer_id"],
        ids["producer_epoch"],
    )
    assert markers(cluster, 1, 1)[-1] == (True, epoch1)
    assert markers(cluster, 1, 0)[-1] == (True, epoch1)  # sent again: harmless
    # the new coordinator serves the producer on
    bumped = request(
        cluster,
        successor,
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": TXN, "transaction_timeout_ms": 60_000, **ids},
    )
    assert (bumped["error_code"], bumped["producer_epoch"]) == (E.NONE, ids["producer_epoch"] + 1)


def markers_now(cluster: InProcessCluster, broker_id: int, partition: int) -> list[Any]:
    """`markers` for `wait_for` conditions, which run on the loop: read without it."""
    part = cluster.brokers[broker_id].replica_manager
    assert part is not None
    log = part.partition("work", partition)
    assert log is not None
    count = []
    offset = log.log.log_start_offset
    while offset < log.log.log_end_offset:
        info = log.log.read(offset, 1 << 20, min_one_message=True)
        if info.records is None:
            break
        data = info.records.read()
        for header, _records in iter_record_set(data):
            if header.is_control:
                count.append(header.base_offset)
            offset = header.last_offset + 1
    return count
