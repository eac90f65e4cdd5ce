"""Fault test (issue 14, scenario d): divergent logs after two crashes, resolved by leader
epochs (KIP-101/279), on three `logbus server start` processes, rf=3,
min.insync.replicas=2.

The leader A takes records the followers never see (they are paused, A acknowledges with
acks=1) and is killed (crash 1). B becomes leader and takes acks=all writes at the same
offsets; then B is killed too (crash 2), and C leads on. A and B come back: A's tail
was written in an epoch whose end, by the leader's OffsetForLeaderEpoch, lies below it, so
A truncates at that divergence point (not merely to its high watermark) and copies the
leader's records. The checker: no acks=all record lost, the acks=1 records that only A had
are gone (allowed: acks=1), and every replica ends with the same batches (offsets, epochs,
CRCs).
"""

from __future__ import annotations

from pathlib import Path

import cluster_processes
import pytest
from checker import History, Outcome, replica_batches
from cluster_processes import ProcessCluster
from fault_checks import produce_one, read_and_check, wait_identical_logs, wait_isr
from load import ProducerLoad

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "diverge"


def new_leader(cluster: ProcessCluster, old: int) -> int:
    """The partition's leader once it is neither `old` nor none."""

    def moved() -> tuple[int] | None:
        leader = cluster.leader_of(TOPIC, 0)
        return (leader,) if leader not in (-1, old) else None  # a tuple: broker 0 is falsy

    return cluster.wait_for(moved, 60, f"a leader other than {old}")[0]


@pytest.mark.timeout(300)
def test_divergent_tail_truncated_at_the_epoch_boundary_after_two_crashes(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path, min_insync_replicas="2") as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        history = History()
        load_config = {"acks": "all", "enable_idempotence": True}
        with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
            load.wait_acknowledged(100)
        a = cluster.leader_of(TOPIC, 0)
        b, c = sorted({0, 1, 2} - {a})
        wait_identical_logs(cluster, TOPIC, 0)
        start_epoch = cluster.partition_state(TOPIC, 0)["leader_epoch"]
        end_before = replica_batches(cluster.data_dir(a), TOPIC, 0)[-1].last_offset + 1

        # A alone takes a tail (acks=1) the paused followers never fetch; the pause is far
        # shorter than replica.lag.time.max.ms (30 s), so the ISR keeps all three
        cluster.pause(b)
        cluster.pause(c)
        tail = [history.send("only-a", TOPIC, partition=0, durable=False) for _ in range(5)]
        for send in tail:
            produce_one(cluster.bootstrap_of(a), TOPIC, send, acks=1)
            assert send.outcome is Outcome.OK, send
        assert [s.offset for s in tail] == list(range(end_before, end_before + 5))
        cluster.kill(a)  # crash 1
        cluster.resume(b)
        cluster.resume(c)

        # B (or C) leads in a new epoch and takes acks=all writes over A's tail offsets
        first = new_leader(cluster, a)
        second = b if first == c else c
        with ProducerLoad(cluster.bootstrap, history, TOPIC, **load_config) as load:
            load.wait_acknowledged(history.count(Outcome.OK) + 100)
            cluster.kill(first)  # crash 2: the ISR is {first, second}; second leads on
            assert new_leader(cluster, first) == second
            cluster.start_broker(a)
            cluster.start_broker(first)
            wait_isr(cluster, TOPIC, 1)
            load.wait_acknowledged(history.count(Outcome.OK) + 100)
        assert not load.errors, load.errors
        assert cluster.partition_state(TOPIC, 0)["leader_epoch"] >= start_epoch + 2

        result = read_and_check(cluster, history, TOPIC, 1)
        assert result.ok, str(result)
        # a fetch response already on its way to a follower when it was paused may have
        # carried A's first tail record(s): those survive; the rest were A's alone
        lost = [lost.send for lost in result.lost_allowed]
        kept = len(tail) - len(lost)
        assert lost and lost == tail[kept:], (kept, lost)
        divergence = end_before + kept
        batches = wait_identical_logs(cluster, TOPIC, 0)
        # A kept everything below the divergence point and nothing of its own tail: the
        # batches from there on are the new leaders', of later epochs
        after = [x for x in batches if x.last_offset >= divergence]
        assert after and after[0].base_offset == divergence
        assert all(x.epoch > start_epoch for x in after)
