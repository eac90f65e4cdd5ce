"""Partition leaders killed with -9 under a standalone Spark cluster (one Master, two
Workers, executors in JVMs and Python workers of their own, the driver in another process:
faults_job.py) over three `logbus server start` processes on a real ZooKeeper (topics
replicated three times, min.insync.replicas=2). The driver's jobs wait at gates while the
test kills a leader, then go on with metadata that still names the dead broker:

- a batch write through the sink with kafka.acks=all, killed between its two waves of
  tasks: every row is in the topic exactly once (the sink is at-least-once: a task run
  again would write its rows twice);
- a batch read in twelve tasks, killed while the first two run and ten wait;
- a `Trigger.AvailableNow` read, killed in micro-batch 1 (micro-batch 2 is planned after).

Each read returns each (partition, offset) of the log once, with the value confluent-kafka
reads there, and no task failed. The killed broker is started again after each step, so
every step starts with three brokers. tests/spark/test_cluster_faults.py does the same on
a `local[2]` session."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cluster_processes
import pyarrow.parquet as pq
import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from spark_support import (
    CLUSTER_CONF,
    SparkProcess,
    StandaloneCluster,
    consume_all,
    produce,
    transactional_cluster,
)

from kafka_wire import wait_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

# A hang catcher: a Master, two Workers, three brokers, a driver and two executors on a
# loaded 2-core machine.
pytestmark = pytest.mark.timeout(900)

FAULTS_JOB = Path(__file__).with_name("faults_job.py")
PARTITIONS = 3
PER_PARTITION = 1000
ROWS = 6000
# The two tasks of a wave run at once, one per executor: the driver waits for both.
FAULTS_CONF = CLUSTER_CONF | {
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s",
}


@pytest.fixture
def cluster(zk_connect: str, tmp_path: Path) -> Iterator[ProcessCluster]:
    (tmp_path / "brokers").mkdir()
    with transactional_cluster(zk_connect, tmp_path / "brokers") as made:
        yield made


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneCluster]:
    home = tmp_path / "spark"
    home.mkdir()
    with StandaloneCluster(home) as made:
        yield made


def log_contents(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record of `topic`, read with confluent-kafka
    up to each partition's high watermark."""
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": f"log-{topic}",
                              "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[tuple[int, int], bytes] = {}

        def read_to_ends() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records[(msg.partition(), msg.offset())] = msg.value()
            return len(records) == sum(ends.values())

        wait_for(read_to_ends, 60, 0, what=f"{topic} read to its high watermarks")
        return records
    finally:
        consumer.close()


