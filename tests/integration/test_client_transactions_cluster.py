"""The logbus transactional producer against three brokers replicating in this process:
the coordinator on one broker, partitions led by the others, and the coordinator moving
to another broker between transactions (the producer finds it again)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from replication_cluster import InProcessCluster
from txn_reads import confluent_values, logbus_values

import logbus
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC

TIMEOUT = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path, transaction_state_log_num_partitions="1")
    running.start()
    try:
        yield running
    finally:
        running.close()


def test_transactions_across_brokers_and_a_moved_coordinator(cluster: InProcessCluster) -> None:
    cluster.create_topic(TRANSACTION_STATE_TOPIC, {0: [0, 1, 2]}, {"cleanup.policy": "compact"})
    cluster.create_topic("work", {0: [1, 0], 1: [2, 1], 2: [0, 2]})
    bootstrap = cluster.bootstrap
    with logbus.Producer({"bootstrap.servers": bootstrap, "transactional.id": "x-broker"}) as p:
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        for i in range(3):
            p.send("work", f"c1-{i}".encode(), partition=i)
        p.commit_transaction(TIMEOUT)
        p.begin_transaction()
        for i in range(3):
            p.send("work", f"a-{i}".encode(), partition=i)
        p.flush()
        p.abort_transaction(TIMEOUT)
        # The coordinator moves from broker 0 to broker 1: NOT_COORDINATOR, found again.
        cluster.elect(TRANSACTION_STATE_TOPIC, 0, leader=1, isr=(1, 0, 2))
        p.begin_transaction()
        for i in range(3):
            p.send("work", f"c2-{i}".encode(), partition=i)
        p.commit_transaction(TIMEOUT)
    with logbus.Admin({"bootstrap.servers": bootstrap}) as admin:
        described = admin.describe_transactions(["x-broker"])["x-broker"]
    assert described.coordinator_id == 1
    assert described.state in ("PrepareCommit", "CompleteCommit")
    committed = sorted(f"c{t}-{i}".encode() for t in (1, 2) for i in range(3))
    assert confluent_values(bootstrap, "work", 3) == committed
    assert logbus_values(bootstrap, "work", "read_committed", 3) == committed
