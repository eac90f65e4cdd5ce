"""The `logbus` command as a subprocess against a real broker started in this process."""

from __future__ import annotations

import collections
import subprocess
import time
from typing import Any

import pytest
from cli_runs import CLI, logbus, ok

from logbus.client.partitioner import partition_for_key


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def consume_all(broker: Any, topic: str, count: int, *extra: str) -> list[str]:
    out = ok(
        logbus(
            broker,
            "consume",
            topic,
            "--from-beginning",
            "--max-messages",
            str(count),
            "--timeout-ms",
            "10000",
            *extra,
        )
    )
    return out.splitlines()


def test_topic_lifecycle(broker: Any) -> None:
    assert ok(logbus(broker, "topics", "create", "orders", "--partitions", "3")) == (
        "Created topic orders.\n"
    )
    assert "orders" in ok(logbus(broker, "topics", "list")).splitlines()

    lines = ok(logbus(broker, "topics", "describe", "orders")).splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: " in lines[0]
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)
    ]

    again = one_error_line(logbus(broker, "topics", "create", "orders"))
    assert "TOPIC_ALREADY_EXISTS" in again
    ok(logbus(broker, "topics", "create", "orders", "--if-not-exists"))

    ok(logbus(broker, "topics", "alter", "orders", "--partitions", "5"))
    assert "PartitionCount: 5" in ok(logbus(broker, "topics", "describe", "orders"))
    assert "INVALID_PARTITIONS" in one_error_line(
        logbus(broker, "topics", "alter", "orders", "--partitions", "2")
    )

    ok(logbus(broker, "topics", "delete", "orders"))
    deadline = time.monotonic() + 10
    while "orders" in ok(logbus(broker, "topics", "list")).split():
        assert time.monotonic() < deadline, "the topic is still listed"
        time.sleep(0.2)
    for action in (
        ["describe", "orders"],
        ["delete", "orders"],
        ["alter", "orders", "--partitions", "9"],
    ):
        assert "Topic 'orders' does not exist" in one_error_line(logbus(broker, "topics", *action))
    ok(logbus(broker, "topics", "delete", "orders", "--if-exists"))


def test_topic_configs_are_described(broker: Any) -> None:
    ok(
        logbus(
            broker,
            "topics",
            "create",
            "short",
            "--config",
            "retention.ms=60000",
            "--config",
            "cleanup.policy=compact",
        )
    )
    header = ok(logbus(broker, "topics", "describe", "short")).splitlines()[0]
    assert header.endswith("Configs: cleanup.policy=compact,retention.ms=60000")


def test_bad_topic_config_is_a_broker_error(broker: Any) -> None:
    line = one_error_line(
        logbus(broker, "topics", "create", "bad", "--config", "retention.ms=soon")
    )
    assert line.startswith("logbus: error: INVALID_CONFIG")


def test_keyed_lines_round_trip_and_land_where_murmur2_says(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "keyed", "--partitions", "3"))
    lines = [f"user-{i % 97}:event {i}" for i in range(20_000)]
    ok(
        logbus(
            broker,
            "produce",
            "keyed",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            stdin="\n".join(lines).encode(),
        )
    )
    out = consume_all(
        broker, "keyed", len(lines), "--print-key", "--print-partition", "--key-separator", "|"
    )
    assert len(out) == len(lines)
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for line in out:
        partition, key, value = line.split("|")
        assert int(partition.removeprefix("Partition:")) == partition_for_key(key.encode(), 3)
        per_key[key].append(int(value.removeprefix("event ")))
    assert sorted(f"{k}:event {i}" for k, vs in per_key.items() for i in vs) == sorted(lines)
    # within a key (one partition) order is kept
    assert all(vs == sorted(vs) for vs in per_key.values())


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(broker: Any, codec: str) -> None:
    topic = f"codec-{codec}"
    ok(logbus(broker, "topics", "create", topic, "--partitions", "2"))
    lines = [f"line {i} " + "x" * (i % 50) for i in range(3000)]
    ok(
        logbus(
            broker,
            "produce",
            topic,
            "--compression",
            codec,
            stdin=("\n".join(lines) + "\n").encode(),
        )
    )
    assert sorted(consume_all(broker, topic, len(lines))) == sorted(lines)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: Any, acks: str) -> None:
    topic = f"acks-{acks}"
    ok(logbus(broker, "topics", "create", topic))
    ok(logbus(broker, "produce", topic, "--acks", acks, stdin=b"a\nb\nc\n"))
    assert consume_all(broker, topic, 3) == ["a", "b", "c"]


