"""`logbus log-dirs --describe` as a subprocess: kafka-log-dirs' JSON against one broker
and against three brokers in one process, each holding a replica of every partition."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_cluster import InProcessCluster

import logbus

CLI = [sys.executable, "-m", "logbus.cli.main", "log-dirs"]
TIMEOUT = 30.0


def log_dirs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def described(bootstrap: str, *args: str) -> dict[str, Any]:
    result = log_dirs(bootstrap, "--describe", *args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1].startswith("Received log directory information from brokers ")
    document: dict[str, Any] = json.loads(lines[2])
    return document


def size_on_disk(log_dir: Path, partition: str) -> int:
    return sum(f.stat().st_size for f in (log_dir / partition).glob("*.log"))


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    with logbus.Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
        for i in range(records):
            producer.send(topic, f"value-{i}".encode(), partition=i % partitions)
        producer.flush(TIMEOUT)


def test_describe_prints_kafka_log_dirs_json(broker: Any) -> None:
    topic, other = f"ld-{uuid.uuid4().hex[:6]}", f"ld-{uuid.uuid4().hex[:6]}"
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, 2), logbus.NewTopic(other, 1)])
    produce(broker.bootstrap, topic, 2, 20)
    document = described(broker.bootstrap, "--topic-list", topic)
    assert document["version"] == 1
    (entry,) = document["brokers"]
    assert entry["broker"] == 0
    (log_dir,) = entry["logDirs"]
    assert log_dir["logDir"] == str(broker.data_dir.resolve())
    assert log_dir["error"] is None
    assert log_dir["partitions"] == [
        {
            "partition": f"{topic}-{p}",
            "size": size_on_disk(broker.data_dir, f"{topic}-{p}"),
            "offsetLag": 0,
            "isFuture": False,
        }
        for p in range(2)
    ]
    assert all(p["size"] > 0 for p in log_dir["partitions"])
    everything = described(broker.bootstrap)
    names = {p["partition"] for p in everything["brokers"][0]["logDirs"][0]["partitions"]}
    assert {f"{topic}-0", f"{topic}-1", f"{other}-0"} <= names


def test_unknown_topic_is_left_out_and_unknown_broker_refused(broker: Any) -> None:
    document = described(broker.bootstrap, "--topic-list", "no-such-topic")
    assert document["brokers"][0]["logDirs"][0]["partitions"] == []
    result = log_dirs(broker.bootstrap, "--describe", "--broker-list", "0,7")
    assert result.returncode == 1
    assert "The given brokers do not exist from --broker-list: 7" in result.stderr
    bad = log_dirs(broker.bootstrap, "--describe", "--broker-list", "zero")
    assert bad.returncode == 2 and "broker ids" in bad.stderr
    assert log_dirs(broker.bootstrap).returncode == 2  # --describe is required


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path, replica_fetch_wait_max_ms="100").start()
    try:
        yield running
    finally:
        running.close()


def test_three_brokers_each_show_their_replica(cluster: InProcessCluster, tmp_path: Path) -> None:
    topic = "replicated"
    cluster.create_topic(topic, {0: [0, 1, 2], 1: [1, 2, 0]})
    produce(cluster.bootstrap, topic, 2, 30)
    for broker_id in range(3):
        for p in range(2):
            cluster.wait_for(
                lambda b=broker_id, i=p: cluster.partition(b, topic, i).log.log_end_offset == 15,
                f"broker {broker_id}'s copy of {topic}-{p}",
            )
    document = described(cluster.bootstrap, "--topic-list", topic)
    assert [b["broker"] for b in document["brokers"]] == [0, 1, 2]
    for entry in document["brokers"]:
        data_dir = tmp_path / f"broker-{entry['broker']}"
        (log_dir,) = entry["logDirs"]
        assert log_dir["logDir"] == str(data_dir.resolve())
        sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
        assert sizes == {
            f"{topic}-{p}": size_on_disk(data_dir, f"{topic}-{p}") for p in range(2)
        }
    # every copy of a partition holds the same batches
    for p in range(2):
        copies = {
            next(
                x["size"]
                for x in b["logDirs"][0]["partitions"]
                if x["partition"] == f"{topic}-{p}"
            )
            for b in document["brokers"]
        }
        assert len(copies) == 1 and copies.pop() > 0
    one = described(cluster.bootstrap, "--broker-list", "2", "--topic-list", topic)
    assert [b["broker"] for b in one["brokers"]] == [2]
