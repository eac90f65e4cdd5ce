"""`logbus topics` in kafka-topics' syntax (`--create --topic T`, the action as an option
anywhere) as a subprocess against a real broker; today's syntax keeps working beside it."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from cli_runs import CLI, failed, ok, run_cli

ONE_ACTION = (
    "logbus: error: Command must include exactly one action: "
    "--list, --describe, --create, --alter or --delete"
)


def topics(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """kafka-topics' order: the bootstrap server first, then the action and its options."""
    return run_cli("topics", "--bootstrap-server", broker.bootstrap, *args)


def error(result: subprocess.CompletedProcess[str]) -> str:
    """The last line of stderr of a command that failed with exit status 1."""
    return failed(result).splitlines()[-1]


def listed(broker: Any, *args: str) -> list[str]:
    return ok(topics(broker, "--list", *args)).split()


def wait_gone(broker: Any, *names: str) -> None:
    deadline = time.monotonic() + 15
    while set(names) & set(listed(broker)):
        assert time.monotonic() < deadline, "the topics are still listed"
        time.sleep(0.2)


def test_kafka_topics_lifecycle(broker: Any) -> None:
    created = topics(
        broker, "--create", "--topic", "orders", "--partitions", "3",
        "--replication-factor", "1", "--config", "retention.ms=60000",
    )  # fmt: skip
    assert ok(created) == "Created topic orders.\n"
    assert "orders" in listed(broker)

    lines = ok(topics(broker, "--describe", "--topic", "orders")).splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert lines[0].endswith("PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000")
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)
    ]
    # The action may come anywhere among the options, as kafka-topics takes it.
    ok(topics(broker, "--topic", "orders", "--partitions", "5", "--alter"))
    assert "PartitionCount: 5" in ok(topics(broker, "--topic", "orders", "--describe"))
    # The same topic in today's syntax.
    today = subprocess.run(
        [*CLI, "topics", "describe", "orders", "--bootstrap-server", broker.bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    topic_id = lines[0].split("\t")[1]
    assert ok(today).splitlines()[0].split("\t")[:3] == [
        "Topic: orders",
        topic_id,
        "PartitionCount: 5",
    ]

    assert "TOPIC_ALREADY_EXISTS" in error(topics(broker, "--create", "--topic", "orders"))
    ok(topics(broker, "--create", "--topic", "orders", "--if-not-exists"))

    ok(topics(broker, "--delete", "--topic", "orders"))
    wait_gone(broker, "orders")
    for action in (["--delete"], ["--describe"], ["--alter", "--partitions", "9"]):
        assert error(topics(broker, *action, "--topic", "orders")) == (
            "logbus: error: Topic 'orders' does not exist as expected"
        )
        ok(topics(broker, *action, "--topic", "orders", "--if-exists"))
    ok(topics(broker, "--describe", "orders", "--if-exists"))


def test_topic_regex_overrides_and_list_filter(broker: Any) -> None:
    for name in ("metrics.cpu", "metrics.mem", "metricsXdisk", "logs"):
        ok(topics(broker, "--create", "--topic", name))
    ok(topics(broker, "--create", "--topic", "compacted", "--config", "cleanup.policy=compact"))

    assert listed(broker, "--topic", r"metrics\..*") == ["metrics.cpu", "metrics.mem"]
    assert listed(broker, "--topic", "logs,compacted") == ["compacted", "logs"]
    described = ok(topics(broker, "--describe", "--topic", r"metrics\..*")).splitlines()
    assert [line.split("\t")[0] for line in described if line.startswith("Topic:")] == [
        "Topic: metrics.cpu",
        "Topic: metrics.mem",
    ]
    # Only the topic line of topics with overrides, no partitions.
    overrides = ok(topics(broker, "--describe", "--topics-with-overrides")).splitlines()
    assert len(overrides) == 1
    assert overrides[0].startswith("Topic: compacted\t")
    assert overrides[0].endswith("Configs: cleanup.policy=compact")

    ok(topics(broker, "--alter", "--topic", r"metrics\..*", "--partitions", "2"))
    counts = ok(topics(broker, "--describe", "--topic", "metrics.*"))
    assert counts.count("PartitionCount: 2") == 2 and counts.count("PartitionCount: 1") == 1

    ok(topics(broker, "--delete", "--topic", r"metrics\..*"))
    wait_gone(broker, "metrics.cpu", "metrics.mem")
    assert {"metricsXdisk", "logs", "compacted"} <= set(listed(broker))


def test_replica_assignment(broker: Any) -> None:
    ok(topics(broker, "--create", "--topic", "placed", "--replica-assignment", "0,0"))
    assert "PartitionCount: 2\tReplicationFactor: 1" in ok(
        topics(broker, "--describe", "--topic", "placed")
    )
    # As kafka-topics: the list names every partition; those beyond the current are added.
    ok(topics(broker, "--alter", "--topic", "placed", "--partitions", "3",
              "--replica-assignment", "0,0,0"))  # fmt: skip
    lines = ok(topics(broker, "--describe", "--topic", "placed")).splitlines()
    assert lines[-1] == "\tTopic: placed\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0"
    assert "INVALID_REPLICA_ASSIGNMENT" in error(
        topics(broker, "--create", "--topic", "nowhere", "--replica-assignment", "7")
    )
    both = topics(broker, "--create", "--topic", "x", "--partitions", "2",
                  "--replica-assignment", "0")  # fmt: skip
    assert error(both) == (
        'logbus: error: Option "[replica-assignment]" can\'t be used with option "[partitions]"'
    )


def test_bad_kafka_style_input_exits_1(broker: Any) -> None:
    assert error(topics(broker, "--create", "--delete", "--topic", "t")) == ONE_ACTION
    assert error(topics(broker, "--topic", "t")) == ONE_ACTION
    assert "kafka-configs" in error(
        topics(broker, "--alter", "--topic", "t", "--partitions", "2", "--config", "a=b")
    )
    # Usage errors exit with status 1 in Kafka's syntax (kafka-topics' status) ...
    assert "must be at least 1" in error(
        topics(broker, "--create", "--topic", "t", "--partitions", "0")
    )
    assert "duplicate" in error(
        topics(broker, "--create", "--topic", "t", "--replica-assignment", "0:0")
    )
    assert "regular expression" in error(topics(broker, "--describe", "--topic", "t[("))
    # ... and with 2 (argparse's) in logbus's own.
    own = subprocess.run(
        [*CLI, "topics", "create", "t", "--partitions", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert own.returncode == 2
    assert "t" not in listed(broker)