def test_partition_offset_and_printing(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "p", "--partitions", "2"))
    ok(
        logbus(
            broker,
            "produce",
            "p",
            "--partition",
            "1",
            "--parse-key",
            stdin=b"k0\tv0\nk1\tv1\nk2\tv2\nnokey\n".replace(b"nokey", b"k3\t"),
        )
    )
    out = ok(
        logbus(
            broker,
            "consume",
            "p",
            "--partition",
            "1",
            "--offset",
            "1",
            "--max-messages",
            "2",
            "--print-offset",
            "--print-key",
        )
    )
    assert out == "Offset:1\tk1\tv1\nOffset:2\tk2\tv2\n"
    empty = logbus(
        broker, "consume", "p", "--partition", "0", "--offset", "earliest", "--timeout-ms", "500"
    )
    assert empty.returncode == 0
    assert empty.stdout == ""
    assert "Processed a total of 0 messages" in empty.stderr
    for command in ("consume", "produce"):
        assert "Topic 'p' has no partition 7" in one_error_line(
            logbus(broker, command, "p", "--partition", "7", stdin=b"x\n")
        )


def test_consume_starts_at_the_end_by_default(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "live"))
    ok(logbus(broker, "produce", "live", stdin=b"old\n"))
    consumer = subprocess.Popen(
        [
            *CLI,
            "consume",
            "live",
            "--max-messages",
            "1",
            "--timeout-ms",
            "20000",
            "--bootstrap-server",
            broker.bootstrap,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Keep producing until the consumer, wherever it started, has seen a record.
        deadline = time.monotonic() + 30
        while consumer.poll() is None and time.monotonic() < deadline:
            ok(logbus(broker, "produce", "live", stdin=b"new\n"))
            time.sleep(0.3)
        out, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    assert out == "new\n"


def test_null_marker_and_invalid_utf8(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "odd"))
    ok(
        logbus(
            broker,
            "produce",
            "odd",
            "--parse-key",
            "--property",
            "null.marker=NULL",
            stdin=b"NULL\tNULL\nk\t\xff\xfe\n",
        )
    )
    assert consume_all(broker, "odd", 2, "--print-key") == ["null\tnull", "k\t\ufffd\ufffd"]


def test_unknown_topics(broker_factory: Any) -> None:
    broker = broker_factory(auto_create_topics_enable="false")
    for command in (["consume", "ghost"], ["produce", "ghost"], ["topics", "describe", "ghost"]):
        line = one_error_line(logbus(broker, *command, stdin=b"x\n"))
        assert "Topic 'ghost' does not exist" in line


def test_auto_created_on_produce(broker: Any) -> None:
    ok(logbus(broker, "produce", "fresh", stdin=b"hello\n"))
    assert consume_all(broker, "fresh", 1) == ["hello"]


def test_missing_key_separator_is_reported(broker: Any) -> None:
    ok(logbus(broker, "topics", "create", "strict"))
    line = one_error_line(
        logbus(broker, "produce", "strict", "--parse-key", stdin=b"a\tb\nbroken\n")
    )
    assert line == "logbus: error: No key separator found on line number 2: 'broken'"


def test_keys_land_where_kafka_python_puts_them(broker: Any) -> None:
    """Same key, same partition, whichever client wrote it (both use Kafka's murmur2)."""
    from kafka import KafkaProducer

    ok(logbus(broker, "topics", "create", "shared", "--partitions", "5"))
    keys = [f"key-{i}" for i in range(40)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        for key in keys:
            producer.send("shared", key=key.encode(), value=b"kafka-python")
        producer.flush(30)
    finally:
        producer.close(10)
    ok(logbus(broker, "produce", "shared", "--parse-key",
              stdin="".join(f"{key}\tlogbus\n" for key in keys).encode()))
    out = consume_all(broker, "shared", 2 * len(keys), "--print-partition", "--print-key")
    partitions: dict[str, set[str]] = collections.defaultdict(set)
    for line in out:
        partition, key, _ = line.split("\t")
        partitions[key].add(partition)
    assert sorted(partitions) == sorted(keys)
    assert all(len(seen) == 1 for seen in partitions.values()), partitions
