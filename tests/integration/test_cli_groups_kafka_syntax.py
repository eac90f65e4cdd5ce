"""`logbus groups` in kafka-consumer-groups' syntax (`--reset-offsets --group G ...`,
`--delete-offsets`, `--describe --group G`) against a real broker, with the groups of real
confluent-kafka consumers: what `--execute` commits is where such a consumer resumes."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from cli_runs import CLI, failed, ok, run_cli
from confluent_kafka import Consumer, Producer, TopicPartition

HOUR_MS = 3_600_000


def groups(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """kafka-consumer-groups' order: the bootstrap server first, then the action."""
    return run_cli("groups", "--bootstrap-server", broker.bootstrap, *args)


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:] if line.strip()]


def status_rows(text: str) -> list[list[str]]:
    """The rows of --delete-offsets' TOPIC PARTITION STATUS table (cells may hold spaces)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[0].split() == ["TOPIC", "PARTITION", "STATUS"]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[1:]]


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(broker: Any, partitions: int, timestamps: list[int]) -> str:
    """A topic whose every partition holds one record per timestamp (offsets 0..n-1)."""
    topic = new_name("t")
    ok(cli_create_topic(broker, topic, partitions))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(partitions):
        for i, ms in enumerate(timestamps):
            producer.produce(topic, f"p{p}-{i}".encode(), partition=p, timestamp=ms)
    assert producer.flush(30) == 0
    return topic


def cli_create_topic(broker: Any, topic: str, partitions: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
         "--partitions", str(partitions)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture
def consumers(fast_broker: Any) -> Iterator[Any]:
    """confluent-kafka consumers of the test's groups, closed at the end."""
    made: list[Consumer] = []

    def make(group: str, **extra: Any) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": fast_broker.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                **extra,
            }
        )
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def committed(make: Any, group: str, topic: str, partitions: int = 1) -> list[int]:
    consumer = make(group)
    asked = [TopicPartition(topic, p) for p in range(partitions)]
    return [tp.offset for tp in consumer.committed(asked, timeout=20)]


