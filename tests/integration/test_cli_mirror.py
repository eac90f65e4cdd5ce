"""`logbus mirror` as a subprocess between two brokers (two clusters of one): records
produced into the source by confluent-kafka arrive on the target with their keys,
headers, timestamps and partitions, read back with confluent-kafka; missing topics are
created with the source's partitions and configs; source offsets are committed; the
progress line and the metrics endpoint report the copy; bad input is refused with a
clear message."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTP
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from brokers import FAST_GROUPS
from kafka_wire import wait_for

CLI = [sys.executable, "-m", "logbus.cli.main"]
BASE_TS = 1_700_000_000_000


def write_config(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def configs(tmp_path: Path, source: Any, target: Any, group: str = "mirror") -> list[str]:
    consumer = write_config(
        tmp_path / "consumer.properties",
        {"bootstrap.servers": source.bootstrap, "group.id": group},
    )
    producer = write_config(
        tmp_path / "producer.properties", {"bootstrap.servers": target.bootstrap}
    )
    return ["--consumer.config", str(consumer), "--producer.config", str(producer)]


def start_mirror(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "mirror", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_mirror(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, (out, err)
    return out, err


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(
            topic,
            value=f"value-{i}".encode(),
            key=f"key-{i % 17}".encode(),
            partition=i % 3,
            timestamp=BASE_TS + i,
            headers=[("seq", str(i).encode()), ("empty", None)],
        )
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[Any]:
    """Every record of the topic, once `count` of them are there."""
    consumer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ConfluentTP(topic, p, 0) for p in range(partitions)])
        got: list[Any] = []

        def enough() -> bool:
            for message in consumer.consume(500, timeout=0.5):
                assert message.error() is None, message.error()
                got.append(message)
            return len(got) >= count

        wait_for(enough, 90, what=f"{count} records on {topic}")
        return got
    finally:
        consumer.close()


def test_mirror_copies_keys_headers_timestamps_partitions_and_configs(
    broker_factory: Any, tmp_path: Path
) -> None:
    source, target = broker_factory(**FAST_GROUPS), broker_factory(**FAST_GROUPS)
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    new = NewTopic("orders", 3, 1, config={
        "retention.ms": "86400000", "cleanup.policy": "delete",
        # the source's own replication settings, not copied (as MirrorMaker 2)
        "min.insync.replicas": "1", "unclean.leader.election.enable": "true",
    })  # fmt: skip
    for future in admin.create_topics([new]).values():
        future.result(30)
    produce(source.bootstrap, "orders", 300)
    mirror = start_mirror(
        *configs(tmp_path, source, target),
        "--include", "ord.*",
        "--offset.commit.interval.ms", "200",
        "--report.interval.ms", "200",
        "--metrics-listener", "http://127.0.0.1:0",
    )
    try:
        got = read_all(target.bootstrap, "orders", 3, 300)
        assert mirror.stdout is not None
        url = next(
            line.split(" at ")[-1].strip()
            for line in iter(mirror.stdout.readline, "")
            if line.startswith("serving the mirror's metrics")
        )
        scraped = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "logbus_mirror_record_count 300.0" in scraped
    finally:
        out, _ = stop_mirror(mirror)
    assert len(got) == 300  # nothing duplicated in a clean run
    for message in got:
        i = int(message.value().decode().removeprefix("value-"))
        assert message.key() == f"key-{i % 17}".encode()
        assert message.partition() == i % 3
        assert message.timestamp()[1] == BASE_TS + i
        assert message.headers() == [("seq", str(i).encode()), ("empty", None)]
    target_admin = AdminClient({"bootstrap.servers": target.bootstrap})
    described = target_admin.describe_configs([ConfigResource("topic", "orders")])
    entries = next(iter(described.values())).result(30)
    assert entries["retention.ms"].value == "86400000"
    assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    for name in ("min.insync.replicas", "unclean.leader.election.enable"):
        assert entries[name].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, name
    assert "300 records mirrored" in out
    assert "lag 0 records" in out
    committed = ConfluentConsumer({"bootstrap.servers": source.bootstrap, "group.id": "mirror"})
    try:
        offsets = committed.committed([ConfluentTP("orders", p) for p in range(3)], timeout=30)
        assert [tp.offset for tp in offsets] == [100, 100, 100]
    finally:
        committed.close()


def test_mirror_into_a_topic_with_other_partition_count_uses_the_key(
    broker_factory: Any, tmp_path: Path
) -> None:
    source, target = broker_factory(**FAST_GROUPS), broker_factory(**FAST_GROUPS)
    for broker, partitions in ((source, 3), (target, 2)):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("events", partitions, 1)]).values():
            future.result(30)
    produce(source.bootstrap, "events", 90)
    mirror = start_mirror(
        *configs(tmp_path, source, target), "--whitelist", "events,other",
        "--num.streams", "2",
    )
    try:
        got = read_all(target.bootstrap, "events", 2, 90)
    finally:
        stop_mirror(mirror)
    assert sorted(m.value() for m in got) == sorted(f"value-{i}".encode() for i in range(90))
    by_key: dict[bytes, set[int]] = {}
    for message in got:
        by_key.setdefault(message.key(), set()).add(message.partition())
    assert all(len(partitions) == 1 for partitions in by_key.values())  # a key, a partition


def run_mirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "mirror", *args], capture_output=True, text=True, timeout=60, check=False
    )


def error_of(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_mirror_refuses_the_same_cluster_at_both_ends(broker: Any, tmp_path: Path) -> None:
    result = run_mirror(*configs(tmp_path, broker, broker), "--include", ".*")
    assert "the source and the target are the same cluster" in error_of(result)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("missing-file", "cannot read"),
        ("no-group", "must set group.id"),
        ("no-bootstrap", "does not set bootstrap.servers"),
        ("bad-regex", "is not a valid regular expression"),
        ("bad-setting", "fetch.min.bytez"),
    ],
)
def test_mirror_bad_input(tmp_path: Path, change: str, expected: str) -> None:
    consumer = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    include = "t.*"
    if change == "no-group":
        del consumer["group.id"]
    elif change == "no-bootstrap":
        del consumer["bootstrap.servers"]
    elif change == "bad-setting":
        consumer["fetch.min.bytez"] = "1"
    elif change == "bad-regex":
        include = "t[("
    consumer_file = write_config(tmp_path / "c.properties", consumer)
    producer_file = write_config(tmp_path / "p.properties", {"bootstrap.servers": "127.0.0.1:1"})
    if change == "missing-file":
        consumer_file = tmp_path / "nowhere.properties"
    result = run_mirror(
        "--consumer.config", str(consumer_file), "--producer.config", str(producer_file),
        "--include", include,
    )
    assert expected in error_of(result)


def test_mirror_needs_include_or_whitelist(tmp_path: Path) -> None:
    result = run_mirror("--consumer.config", "c", "--producer.config", "p")
    assert result.returncode != 0
    assert "one of the arguments --include --whitelist is required" in result.stderr


def test_mirror_copies_records_without_headers_in_bulk_keeping_what_they_carry(
    broker_factory: Any, tmp_path: Path
) -> None:
    # Records without headers go to the target through the producer's columnar bulk path
    # (a partition's run at a time, timestamps a column): partitions 1 and 2 here; runs
    # holding a record with headers go as records (partition 0). Null keys, tombstones
    # and timestamps out of order must arrive as they were.
    source, target = broker_factory(**FAST_GROUPS), broker_factory(**FAST_GROUPS)
    for broker in (source, target):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("plain", 3, 1)]).values():
            future.result(30)
    producer = ConfluentProducer({"bootstrap.servers": source.bootstrap, "linger.ms": 50})
    count = 3000
    expected: dict[int, list[tuple[Any, ...]]] = {0: [], 1: [], 2: []}
    for i in range(count):
        key = None if i % 4 == 0 else f"key-{i % 17}".encode()
        value = None if i % 10 == 3 else f"value-{i}".encode() * (1 + i % 3)
        headers = [("h", str(i).encode())] if i % 300 == 0 else None  # partition 0
        timestamp = BASE_TS + (i * 7919) % 10_000  # out of order within a partition
        producer.produce("plain", value=value, key=key, partition=i % 3,
                         timestamp=timestamp, headers=headers)
        expected[i % 3].append((key, value, timestamp, headers))
    assert producer.flush(30) == 0
    mirror = start_mirror(
        *configs(tmp_path, source, target), "--include", "plain",
        "--offset.commit.interval.ms", "200",
    )
    try:
        got = read_all(target.bootstrap, "plain", 3, count)
    finally:
        out, _ = stop_mirror(mirror)
    assert len(got) == count
    copied: dict[int, list[tuple[Any, ...]]] = {0: [], 1: [], 2: []}
    for message in sorted(got, key=lambda m: (m.partition(), m.offset())):
        copied[message.partition()].append(
            (message.key(), message.value(), message.timestamp()[1], message.headers())
        )
    assert copied == expected
    assert f"{count} records mirrored" in out


def test_a_record_the_target_refuses_stops_the_mirror_before_its_offset_is_committed(
    broker_factory: Any, tmp_path: Path
) -> None:
    source, target = broker_factory(**FAST_GROUPS), broker_factory(**FAST_GROUPS)
    for broker, config in ((source, {}), (target, {"max.message.bytes": "4000"})):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until answered
        admin.create_topics([NewTopic("sized", 1, 1, config=config)])["sized"].result(30)
    producer = ConfluentProducer({"bootstrap.servers": source.bootstrap})
    for i in range(120):
        producer.produce("sized", value=b"x" * (20_000 if i == 60 else 100))
    assert producer.flush(30) == 0
    result = run_mirror(
        *configs(tmp_path, source, target), "--include", "sized",
        "--offset.commit.interval.ms", "50",
    )
    assert "could not be written to the target: MESSAGE_TOO_LARGE" in error_of(result)
    committed = ConfluentConsumer({"bootstrap.servers": source.bootstrap, "group.id": "mirror"})
    try:
        [offset] = committed.committed([ConfluentTP("sized", 0)], timeout=30)
    finally:
        committed.close()
    assert offset.offset <= 60  # never past the refused record (negative: nothing committed)