def committed_rows(path: Path) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the Parquet files a streaming query committed (those
    its `_spark_metadata` log lists), or of every file of a batch write."""
    manifest = path / "_spark_metadata"
    if manifest.exists():
        files = [
            json.loads(line)["path"].removeprefix("file://")
            for log in sorted(manifest.iterdir()) if not log.name.startswith(".")
            for line in log.read_text().splitlines()[1:]
        ]
    else:
        files = [str(f) for f in sorted(path.glob("*.parquet"))]
    rows = []
    for file in files:
        table = pq.read_table(file).to_pydict()
        rows += zip(table["partition"], table["offset"], table["value"], strict=True)
    return rows


def check_read(rows: list[tuple[int, int, bytes]], log: dict[tuple[int, int], bytes]) -> None:
    """Each (partition, offset) of the log once, with its value."""
    offsets = [(p, o) for p, o, _ in rows]
    assert len(offsets) == len(set(offsets)), "a record read twice"
    assert {(p, o): v for p, o, v in rows} == log


class FaultsJob:
    """faults_job.py running as the driver, and its gates."""

    def __init__(self, standalone: StandaloneCluster, addresses: str, tmp: Path) -> None:
        self.gate = tmp / "gate"
        self.gate.mkdir()
        conf = [arg for name, value in FAULTS_CONF.items() for arg in ("--conf", f"{name}={value}")]
        self.process = SparkProcess(
            [sys.executable, str(FAULTS_JOB), "--master", standalone.url, *conf,
             "--bootstrap", addresses, "--source", "events", "--prefix", "copy",
             "--out", str(tmp), "--gate", str(self.gate), "--rows", str(ROWS),
             "--max-offsets", str(PARTITIONS * PER_PARTITION // 3)],
            tmp / "faults-job.log", tmp,
        )

    def wait_held(self, step: str, tasks: tuple[int, ...]) -> None:
        def held() -> bool:
            if self.process.proc.poll() is not None:
                raise AssertionError(f"the driver exited\n{self.process.log_tail(6000)}")
            return all((self.gate / f"{step}-held-{t}").exists() for t in tasks)

        wait_for(held, 600, 0.2, what=f"tasks {tasks} of the {step} step at the gate")

    def release(self, step: str) -> None:
        (self.gate / f"{step}-go").touch()

    def finish(self) -> Any:
        """Wait for the driver; its report. No task failed (Spark's scheduler logs each
        failed attempt as `Lost task`): the tasks rode out the kills themselves."""
        returncode = self.process.proc.wait(600)
        assert returncode == 0, self.process.log_tail(6000)
        text = self.process.log_path.read_text(errors="replace")
        assert "Lost task" not in text, self.process.log_tail(6000)
        return json.loads(text.strip().splitlines()[-1])

    def close(self) -> None:
        for step in ("write", "batch", "stream"):
            self.release(step)
        self.process.close()


def kill_and_restart(cluster: ProcessCluster, victim: int, job: FaultsJob, step: str) -> None:
    """kill -9 `victim`, let the held tasks go on, then start it again and wait until it
    is back in every ISR (so that the next step has three brokers again)."""
    assert victim >= 0
    cluster.kill(victim)
    job.release(step)
    cluster.start_broker(victim)
    cluster.wait_for(
        lambda: all(len(cluster.isr_of(topic, p)) == PARTITIONS
                    for topic in ("events", "copy-sunk") for p in range(PARTITIONS)),
        120,
        f"broker {victim} back in every ISR",
    )


def test_leaders_killed_under_a_standalone_cluster(
    cluster: ProcessCluster, standalone: StandaloneCluster, tmp_path: Path
) -> None:
    cluster.create_topic("events", partitions=PARTITIONS, replication_factor=3)
    cluster.create_topic("copy-sunk", partitions=PARTITIONS, replication_factor=3)
    for p in range(PARTITIONS):
        produce(cluster.bootstrap, "events",
                [b'{"p":%d,"i":%d,"pad":"%s"}' % (p, i, b"x" * (i % 100))
                 for i in range(PER_PARTITION)],
                partition=p, acks="all")
    # All three brokers, dead or alive: what a user configures once.
    addresses = ",".join(node.address for node in cluster.nodes.values())
    job = FaultsJob(standalone, addresses, tmp_path)
    try:
        job.wait_held("write", (2, 3))
        kill_and_restart(cluster, cluster.leader_of("copy-sunk", 0), job, "write")
        job.wait_held("batch", (0, 1))
        kill_and_restart(cluster, cluster.leader_of("events", 0), job, "batch")
        job.wait_held("stream", (0, 1))
        cluster.kill(cluster.leader_of("events", 1))
        job.release("stream")
        report = job.finish()
    finally:
        job.close()

    sunk = consume_all(cluster.bootstrap, "copy-sunk", PARTITIONS, ROWS)
    assert sorted(m.value() for m in sunk) == [b"row-%06d" % i for i in range(ROWS)]
    log = log_contents(cluster.bootstrap, "events", PARTITIONS)
    assert len(log) == PARTITIONS * PER_PARTITION
    check_read(committed_rows(tmp_path / "batch"), log)
    check_read(committed_rows(tmp_path / "stream"), log)
    # The tasks ran in executors on both Workers, not in the driver's process.
    assert len(standalone.executor_logs(report["app_id"])) == 2, standalone.log_tails()
