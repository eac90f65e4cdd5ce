"""Fault tests (issue 14, scenarios a and b) on three `logbus server start` processes,
rf=3, min.insync.replicas=2, with the Jepsen-style checker:

(a) a follower paused with SIGSTOP: the high watermark holds while it is in the ISR, the
    leader takes it out after replica.lag.time.max.ms, acks=all resumes; after SIGCONT it
    catches up and rejoins the ISR, and every replica's log is identical.
(b) both followers dead: acks=all is refused with NOT_ENOUGH_REPLICAS (nothing appended),
    acks=1 is accepted; the followers come back and copy what acks=1 wrote.
"""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from checker import History, Outcome
from cluster_processes import ProcessCluster
from fault_checks import produce_one, read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "followers"
LAG_MS = "6000"  # replica.lag.time.max.ms: a paused follower leaves the ISR this soon


def pause_followers(zk_connect: str, tmp_path: Path, rounds: int) -> None:
    """`rounds` times (alternating followers): pause a follower under an acks=all load,
    check the high watermark holds and the ISR shrinks, acks=all resumes, resume it and
    wait for the whole ISR. Then the checker and identical logs."""
    with ProcessCluster(
        zk_connect, 3, tmp_path, min_insync_replicas="2", replica_lag_time_max_ms=LAG_MS
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        leader = cluster.leader_of(TOPIC, 0)
        followers = sorted({0, 1, 2} - {leader})
        history = History()
        with ProducerLoad(
            cluster.bootstrap, history, TOPIC, acks="all", enable_idempotence=True
        ) as load:
            load.wait_acknowledged(100)
            for round_number in range(rounds):
                pause_one(cluster, load, history, leader, followers[round_number % 2])
        assert not load.errors, load.errors
        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)
        wait_identical_logs(cluster, TOPIC, 0)
        assert cluster.leader_of(TOPIC, 0) == leader


def pause_one(
    cluster: ProcessCluster, load: ProducerLoad, history: History, leader: int, paused: int
) -> None:
    cluster.pause(paused)
    # written by the leader alone (acks=1) after the pause: the paused follower cannot
    # have it, so while it is in the ISR the high watermark stays below it
    probe = history.send("probe", TOPIC, partition=0)
    produce_one(cluster.bootstrap_of(leader), TOPIC, probe, acks=1)
    assert probe.outcome is Outcome.OK, probe
    assert probe.offset is not None
    high_watermark = cluster.high_watermark(TOPIC, 0)
    state = cluster.partition_state(TOPIC, 0)  # read after: the ISR was this or larger
    assert paused in state["isr"], "the follower left the ISR too soon to observe"
    assert high_watermark <= probe.offset

    # the leader takes it out of the ISR; acks=all then completes with two replicas
    def without_paused() -> list[int] | None:
        isr: list[int] = cluster.partition_state(TOPIC, 0)["isr"]
        return isr if paused not in isr else None

    shrunk = cluster.wait_for(without_paused, 60, "the paused follower to leave the ISR")
    assert sorted(shrunk) == sorted({0, 1, 2} - {paused})
    assert cluster.leader_of(TOPIC, 0) == leader
    load.wait_acknowledged(load.acknowledged() + 100)
    assert cluster.high_watermark(TOPIC, 0) > probe.offset
    cluster.resume(paused)
    wait_isr(cluster, TOPIC, 1)
    load.wait_acknowledged(load.acknowledged() + 100)


@pytest.mark.timeout(300)
def test_paused_follower_holds_the_high_watermark_then_leaves_and_rejoins_the_isr(
    zk_connect: str, tmp_path: Path
) -> None:
    pause_followers(zk_connect, tmp_path, rounds=1)


@pytest.mark.soak
@pytest.mark.timeout(1200)
def test_followers_paused_and_resumed_ten_times(zk_connect: str, tmp_path: Path) -> None:
    pause_followers(zk_connect, tmp_path, rounds=10)


@pytest.mark.timeout(300)
def test_both_followers_dead_refuses_acks_all_and_takes_acks_1(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        leader = cluster.leader_of(TOPIC, 0)
        followers = sorted({0, 1, 2} - {leader})
        history = History()
        with ProducerLoad(
            cluster.bootstrap, history, TOPIC, acks="all", enable_idempotence=True
        ) as load:
            load.wait_acknowledged(100)
        for follower in followers:
            cluster.kill(follower)
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["isr"] == [leader],
            60,
            "the ISR to shrink to the leader",
        )
        refused = [history.send("all", TOPIC, partition=0) for _ in range(3)]
        for send in refused:
            produce_one(cluster.bootstrap, TOPIC, send, acks="all")
            assert send.outcome is Outcome.FAILED, send
            assert "NOT_ENOUGH_REPLICAS" in str(send.error), send
            assert "AFTER_APPEND" not in str(send.error), send
        accepted = [history.send("one", TOPIC, partition=0) for _ in range(3)]
        for send in accepted:
            produce_one(cluster.bootstrap, TOPIC, send, acks=1)
            assert send.outcome is Outcome.OK, send
        # the followers return, catch up and rejoin; acks=all works again
        for follower in followers:
            cluster.start_broker(follower)
        wait_isr(cluster, TOPIC, 1)
        again = history.send("all", TOPIC, partition=0)
        produce_one(cluster.bootstrap, TOPIC, again, acks="all")
        assert again.outcome is Outcome.OK, again
        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)  # the refused sends were never read: nothing appended
        assert result.failed == 3 and result.unknown == 0
        wait_identical_logs(cluster, TOPIC, 0)
