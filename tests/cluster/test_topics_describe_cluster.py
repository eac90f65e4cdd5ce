"""`logbus topics describe` on a real three-broker cluster with a broker down: the
partition filters list what kafka-topics would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cluster_processes
from cluster_processes import ProcessCluster

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


def describe(cluster: ProcessCluster, *args: str) -> list[str]:
    command = [sys.executable, "-m", "logbus.cli.main", "topics", "describe", *args]
    result = subprocess.run(
        [*command, "--bootstrap-server", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def fields(line: str) -> dict[str, str]:
    return dict(item.split(": ", 1) for item in line.strip("\t").split("\t"))


def test_filters_show_the_partitions_a_dead_broker_leaves_behind(
    zk_connect: str, tmp_path: Path
) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        cluster.create_topic("replicated", partitions=3, replication_factor=3)
        with logbus.Admin(bootstrap_servers=cluster.bootstrap) as admin:
            # one partition only on broker 2, one only on broker 1
            admin.create_topics([logbus.NewTopic("single", replica_assignment={0: [2], 1: [1]})])
        cluster.wait_for(lambda: cluster.leader_of("single", 0) == 2, 60, "single's leader")
        assert describe(cluster, "--under-replicated-partitions") == []
        assert describe(cluster, "--unavailable-partitions") == []

        cluster.kill(2)
        cluster.wait_for(
            lambda: all(2 not in p.isr for p in cluster.metadata("replicated").partitions.values()),
            60,
            "broker 2 out of every ISR",
        )
        under = [fields(line) for line in describe(cluster, "--under-replicated-partitions")]
        assert sorted(f["Partition"] for f in under if f["Topic"] == "replicated") == [
            "0",
            "1",
            "2",
        ]
        assert all(f["Leader"] in {"0", "1"} for f in under if f["Topic"] == "replicated")
        unavailable = [fields(line) for line in describe(cluster, "--unavailable-partitions")]
        assert [(f["Topic"], f["Partition"], f["Leader"]) for f in unavailable] == [
            ("single", "0", "none")
        ]
        # the header line is left out with a filter, present without
        assert describe(cluster, "--topic", "single")[0].startswith("Topic: single\tTopicId: ")