def resumes_at(make: Any, group: str, topic: str) -> int:
    """The offset of the first record a consumer of the group reads from partition 0
    (it starts at the group's committed offset)."""
    consumer = make(group)
    consumer.assign([TopicPartition(topic, 0)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            offset: int = message.offset()
            return offset
    raise AssertionError("no record read")


def plan(text: str) -> dict[int, int]:
    """PARTITION -> NEW-OFFSET of a reset's table."""
    return {int(row[2]): int(row[3]) for row in table(text)}


def test_every_reset_strategy(fast_broker: Any, consumers: Any, tmp_path: Any) -> None:
    now = int(time.time() * 1000)
    # Offsets 0-4 written two hours ago, 5-9 a quarter of an hour ago.
    stamps = [now - 2 * HOUR_MS + i for i in range(5)] + [now - HOUR_MS // 4 + i for i in range(5)]
    topic = make_topic(fast_broker, 1, stamps)
    group = new_name("g")
    seed = consumers(group)
    seed.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)

    def reset(*args: str) -> str:
        return ok(groups(fast_broker, "--reset-offsets", "--group", group, *args))

    def dry_run(*args: str) -> int:
        """The planned offset; asserts nothing was committed."""
        before = committed(consumers, group, topic)
        printed = reset("--topic", topic, *args)
        assert printed.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        assert committed(consumers, group, topic) == before
        return plan(printed)[0]

    def execute(*args: str) -> int:
        new = plan(reset("--topic", topic, *args, "--execute"))[0]
        assert committed(consumers, group, topic) == [new]
        return new

    assert dry_run("--to-earliest") == 0  # --dry-run is the default
    assert dry_run("--to-earliest", "--dry-run") == 0
    assert execute("--to-earliest") == 0
    assert resumes_at(consumers, group, topic) == 0

    assert execute("--to-offset", "7") == 7
    assert resumes_at(consumers, group, topic) == 7
    assert dry_run("--to-current") == 7
    assert execute("--shift-by", "-2") == 5
    assert resumes_at(consumers, group, topic) == 5
    assert dry_run("--shift-by", "100") == 10  # clamped to the log end
    assert dry_run("--shift-by", "-100") == 0  # and to the log start
    assert dry_run("--to-offset", "99") == 10
    assert dry_run("--to-offset", "-5") == 0  # below the log start: moved there, as Kafka
    assert execute("--to-latest") == 10

    twenty_minutes_ago = datetime.now(UTC) - timedelta(minutes=20)
    utc = twenty_minutes_ago.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert dry_run("--to-datetime", utc) == 5
    plus_two = twenty_minutes_ago.astimezone(timezone(timedelta(hours=2)))
    with_offset = plus_two.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+02:00"
    assert execute("--to-datetime", with_offset) == 5
    assert resumes_at(consumers, group, topic) == 5
    assert execute("--by-duration", "PT3H") == 0
    assert execute("--by-duration", "PT30M") == 5
    assert dry_run("--by-duration", "PT1M") == 10  # nothing that recent: the log end

    # --export writes the plan as the CSV --from-file reads.
    exported = reset("--topic", topic, "--to-offset", "8", "--export")
    assert exported == f"{topic},0,8\n"
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(exported)
    assert plan(reset("--from-file", str(plan_file), "--execute")) == {0: 8}
    assert resumes_at(consumers, group, topic) == 8
    assert ok(groups(fast_broker, "--delete", "--all-groups")) == (
        f"Deletion of requested consumer groups ('{group}') was successful.\n"
    )
    assert ok(groups(fast_broker, "--list")) == ""


def test_reset_several_partitions_and_groups(fast_broker: Any, consumers: Any) -> None:
    now = int(time.time() * 1000)
    topic = make_topic(fast_broker, 2, [now + i for i in range(6)])
    first, second = new_name("g"), new_name("g")
    for group in (first, second):
        consumers(group).commit(
            offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 2)], asynchronous=False
        )
    printed = ok(
        groups(fast_broker, "--reset-offsets", "--group", first, "--group", second,
               "--all-topics", "--shift-by", "3", "--execute")
    )  # fmt: skip
    assert table(printed) == [
        [first, topic, "0", "4"],
        [first, topic, "1", "5"],
        [second, topic, "0", "4"],
        [second, topic, "1", "5"],
    ]
    assert committed(consumers, first, topic, 2) == [4, 5]
    assert committed(consumers, second, topic, 2) == [4, 5]
    exported = ok(
        groups(fast_broker, "--reset-offsets", "--group", first, "--group", second,
               "--topic", f"{topic}:1", "--to-earliest", "--export")
    )  # fmt: skip
    assert exported == f"{first},{topic},1,0\n{second},{topic},1,0\n"


def test_active_group_is_refused_and_described(fast_broker: Any, consumers: Any) -> None:
    topic = make_topic(fast_broker, 1, [int(time.time() * 1000)] * 3)
    group = new_name("g")
    member = consumers(group)
    member.subscribe([topic])
    deadline = time.monotonic() + 30
    while not member.assignment():
        assert time.monotonic() < deadline, "no assignment"
        member.poll(0.2)
    member.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)

    refused = groups(fast_broker, "--reset-offsets", "--group", group, "--all-topics",
                     "--to-earliest", "--execute")  # fmt: skip
    assert failed(refused) == (
        f"logbus: error: Assignments can only be reset if the group '{group}' is inactive, "
        "but the current state is Stable."
    )
    assert committed(consumers, group, topic) == [1]
    # OffsetDelete refuses the topics a live group consumes.
    subscribed = groups(fast_broker, "--delete-offsets", "--group", group, "--topic", topic)
    assert "partition level error" in failed(subscribed)
    assert status_rows(subscribed.stdout) == [
        [topic, "0", "Error: Deleting offsets of a topic is forbidden while the consumer "
         "group is actively subscribed to it."]
    ]  # fmt: skip
    assert committed(consumers, group, topic) == [1]

    members = table(ok(groups(fast_broker, "--describe", "--group", group, "--members")))
    assert [(row[0], row[-1]) for row in members] == [(group, "1")]
    state = table(ok(groups(fast_broker, "--describe", "--group", group, "--state")))
    assert state[0][0] == group and "Stable" in state[0]
    offsets = table(ok(groups(fast_broker, "--describe", "--group", group, "--offsets")))
    assert offsets[0][:6] == [group, topic, "0", "1", "3", "2"]
    assert group in ok(groups(fast_broker, "--list")).split()
    assert "not empty" in failed(groups(fast_broker, "--delete", "--group", group))


