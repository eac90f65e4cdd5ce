"""Fault tests (issue 24): network partitions made by proxies that drop bytes and leave
connections open (`network_faults.py`), under a confluent-kafka idempotent acks=all load
on rf=3, min.insync.replicas=2, zookeeper.session.timeout.ms=4000.

- The leader cut off from ZooKeeper and from its followers, its clients still reaching
  it: it steps aside (its Metadata names another leader, produce gets NOT_LEADER_OR_FOLLOWER),
  so the producer finds the new leader and is acknowledged again while the partition
  lasts, far inside its own message.timeout.ms; healed, the old leader follows.
- A follower cut off: the ISR shrinks, acknowledgements go on, it catches up once healed.
- ZooKeeper out of reach of every broker: nobody can be elected, and the leaders, whose
  followers still fetch, go on acknowledging acks=all writes.
- ZooKeeper out of reach of every broker and the followers stopped: an acks=all write
  waiting on them is answered with a retriable error, not held to its timeout.

Each ends with the checker over everything a fresh consumer reads and identical logs on
the replicas.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from checker import History, Outcome
from cluster_processes import ProcessCluster
from fault_checks import produce_one, read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad
from network_faults import NetworkFaults

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "isolated"
STEP = 200  # acknowledged sends between steps
SESSION_TIMEOUT_MS = 4000
# The producer's own timeout is long, so that only the broker's answers can move it to
# the new leader while the partition lasts (with an isolated leader that holds its
# requests, it would wait for this timeout).
CONFLUENT_LOAD: dict[str, Any] = {
    "client": "confluent",
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 180_000,
    "log_level": 0,
}
# Acknowledgements must resume within this while the partition lasts: a third of the
# producer's timeout, so a producer that waited for its timeout fails the test.
RESUME_WITHIN_S = 60


@contextmanager
def partitioned_cluster(
    zk_connect: str, zookeeper: Any, tmp_path: Path, **overrides: str
) -> Iterator[tuple[ProcessCluster, NetworkFaults]]:
    cluster = ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        start=False,
        min_insync_replicas="2",
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS),
        **overrides,
    )
    with NetworkFaults(cluster, zookeeper.connect) as faults, cluster:
        cluster.start()
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        yield cluster, faults


def check_everything(cluster: ProcessCluster, history: History, load: ProducerLoad) -> None:
    assert not load.errors, load.errors
    result = read_and_check(cluster, history, TOPIC, 1)
    assert result.ok, str(result)
    assert result.acknowledged >= 3 * STEP
    wait_identical_logs(cluster, TOPIC, 0)


@pytest.mark.timeout(300)
def test_an_isolated_leader_steps_aside_and_the_producer_moves_on(
    zk_connect: str, cluster_zookeeper: Any, tmp_path: Path
) -> None:
    with partitioned_cluster(zk_connect, cluster_zookeeper, tmp_path) as (cluster, faults):
        history = History()
        with ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1, **CONFLUENT_LOAD) as load:
            load.wait_acknowledged(STEP)
            old = cluster.leader_of(TOPIC, 0)
            faults.isolate(old)
            # its Metadata no longer names itself (its clients look elsewhere)
            cluster.wait_for(
                lambda: cluster.leader_of(TOPIC, 0, via=old) != old, 60, "the leader to step aside"
            )
            # the controller elects another (as ZooKeeper has it)
            cluster.wait_for(
                lambda: cluster.partition_state(TOPIC, 0)["leader"] not in (-1, old),
                60,
                "a new leader",
            )
            new = cluster.partition_state(TOPIC, 0)["leader"]
            load.wait_acknowledged(load.acknowledged() + STEP, timeout=RESUME_WITHIN_S)
            assert cluster.leader_of(TOPIC, 0, via=old) != old, "isolated, it leads nothing"
            faults.heal()
            # it registers again, learns it follows `new`, and catches up
            wait_isr(cluster, TOPIC, 1)
            assert cluster.leader_of(TOPIC, 0) == new
            load.wait_acknowledged(load.acknowledged() + STEP)
        check_everything(cluster, history, load)
        assert "stepping aside as leader of isolated-0" in cluster.nodes[old].log_file.read_text()


@pytest.mark.timeout(300)
def test_an_isolated_follower_leaves_the_isr_and_catches_up(
    zk_connect: str, cluster_zookeeper: Any, tmp_path: Path
) -> None:
    with partitioned_cluster(
        zk_connect, cluster_zookeeper, tmp_path, replica_lag_time_max_ms="3000"
    ) as (cluster, faults):
        history = History()
        with ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1, **CONFLUENT_LOAD) as load:
            load.wait_acknowledged(STEP)
            leader = cluster.leader_of(TOPIC, 0)
            follower = next(b for b in cluster.live_ids() if b != leader)
            faults.isolate(follower)
            cluster.wait_for(
                lambda: follower not in cluster.partition_state(TOPIC, 0)["isr"],
                60,
                f"the ISR without broker {follower}",
            )
            load.wait_acknowledged(load.acknowledged() + STEP, timeout=RESUME_WITHIN_S)
            assert cluster.leader_of(TOPIC, 0) == leader
            faults.heal()
            wait_isr(cluster, TOPIC, 1)
            load.wait_acknowledged(load.acknowledged() + STEP)
        check_everything(cluster, history, load)


@pytest.mark.timeout(300)
def test_leaders_keep_acknowledging_with_zookeeper_out_of_reach_of_every_broker(
    zk_connect: str, cluster_zookeeper: Any, tmp_path: Path
) -> None:
    with partitioned_cluster(zk_connect, cluster_zookeeper, tmp_path) as (cluster, faults):
        history = History()
        with ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1, **CONFLUENT_LOAD) as load:
            load.wait_acknowledged(STEP)
            leader = cluster.leader_of(TOPIC, 0)
            faults.cut_zookeeper(*cluster.live_ids())
            # past the session timeout every broker has lost its session (ZooKeeper has
            # expired them all): nobody can be elected, the leader's ISR still fetches
            time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
            before = load.acknowledged()
            load.wait_acknowledged(before + STEP, timeout=RESUME_WITHIN_S)
            assert all(cluster.leader_of(TOPIC, 0, via=b) == leader for b in cluster.live_ids())
            faults.heal()
            wait_isr(cluster, TOPIC, 1)
            load.wait_acknowledged(load.acknowledged() + STEP)
        check_everything(cluster, history, load)
        log = cluster.nodes[leader].log_file.read_text()
        assert "stepping aside" not in log
        assert "metadata session lost" in log


@pytest.mark.timeout(300)
def test_an_acks_all_write_waiting_on_stopped_followers_is_answered_without_zookeeper(
    zk_connect: str, cluster_zookeeper: Any, tmp_path: Path
) -> None:
    with partitioned_cluster(
        zk_connect, cluster_zookeeper, tmp_path, replica_lag_time_max_ms="3000"
    ) as (cluster, faults):
        history = History()
        produce_one(cluster.bootstrap, TOPIC, history.send("w", TOPIC, b"k"), acks="all")
        leader = cluster.leader_of(TOPIC, 0)
        followers = [b for b in cluster.live_ids() if b != leader]
        faults.cut_zookeeper(*cluster.nodes)
        for follower in followers:
            cluster.pause(follower)
        # the ISR shrink cannot be written: the write is answered (the shrink proposed:
        # NOT_ENOUGH_REPLICAS_AFTER_APPEND; or the leader stepped aside) well before the
        # request's timeout, which would answer REQUEST_TIMED_OUT
        waiting = history.send("w", TOPIC, b"k")
        produce_one(
            cluster.bootstrap_of(leader), TOPIC, waiting, acks="all", request_timeout_ms=60_000
        )
        assert waiting.outcome is not Outcome.OK
        assert waiting.error is not None
        assert any(
            code in waiting.error for code in ("NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER")
        ), waiting.error
        for follower in followers:
            cluster.resume(follower)
        faults.heal()
        wait_isr(cluster, TOPIC, 1)
        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)
