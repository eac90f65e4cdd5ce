"""The logbus transactional producer in a real 3-broker cluster (`logbus server start`
processes on a real ZooKeeper) whose transaction coordinator is killed with kill -9 in
the middle of a transaction: the producer finds the new coordinator (NOT_COORDINATOR, a
broken connection, COORDINATOR_LOAD_IN_PROGRESS while it loads) and commits; a
read_committed consumer sees every committed record once and no aborted one."""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from test_transactions_failover import read_committed

import logbus
from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TXN = "logbus-ha-producer"
TOPIC = "ha-out"
PARTITIONS = 3


@pytest.mark.timeout(300)
def test_logbus_producer_commits_after_its_coordinator_is_killed(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        min_insync_replicas="2",
        transaction_state_log_num_partitions="3",
        transaction_state_log_replication_factor="3",
        transaction_state_log_min_isr="2",
        offsets_topic_num_partitions="3",
        group_initial_rebalance_delay_ms="0",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        with logbus.Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": TXN,
                "transaction.timeout.ms": 120_000,
            }
        ) as producer:
            producer.init_transactions(60)
            producer.begin_transaction()
            for i in range(30):
                producer.send(TOPIC, b"a%d" % i, partition=i % PARTITIONS)
            producer.commit_transaction(60)
            producer.begin_transaction()
            for i in range(30):
                producer.send(TOPIC, b"x%d" % i, partition=i % PARTITIONS)
            producer.abort_transaction(60)
            coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition_for(TXN, 3))
            assert coordinator >= 0
            producer.begin_transaction()
            for i in range(30):
                producer.send(TOPIC, b"b%d" % i, partition=i % PARTITIONS)
            producer.flush(60)
            cluster.kill(coordinator)
            cluster.wait_for(
                lambda: (
                    cluster.leader_of(TRANSACTION_STATE_TOPIC, txn_partition_for(TXN, 3))
                    not in (-1, coordinator)
                ),
                90,
                "a new transaction coordinator",
            )
            producer.commit_transaction(120)
            producer.begin_transaction()
            producer.send(TOPIC, b"c0", partition=0)
            producer.commit_transaction(60)
        got = read_committed(cluster.bootstrap, 61)
        expected = {b"a%d" % i for i in range(30)} | {b"b%d" % i for i in range(30)} | {b"c0"}
        assert len(got) == len(set(got)), "a duplicate"
        assert set(got) == expected
