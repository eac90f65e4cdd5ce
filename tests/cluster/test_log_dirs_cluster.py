"""Several log dirs on a cluster broker (JBOD), under acks=all load from confluent-kafka
and logbus producers (idempotent, rf=3, min.insync.replicas=2), broker 0 of three having
two log dirs.

A failed dir (Kafka's LogDirFailureChannel): one of broker 0's dirs is replaced by a plain
file, which makes every later write into it fail even for root (no mount, no chmod: root
ignores file modes). The broker notices at its next checkpoint, takes only that dir's
replicas offline and tells the controller through ZooKeeper; the controller moves their
leadership away and drops broker 0 from their ISR, while broker 0 keeps serving the
replicas of its other dir. DescribeLogDirs (kafka-python) reports the failed dir as
KAFKA_STORAGE_ERROR; the checker finds nothing lost. Then the disk is replaced as
docs/operations.md says (broker stopped, an empty directory, broker started) and its
replicas rejoin every ISR.

A move: a replica of broker 0 moved to its other dir (AlterReplicaLogDirs) while produced
to; the checker finds every record once, in order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cluster_processes
from checker import History, check
from cluster_processes import ProcessCluster
from fault_checks import wait_isr
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from load import ProducerLoad, read_all

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "disks"
PARTITIONS = 6


def dir_of(disks: tuple[Path, Path], partition: int) -> Path:
    return next(d for d in disks if (d / f"{TOPIC}-{partition}").is_dir())


def test_a_failed_log_dir_takes_only_its_replicas_offline(
    zk_connect: str, tmp_path: Path
) -> None:
    disks = (tmp_path / "disk-a", tmp_path / "disk-b")
    per_broker = {0: {"log.dirs": ",".join(str(d) for d in disks)}}
    with ProcessCluster(
        zk_connect, 3, tmp_path, per_broker=per_broker, min_insync_replicas="2"
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        wait_isr(cluster, TOPIC, PARTITIONS)
        by_dir = {d: [p for p in range(PARTITIONS) if dir_of(disks, p) == d] for d in disks}
        assert all(by_dir.values()), by_dir  # both dirs hold replicas of broker 0
        led = {p for p in range(PARTITIONS) if cluster.leader_of(TOPIC, p) == 0}
        failing = next((d for d in disks if led & set(by_dir[d])), disks[0])
        healthy = disks[1] if failing == disks[0] else disks[0]
        history = History()
        with (
            ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1, client="confluent",
                         **{"acks": "all", "enable.idempotence": True}) as load,
            ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1,
                         acks="all", enable_idempotence=True),
        ):
            load.wait_acknowledged(300)
            # The disk goes: its directory is replaced by a file, so creating or replacing
            # anything in it (checkpoints, new segments) fails with ENOTDIR.
            shutil.rmtree(failing)
            failing.write_text("this disk failed\n")

            def moved() -> bool:
                for p in by_dir[failing]:
                    state = cluster.partition_state(TOPIC, p)
                    if state["leader"] in (0, -1) or 0 in state["isr"]:
                        return False
                return True

            cluster.wait_for(moved, 60, "leaders and ISRs without broker 0's failed replicas")
            load.wait_acknowledged(load.acknowledged() + 300)
        for p in by_dir[healthy]:
            assert 0 in cluster.partition_state(TOPIC, p)["isr"], p  # still served
        assert cluster.nodes[0].running
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(0))
        try:
            described = admin.describe_log_dirs(brokers=[0])
        finally:
            admin.close()
        errors = {d["log_dir"]: d["error_code"] for d in described[0]["log_dirs"]}
        assert errors[str(failing.resolve())] == 56  # KAFKA_STORAGE_ERROR
        assert errors[str(healthy.resolve())] == 0
        checked = check(history, read_all(cluster.bootstrap, TOPIC))
        assert checked.ok, str(checked)
        # The disk replaced (docs/operations.md): stop the broker, an empty directory at
        # the same path, start it; its lost replicas are fetched again from their leaders.
        assert cluster.terminate(0) == 0
        failing.unlink()
        failing.mkdir()
        cluster.start_broker(0)
        wait_isr(cluster, TOPIC, PARTITIONS)
        for p in range(PARTITIONS):  # broker 0 holds each replica again, in one dir
            assert [d for d in disks if (d / f"{TOPIC}-{p}").is_dir()] != [], p


def test_a_replica_moves_between_dirs_of_a_cluster_broker_under_load(
    zk_connect: str, tmp_path: Path
) -> None:
    """AlterReplicaLogDirs (kafka-python's admin) on broker 0 of three while confluent-kafka
    and logbus produce with acks=all: the replica keeps its place in the ISR (or its
    leadership) through the move, and the checker finds every record once, in order."""
    disks = (tmp_path / "disk-a", tmp_path / "disk-b")
    per_broker = {0: {"log.dirs": ",".join(str(d) for d in disks)}}
    with ProcessCluster(
        zk_connect, 3, tmp_path, per_broker=per_broker, min_insync_replicas="2"
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
        wait_isr(cluster, TOPIC, 2)
        source = dir_of(disks, 0)
        target = disks[1] if source == disks[0] else disks[0]
        history = History()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            with (
                ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1,
                             client="confluent", **{"acks": "all", "enable.idempotence": True}
                             ) as load,
                ProducerLoad(cluster.bootstrap, history, TOPIC, producers=1,
                             acks="all", enable_idempotence=True),
            ):
                load.wait_acknowledged(500)
                answer = admin.alter_replica_log_dirs(
                    {TopicPartitionReplica(TOPIC, 0, 0): str(target.resolve())}
                )
                assert answer == {TopicPartitionReplica(TOPIC, 0, 0): NoError}
                cluster.wait_for(
                    lambda: (target / f"{TOPIC}-0").is_dir()
                    and not (source / f"{TOPIC}-0").exists(),
                    60, "the replica to move",
                )
                load.wait_acknowledged(load.acknowledged() + 300)
        finally:
            admin.close()
        assert 0 in cluster.partition_state(TOPIC, 0)["isr"]
        checked = check(history, read_all(cluster.bootstrap, TOPIC))
        assert checked.ok, str(checked)


def reassign(cluster: ProcessCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "reassign-partitions",
         "--bootstrap-server", cluster.bootstrap, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_reassign_partitions_moves_replicas_between_dirs_with_a_throttle_verify_removes(
    zk_connect: str, tmp_path: Path
) -> None:
    """`reassign-partitions --execute` with `log_dirs` paths in its JSON (as
    kafka-reassign-partitions): the replica moves to that dir of its broker (the
    replicas unchanged), `--replica-alter-log-dirs-throttle` is set on that broker while
    it copies, `--verify` reports the replica and, once it moved, removes the throttle. An
    unknown path is refused for that replica."""
    disks = (tmp_path / "disk-a", tmp_path / "disk-b")
    per_broker = {0: {"log.dirs": ",".join(str(d) for d in disks)}}
    with ProcessCluster(zk_connect, 2, tmp_path, per_broker=per_broker) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        with logbus.Producer(bootstrap_servers=cluster.bootstrap, acks="all") as producer:
            for _ in range(300):
                producer.send(TOPIC, os.urandom(10_000), partition=0)
            producer.flush()
        replicas = list(cluster.metadata(TOPIC).partitions[0].replicas)
        source = dir_of(disks, 0)
        target = str((disks[1] if source == disks[0] else disks[0]).resolve())

        def plan(path: str) -> str:
            file = tmp_path / "plan.json"
            log_dirs = [path if b == 0 else "any" for b in replicas]
            file.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": TOPIC, "partition": 0, "replicas": replicas, "log_dirs": log_dirs},
            ]}))  # fmt: skip
            return str(file)

        unknown = reassign(cluster, "--execute", "--reassignment-json-file", plan("/nowhere"))
        assert unknown.returncode == 1
        assert f"{TOPIC}-0-0: LOG_DIR_NOT_FOUND" in unknown.stderr, unknown.stderr

        executed = reassign(
            cluster, "--execute", "--reassignment-json-file", plan(target),
            "--replica-alter-log-dirs-throttle", "1000000",
        )  # fmt: skip
        assert executed.returncode == 0, executed.stderr
        assert "The replica-alter-dir throttle limit was set to 1000000 B/s" in executed.stdout
        assert f"Successfully started log directory move for: {TOPIC}-0-0" in executed.stdout
        assert cluster.dynamic_config("brokers", "0") == {
            "replica.alter.log.dirs.io.max.bytes.per.second": "1000000"
        }
        with logbus.Admin(bootstrap_servers=cluster.bootstrap_of(0)) as admin:
            resource = logbus.ConfigResource(logbus.ResourceType.BROKER, "0")
            taken = admin.describe_configs([resource])[resource]
        assert taken["replica.alter.log.dirs.io.max.bytes.per.second"].value == "1000000"

        def verified() -> str | None:
            done = reassign(cluster, "--verify", "--reassignment-json-file", plan(target))
            assert done.returncode == 0, done.stderr
            moved = f"Reassignment of replica {TOPIC}-0-0 completed successfully."
            return done.stdout if moved in done.stdout else None

        stdout = cluster.wait_for(verified, 90, "the replica's move")
        assert stdout.splitlines()[:5] == [
            "Status of partition reassignment:",
            f"Reassignment of partition {TOPIC}-0 is completed.",
            "",
            "Status of replica log directory movement:",
            f"Reassignment of replica {TOPIC}-0-0 completed successfully.",
        ]
        assert "Clearing broker-level throttles on brokers 0,1" in stdout
        assert cluster.dynamic_config("brokers", "0") == {}
        assert (Path(target) / f"{TOPIC}-0").is_dir()
        assert sum(1 for _ in read_all(cluster.bootstrap, TOPIC)) == 300
