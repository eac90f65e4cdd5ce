"""kafka-topics' syntax on a real three-broker cluster: the command an operator types
(`--create --topic T --partitions 3 --replication-factor 3`) and replica assignments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cluster_processes
from cluster_processes import ProcessCluster

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


def topics(cluster: ProcessCluster, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "topics",
         "--bootstrap-server", cluster.bootstrap, *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def replicas(cluster: ProcessCluster, topic: str) -> list[str]:
    """Each partition's replica list, as `--describe` prints it."""
    lines = topics(cluster, "--describe", "--topic", topic).splitlines()[1:]
    return [dict(f.split(": ", 1) for f in line.strip().split("\t"))["Replicas"] for line in lines]


def test_create_replicated_and_assigned_topics(zk_connect: str, tmp_path: Path) -> None:
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        created = topics(cluster, "--create", "--topic", "orders", "--partitions", "3",
                         "--replication-factor", "3")  # fmt: skip
        assert created == "Created topic orders.\n"
        header = topics(cluster, "--describe", "--topic", "orders").splitlines()[0]
        assert "PartitionCount: 3\tReplicationFactor: 3" in header
        assert all(sorted(r.split(",")) == ["0", "1", "2"] for r in replicas(cluster, "orders"))

        topics(cluster, "--create", "--topic", "placed", "--replica-assignment", "2:0,1:2")
        assert replicas(cluster, "placed") == ["2,0", "1,2"]
        topics(cluster, "--alter", "--topic", "placed", "--partitions", "3",
               "--replica-assignment", "2:0,1:2,0:1")  # fmt: skip
        assert replicas(cluster, "placed") == ["2,0", "1,2", "0,1"]
        cluster.wait_for(lambda: cluster.leader_of("placed", 2) == 0, 60, "the new leader")
        assert topics(cluster, "--describe", "--under-replicated-partitions") == ""