def test_delete_offsets(fast_broker: Any, consumers: Any) -> None:
    now = int(time.time() * 1000)
    kept, dropped = make_topic(fast_broker, 1, [now]), make_topic(fast_broker, 2, [now, now])
    group = new_name("g")
    consumers(group).commit(
        offsets=[TopicPartition(kept, 0, 1), TopicPartition(dropped, 0, 2),
                 TopicPartition(dropped, 1, 1)],
        asynchronous=False,
    )  # fmt: skip
    deleted = groups(fast_broker, "--delete-offsets", "--group", group, "--topic", dropped)
    assert ok(deleted).splitlines()[0] == (
        f"Request succeed for deleting offsets with topic {dropped} group {group}"
    )
    assert status_rows(deleted.stdout.split("\n\n", 1)[1]) == [
        [dropped, "0", "Successful"],
        [dropped, "1", "Successful"],
    ]
    described = table(ok(groups(fast_broker, "--describe", "--group", group)))
    assert [(row[1], row[3]) for row in described] == [(kept, "1")]
    assert committed(consumers, group, dropped, 2) == [-1001, -1001]  # no committed offset

    missing = new_name("a-missing")  # sorted before "t-..."
    partly = groups(fast_broker, "--delete-offsets", "--group", group, "--topic", missing,
                    "--topic", f"{kept}:0")  # fmt: skip
    assert "partition level error" in failed(partly)
    assert status_rows(partly.stdout) == [
        [missing, "Not Provided", "Error: This server does not host this topic-partition."],
        [kept, "0", "Successful"],
    ]
    ghost = new_name("ghost")
    assert failed(groups(fast_broker, "--delete-offsets", "--group", ghost, "--topic", kept)) == (
        f"logbus: error: '{ghost}' does not exist."
    )


def test_bad_input_exits_1(fast_broker: Any) -> None:
    one_action = (
        "logbus: error: Command must include exactly one action: --list, --describe, "
        "--delete, --reset-offsets, --delete-offsets"
    )
    assert failed(groups(fast_broker, "--list", "--describe")) == one_action
    assert failed(groups(fast_broker, "--group", "g")) == one_action
    ghost = new_name("ghost")
    assert failed(groups(fast_broker, "--describe", "--group", ghost)) == (
        f"logbus: error: Consumer group '{ghost}' does not exist."
    )
    bad_time = groups(fast_broker, "--reset-offsets", "--group", "g", "--all-topics",
                      "--to-datetime", "2024-13-45T99:00:00.000")  # fmt: skip
    assert "expected YYYY-MM-DDTHH:mm:SS.sss" in failed(bad_time)
    not_a_number = groups(fast_broker, "--reset-offsets", "--group", "g", "--all-topics",
                          "--to-offset", "five")  # fmt: skip
    assert "expected an offset, got 'five'" in failed(not_a_number)
    no_scope = groups(fast_broker, "--reset-offsets", "--group", "g", "--to-earliest")
    assert "--topic --all-topics" in failed(no_scope)
    no_target = groups(fast_broker, "--reset-offsets", "--group", "g", "--all-topics")
    assert "--to-earliest" in failed(no_target)
    two_groups = groups(fast_broker, "--delete-offsets", "--group", "a", "--group", "b",
                        "--topic", "t")  # fmt: skip
    assert "exactly one group" in failed(two_groups)
