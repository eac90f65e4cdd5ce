"""Preferred leaders: after a broker's restart its partitions are led by others; the
controller's auto rebalance (every `leader.imbalance.check.interval.seconds`) moves them
back, and without it `logbus leader-election` and confluent-kafka's `elect_leaders`
(ElectLeaders) do, with Kafka's per-partition results."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import cluster_processes
from cluster_processes import ProcessCluster
from confluent_kafka import ElectionType as ConfluentElection
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from fault_checks import wait_isr

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "preferred"
PARTITIONS = 6
CLI = [sys.executable, "-m", "logbus.cli.main", "leader-election"]


def preferred(cluster: ProcessCluster) -> dict[int, int]:
    """Each partition's preferred replica (first assigned)."""
    info = cluster.metadata(TOPIC)
    return {p: info.partitions[p].replicas[0] for p in range(PARTITIONS)}


def not_preferred(cluster: ProcessCluster) -> list[int]:
    first = preferred(cluster)
    return [p for p in range(PARTITIONS) if cluster.partition_state(TOPIC, p)["leader"] != first[p]]


def restart_a_leader(cluster: ProcessCluster) -> tuple[int, list[int]]:
    """Restart (SIGTERM) a broker that leads partitions; once it is back in every ISR,
    the partitions it prefers are led by others. Returns it and those partitions."""
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    wait_isr(cluster, TOPIC, PARTITIONS)
    assert not_preferred(cluster) == []
    victim = cluster.partition_state(TOPIC, 0)["leader"]
    moved = [p for p, b in preferred(cluster).items() if b == victim]
    assert cluster.terminate(victim) == 0
    cluster.start_broker(victim)
    wait_isr(cluster, TOPIC, PARTITIONS)
    return victim, moved


def leader_election(cluster: ProcessCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--bootstrap-server", cluster.bootstrap, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def test_auto_rebalance_returns_leadership_to_the_preferred_replicas(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect, 3, tmp_path, leader_imbalance_check_interval_seconds="2"
    ) as cluster:
        victim, moved = restart_a_leader(cluster)
        assert moved
        cluster.wait_for(
            lambda: not_preferred(cluster) == [], 60, "every partition led by its preferred replica"
        )
        for p in moved:
            assert cluster.partition_state(TOPIC, p)["leader"] == victim


def test_without_auto_rebalance_leader_election_moves_leadership_back(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(
        zk_connect,
        3,
        tmp_path,
        auto_leader_rebalance_enable="false",
        leader_imbalance_check_interval_seconds="1",
    ) as cluster:
        victim, moved = restart_a_leader(cluster)
        time.sleep(3)  # three check intervals: with the rebalance off, nothing moves
        assert sorted(not_preferred(cluster)) == sorted(moved)

        # One partition through the CLI.
        first, *rest = moved
        done = leader_election(
            cluster, "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", str(first)
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-{first}"
        ]
        assert cluster.partition_state(TOPIC, first)["leader"] == victim
        # The answer came once the answering broker (the controller) knew the new leader.
        assert cluster.leader_of(TOPIC, first, via=cluster.controller()) == victim

        # The others through confluent-kafka's admin (ElectLeaders at librdkafka's version).
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        wanted = [ConfluentPartition(TOPIC, p) for p in (*rest, first)]
        results = admin.elect_leaders(ConfluentElection.PREFERRED, wanted).result(60)
        by_partition = {tp.partition: error for tp, error in results.items()}
        for p in rest:
            assert by_partition[p] is None, by_partition
        assert by_partition[first].code() == ConfluentError.ELECTION_NOT_NEEDED
        assert not_preferred(cluster) == []

        # Everything already preferred: nothing to do, exit 0.
        again = leader_election(cluster, "--election-type", "preferred", "--all-topic-partitions")
        assert again.returncode == 0, again.stderr
        lines = again.stdout.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Valid replica already elected for")
        assert f"{TOPIC}-0" in lines[0] and f"{TOPIC}-{PARTITIONS - 1}" in lines[0]

        # A partition that does not exist, from a JSON file; unclean with a live leader.
        partitions = tmp_path / "partitions.json"
        wanted_json = [{"topic": TOPIC, "partition": 99}, {"topic": TOPIC, "partition": 0}]
        partitions.write_text(json.dumps({"partitions": wanted_json}))
        unknown = leader_election(
            cluster, "--election-type", "PREFERRED", "--path-to-json-file", str(partitions)
        )
        assert unknown.returncode == 1
        assert unknown.stdout.splitlines() == [
            f"Valid replica already elected for partitions {TOPIC}-0",
            f"Error completing leader election (PREFERRED) for partition: {TOPIC}-99: "
            "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
            "The partition does not exist.",
        ]
        assert "1 replica(s) could not be elected" in unknown.stderr
        unclean = leader_election(
            cluster, "--election-type", "UNCLEAN", "--topic", TOPIC, "--partition", "0"
        )
        assert unclean.returncode == 0, unclean.stderr
        assert unclean.stdout.splitlines() == [
            f"Valid replica already elected for partitions {TOPIC}-0"
        ]


def test_preferred_replica_out_of_the_isr_is_not_elected(zk_connect: str, tmp_path: Path) -> None:
    """The preferred replica stopped: PREFERRED_LEADER_NOT_AVAILABLE, leadership stays."""
    with ProcessCluster(zk_connect, 3, tmp_path, auto_leader_rebalance_enable="false") as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        first = preferred(cluster)
        victim = first[0]
        assert cluster.terminate(victim) == 0
        cluster.wait_for(
            lambda: cluster.partition_state(TOPIC, 0)["leader"] not in (-1, victim),
            60,
            "another leader",
        )
        leader = cluster.partition_state(TOPIC, 0)["leader"]
        result = leader_election(
            cluster, "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0"
        )
        assert result.returncode == 1
        assert result.stdout.splitlines() == [
            f"Error completing leader election (PREFERRED) for partition: {TOPIC}-0: "
            "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: "
            f"Failed to elect leader for partition {TOPIC}-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy"
        ]
        assert cluster.partition_state(TOPIC, 0)["leader"] == leader
