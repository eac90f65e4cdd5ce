"""Transactions under faults on a real 3-broker cluster (real ZooKeeper; `__transaction_state`,
`__consumer_offsets` and the topics replicated three ways, min.insync.replicas=2), with
confluent-kafka's consume-transform-produce loop and a plain transactional producer, each
held in the middle of a transaction (records written, offsets sent) when the fault hits:

- kill -9 of the transaction coordinator of both transactional ids: the new coordinator
  loads the open transactions and the same producers commit them;
- kill -9 of a partition leader that coordinates nothing: the transactions open on its
  partitions commit on the new leaders.

Afterwards the transactional checker compares the history with what fresh read_committed
and read_uncommitted consumers read (and the group's committed offsets), and the ISR
members' logs with each other (batches, epochs, CRCs; markers included)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from fault_checks import wait_isr
from txn_checker import TxnHistory, check_transactions
from txn_failover import TXN_CLUSTER_SETTINGS, txn_coordinator
from txn_loads import (
    ConsumeTransformProduce,
    TransactionalProducer,
    group_offsets,
    kcat_read_committed,
    produce_input,
    read_topic,
)

from logbus.coordinator.transaction.state_topic import TRANSACTION_STATE_TOPIC, txn_partition_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

SETTINGS = TXN_CLUSTER_SETTINGS
GROUP = "ctp-group"
OUT_PARTITIONS = 3


def start_loads(
    cluster: ProcessCluster, history: TxnHistory, inputs: int = 3000
) -> tuple[ConsumeTransformProduce, TransactionalProducer]:
    cluster.create_topic("in", partitions=2, replication_factor=3)
    cluster.create_topic("out", partitions=OUT_PARTITIONS, replication_factor=3)
    cluster.create_topic("plain", partitions=2, replication_factor=3)
    produce_input(cluster.bootstrap, "in", 2, inputs)  # batches of 20: inputs / 20 commits
    ctp = ConsumeTransformProduce(
        cluster.bootstrap, history, "in", "out", "ctp", GROUP,
        source_partitions=2, sink_partitions=OUT_PARTITIONS,
    )  # fmt: skip
    plain = TransactionalProducer(cluster.bootstrap, history, "plain", "plain", partitions=2)
    return ctp, plain


def coordinators(cluster: ProcessCluster) -> set[int]:
    """The brokers coordinating the two transactional ids and the group."""
    return {
        txn_coordinator(cluster, "ctp"),
        txn_coordinator(cluster, "plain"),
        cluster.leader_of("__consumer_offsets", txn_partition_for(GROUP, 3)),
    }


def check_everything(cluster: ProcessCluster, history: TxnHistory) -> None:
    for topic, partitions in (("out", OUT_PARTITIONS), ("plain", 2)):
        wait_isr(cluster, topic, partitions)
    bootstrap = cluster.bootstrap
    committed = read_topic(bootstrap, "out", OUT_PARTITIONS, "read_committed")
    uncommitted = read_topic(bootstrap, "out", OUT_PARTITIONS, "read_uncommitted") + read_topic(
        bootstrap, "plain", 2, "read_uncommitted"
    )
    # the control: read_uncommitted taken for read_committed shows the aborted records
    assert check_transactions(history, uncommitted).aborted_reads
    result = check_transactions(
        history,
        committed + read_topic(bootstrap, "plain", 2, "read_committed"),
        uncommitted=uncommitted,
        group_offsets=group_offsets(bootstrap, GROUP, "in", 2),
        replica_logs={
            **cluster.replica_logs("out", range(OUT_PARTITIONS)),
            **cluster.replica_logs("plain", range(2)),
        },
    )
    print(result)
    assert result.ok, result
    assert result.committed >= 10 and result.aborted >= 2, result
    assert sorted(kcat_read_committed(bootstrap, "out", OUT_PARTITIONS)) == sorted(committed)


def fault_mid_transaction(
    zk_connect: str, tmp_path: Path, fault: Callable[[ProcessCluster], int]
) -> None:
    """Both loads commit, then hold a transaction open; `fault` kills a broker and waits
    until the cluster has moved on (it returns the broker); the loads go on and commit,
    the broker comes back, and everything is checked."""
    history = TxnHistory()
    with ProcessCluster(zk_connect, 3, tmp_path, **SETTINGS) as cluster:
        ctp, plain = start_loads(cluster, history)
        with ctp, plain:
            ctp.wait_committed(4)
            plain.wait_committed(4)
            ctp.hold()
            plain.hold()
            victim = fault(cluster)
            ctp.release()
            plain.release()
            ctp.wait_committed(ctp.committed() + 4)
            plain.wait_committed(plain.committed() + 4)
            cluster.start_broker(victim)
        check_everything(cluster, history)


@pytest.mark.timeout(300)
def test_transaction_coordinator_killed_mid_transaction(zk_connect: str, tmp_path: Path) -> None:
    def kill_the_coordinator(cluster: ProcessCluster) -> int:
        victim = txn_coordinator(cluster, "ctp")
        cluster.kill(victim)
        for txn_id in ("ctp", "plain"):
            cluster.wait_for(
                lambda t=txn_id: txn_coordinator(cluster, t) not in (-1, victim),
                90,
                f"a live coordinator for {txn_id}",
            )
        return victim

    fault_mid_transaction(zk_connect, tmp_path, kill_the_coordinator)


@pytest.mark.timeout(300)
def test_partition_leader_killed_mid_transaction(zk_connect: str, tmp_path: Path) -> None:
    def kill_a_leader(cluster: ProcessCluster) -> int:
        leaders = {cluster.leader_of("out", p) for p in range(OUT_PARTITIONS)}
        spare = sorted(leaders - coordinators(cluster))
        victim = spare[0] if spare else cluster.leader_of("out", 0)
        led = [p for p in range(OUT_PARTITIONS) if cluster.leader_of("out", p) == victim]
        cluster.kill(victim)
        cluster.wait_for(
            lambda: all(cluster.leader_of("out", p) not in (-1, victim) for p in led),
            90,
            "new leaders for the dead broker's partitions",
        )
        return victim

    fault_mid_transaction(zk_connect, tmp_path, kill_a_leader)


@pytest.mark.timeout(300)
def test_coordinator_killed_at_an_unchosen_moment(zk_connect: str, tmp_path: Path) -> None:
    """No hold point: the coordinator of two plain transactional producers dies wherever
    they are (producing, adding partitions, committing); a commit in flight may end
    unknown, which the checker accepts only whole or not at all."""
    history = TxnHistory()
    with ProcessCluster(zk_connect, 3, tmp_path, **SETTINGS) as cluster:
        cluster.create_topic("plain", partitions=2, replication_factor=3)
        loads = [
            TransactionalProducer(cluster.bootstrap, history, "plain", name, partitions=2)
            for name in ("plain", "other")
        ]
        with loads[0], loads[1]:
            for load in loads:
                load.wait_committed(20)
            victim = txn_coordinator(cluster, "plain")
            cluster.kill(victim)
            cluster.wait_for(
                lambda: txn_coordinator(cluster, "plain") not in (-1, victim),
                90,
                "a new coordinator",
            )
            for load in loads:
                load.wait_committed(load.committed() + 20)
            cluster.start_broker(victim)
        wait_isr(cluster, "plain", 2)
        bootstrap = cluster.bootstrap
        result = check_transactions(
            history,
            read_topic(bootstrap, "plain", 2, "read_committed"),
            uncommitted=read_topic(bootstrap, "plain", 2, "read_uncommitted"),
            replica_logs=cluster.replica_logs("plain", range(2)),
        )
        print(result)
        assert result.ok, result


@pytest.mark.soak
@pytest.mark.timeout(900)
def test_soak_coordinators_and_leaders_killed_again_and_again(
    zk_connect: str, tmp_path: Path
) -> None:
    """Ten rounds, each killing a random broker (a transaction coordinator, a group
    coordinator, a partition leader, often several at once) while both loads hold a
    transaction open, then bringing it back."""
    history = TxnHistory()
    rng = random.Random(15)
    with ProcessCluster(zk_connect, 3, tmp_path, **SETTINGS) as cluster:
        ctp, plain = start_loads(cluster, history, inputs=20_000)
        with ctp, plain:
            for _ in range(10):
                ctp.wait_committed(ctp.committed() + 3)
                plain.wait_committed(plain.committed() + 3)
                ctp.hold()
                plain.hold()
                victim = rng.choice(sorted(cluster.live_ids()))
                cluster.kill(victim)
                cluster.wait_for(
                    lambda v=victim: all(
                        cluster.leader_of(topic, p) not in (-1, v)
                        for topic, n in (("out", 3), ("plain", 2), (TRANSACTION_STATE_TOPIC, 3))
                        for p in range(n)
                    ),
                    90,
                    "new leaders everywhere",
                )
                ctp.release()
                plain.release()
                ctp.wait_committed(ctp.committed() + 2)
                cluster.start_broker(victim)
                for topic, n in (("out", 3), ("plain", 2)):
                    wait_isr(cluster, topic, n)
        check_everything(cluster, history)
