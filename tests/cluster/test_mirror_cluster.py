"""`logbus mirror` from a single broker to a 3-broker ZooKeeper cluster (rf=3,
min.insync.replicas=2) while confluent-kafka and logbus producers write into the source
under acks=all with idempotence; the mirror is killed with SIGKILL twice mid-way and
started again each time. The checker reads both sides: the source history is clean, and
every value acknowledged by the source arrives on the target (duplicates allowed, as in
Kafka), in the partition it was written to and in the source's order where the partition
counts match; a topic the mirror created has the source's partitions and configs."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from checker import Consumed, History, Outcome, check
from cluster_processes import ProcessCluster
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTP
from confluent_kafka.admin import AdminClient, ConfigResource
from load import ProducerLoad, read_all

import logbus
from kafka_wire import wait_for

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

CLI = [sys.executable, "-m", "logbus.cli.main", "mirror"]
SAME = "events"  # as many partitions on both sides: records keep their partition
CREATED = "audit"  # missing on the target: the mirror creates it


class Mirror:
    """`logbus mirror` processes, one at a time, their output in a file."""

    def __init__(self, tmp_path: Path, source: str, target: str) -> None:
        consumer = tmp_path / "source.properties"
        consumer.write_text(
            f"bootstrap.servers={source}\ngroup.id=mirror\n"
            # A mirror killed with SIGKILL leaves its member behind until this expires.
            "session.timeout.ms=6000\nheartbeat.interval.ms=1000\n"
        )
        producer = tmp_path / "target.properties"
        producer.write_text(f"bootstrap.servers={target}\nacks=all\n")
        self.args = [
            "--consumer.config", str(consumer), "--producer.config", str(producer),
            "--include", f"{SAME}|{CREATED}", "--num.streams", "2",
            "--offset.commit.interval.ms", "300", "--report.interval.ms", "1000",
        ]
        self.log = tmp_path / "mirror.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*CLI, *self.args], stdout=out, stderr=out)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def check_alive(self) -> None:
        assert self.proc is not None
        assert self.proc.poll() is None, self.log.read_text()


@pytest.fixture
def mirror_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[Mirror] = []

    def make(source: str, target: str) -> Mirror:
        made.append(Mirror(tmp_path, source, target))
        return made[-1]

    yield make
    for mirror in made:
        mirror.kill()


def on_target(bootstrap: str, topic: str) -> int:
    """Records the target holds in the topic (the sum of its high watermarks)."""
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        if not partitions:
            return 0
        return sum(
            consumer.get_watermark_offsets(ConfluentTP(topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()


def mirror_anomalies(
    history: History, source: Sequence[Consumed], target: Sequence[Consumed], same: set[str]
) -> dict[str, list[Any]]:
    """What the target holds against what the source holds: acknowledged values missing
    (lost), values the source never held (unexpected), values in another partition than at
    the source or out of the source's order (topics in `same` only)."""
    at_source = {r.value: r for r in source}
    first: dict[bytes, Consumed] = {}
    for record in target:
        first.setdefault(record.value, record)
    found: dict[str, list[Any]] = defaultdict(list)
    for send in history.sends:
        if send.outcome is Outcome.OK and send.value not in first:
            found["lost"].append(send.value)
    for value, record in first.items():
        origin = at_source.get(value)
        if origin is None:
            found["unexpected"].append(record)
        elif record.topic in same and record.partition != origin.partition:
            found["moved"].append((origin, record))
    order: dict[tuple[str, int], list[int]] = defaultdict(list)
    for record in sorted(first.values(), key=lambda r: (r.topic, r.partition, r.offset)):
        if record.topic in same and record.value in at_source:
            order[(record.topic, record.partition)].append(at_source[record.value].offset)
    for tp, offsets in order.items():
        if offsets != sorted(offsets):
            found["reordered"].append(tp)
    return dict(found)


def test_mirror_killed_twice_loses_nothing(
    zk_connect: str, broker_process: Any, mirror_factory: Any, tmp_path: Path
) -> None:
    source = broker_process("--override", "group.initial.rebalance.delay.ms=0")
    with logbus.Admin(bootstrap_servers=source.bootstrap) as admin:
        admin.create_topics([
            logbus.NewTopic(SAME, 4, 1),
            logbus.NewTopic(CREATED, 2, 1, config={"retention.ms": "3600000"}),
        ])
    (tmp_path / "target").mkdir()
    with ProcessCluster(
        zk_connect, 3, tmp_path / "target", min_insync_replicas="2", default_replication_factor="3"
    ) as target:
        target.create_topic(SAME, partitions=4, replication_factor=3)
        history = History()
        mirror = mirror_factory(source.bootstrap, target.bootstrap)
        mirror.start()
        confluent_config = {"acks": "all", "enable.idempotence": True}
        with (
            ProducerLoad(source.bootstrap, history, SAME, producers=2, client="confluent",
                         interval=0.005, **confluent_config) as load,
            ProducerLoad(source.bootstrap, history, CREATED, producers=1, interval=0.01,
                         acks="all", enable_idempotence=True),
        ):
            copied = 0
            for _ in range(2):
                load.wait_acknowledged(load.acknowledged() + 300)
                copied = wait_for(
                    lambda c=copied: (n := on_target(target.bootstrap, SAME)) > c + 200 and n,
                    120, what="the mirror to copy more records",
                )
                mirror.check_alive()
                mirror.kill()  # SIGKILL mid-way, offsets committed or not
                mirror.start()
            load.wait_acknowledged(load.acknowledged() + 300)
        acknowledged = {s.value for s in history.sends if s.outcome is Outcome.OK}
        source_records = read_all(source.bootstrap, SAME) + read_all(source.bootstrap, CREATED)
        source_check = check(history, source_records)
        assert source_check.ok, str(source_check)

        def arrived() -> list[Consumed] | None:
            records = read_all(target.bootstrap, SAME) + read_all(target.bootstrap, CREATED)
            return records if acknowledged <= {r.value for r in records} else None

        target_records = wait_for(arrived, 180, interval=1, what="every record on the target")
        mirror.check_alive()
        assert mirror.proc is not None
        mirror.proc.send_signal(signal.SIGTERM)
        assert mirror.proc.wait(60) == 0, mirror.log.read_text()
        anomalies = mirror_anomalies(history, source_records, target_records, {SAME, CREATED})
        assert not anomalies, anomalies
        created = target.metadata(CREATED)
        assert len(created.partitions) == 2
        assert created.replication_factor == 3
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        configs = admin.describe_configs([ConfigResource("topic", CREATED)])
        assert next(iter(configs.values())).result(30)["retention.ms"].value == "3600000"
        assert "records mirrored" in mirror.log.read_text()
