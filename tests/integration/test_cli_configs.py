"""`logbus configs` and `logbus delete-records` as subprocesses against a real broker:
output in kafka-configs' format, changes reaching the live logs, and a readable one-line
error with exit status 1 (2 for bad arguments) for every bad input."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from kafka_wire import EARLIEST, WireClient
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch

CLI = [sys.executable, "-m", "logbus.cli.main"]


def logbus(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def error_line(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert result.returncode == status, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    if status == 1:
        assert len(lines) == 1, result.stderr
    return lines[-1]


def live_config(broker: Any, topic: str) -> Any:
    return broker.broker.replica_manager.partition(topic, 0).log.config


@pytest.fixture
def topic(broker: Any) -> str:
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("cfg", 1)[0] == ErrorCode.NONE
        for i in range(5):
            batch = build_batch([NewRecord(None, b"%d" % i, (), int(time.time() * 1000))])
            assert client.produce("cfg", 0, batch)["error_code"] == ErrorCode.NONE
    return "cfg"


def test_alter_and_describe_a_topic(broker: Any, topic: str) -> None:
    out = ok(
        logbus(
            broker,
            "configs",
            "alter",
            "--topic",
            topic,
            "--set",
            "retention.ms=60000",
            "--set",
            "cleanup.policy=compact,delete",
        )
    )
    assert out == ["Completed updating config for topic cfg."]
    assert live_config(broker, topic).retention_ms == 60000
    out = ok(logbus(broker, "configs", "describe", "--topic", topic))
    assert out == [
        "Dynamic configs for topic cfg are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    ok(logbus(broker, "configs", "alter", "--topic", topic, "--delete", "retention.ms"))
    assert live_config(broker, topic).retention_ms == 604800000
    out = ok(logbus(broker, "configs", "describe", "--topic", topic, "--all"))
    assert out[0] == "All configs for topic cfg are:"
    assert (
        "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:"
        "log.segment.bytes=1073741824}" in out
    )
    assert len(out) > 20


def test_alter_and_describe_brokers(broker: Any, topic: str) -> None:
    out = ok(
        logbus(broker, "configs", "alter", "--broker-defaults", "--set", "log.retention.ms=5000")
    )
    assert out == ["Completed updating default config for brokers in the cluster."]
    assert live_config(broker, topic).retention_ms == 5000
    out = ok(logbus(broker, "configs", "describe", "--broker-defaults"))
    assert out == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=5000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000}",
    ]
    ok(logbus(broker, "configs", "alter", "--broker", "0", "--set", "log.retention.ms=7000"))
    assert live_config(broker, topic).retention_ms == 7000
    out = ok(logbus(broker, "configs", "describe", "--broker", "0"))
    assert out == [
        "Dynamic configs for broker 0 are:",
        "  log.retention.ms=7000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=7000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    out = ok(logbus(broker, "configs", "describe", "--broker", "0", "--all"))
    assert any(line.startswith("  broker.id=0 ") for line in out)


def test_validate_only(broker: Any, topic: str) -> None:
    out = ok(
        logbus(
            broker,
            "configs",
            "alter",
            "--topic",
            topic,
            "--set",
            "retention.ms=1",
            "--validate-only",
        )
    )
    assert out == ["Validated the config change for topic cfg."]
    assert live_config(broker, topic).retention_ms == 604800000


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["alter", "--topic", "missing", "--set", "retention.ms=1"],
            "logbus: error: UNKNOWN_TOPIC_OR_PARTITION: The topic 'missing' does not exist.",
        ),
        (
            ["describe", "--topic", "missing"],
            "logbus: error: UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            ["alter", "--topic", "cfg", "--set", "retention.ms=soon"],
            "logbus: error: INVALID_CONFIG: Invalid value soon for configuration retention.ms: "
            "Not a number of type LONG",
        ),
        (
            ["alter", "--topic", "cfg", "--set", "retentionms=5"],
            "logbus: error: INVALID_CONFIG: Invalid configuration retentionms: "
            "Unknown topic config name",
        ),
        (
            ["alter", "--broker", "0", "--set", "broker.id=5"],
            "logbus: error: INVALID_REQUEST: Cannot update these configs dynamically: "
            "Set(broker.id)",
        ),
        (
            ["alter", "--broker", "9", "--set", "log.retention.ms=5"],
            "logbus: error: BROKER_NOT_AVAILABLE: broker 9 is not in the metadata",
        ),
        (
            ["alter", "--topic", "cfg"],
            "logbus: error: nothing to change: give --set KEY=VALUE or --delete KEY",
        ),
        (
            ["alter", "--topic", "cfg", "--set", "retention.ms=1", "--delete", "retention.ms"],
            "logbus: error: retention.ms cannot be both set and deleted",
        ),
    ],
)
def test_configs_errors(broker: Any, topic: str, args: list[str], expected: str) -> None:
    line = error_line(logbus(broker, "configs", *args))
    assert line.startswith(expected), line
    assert live_config(broker, topic).retention_ms == 604800000


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["alter", "--topic", "cfg", "--set", "retention.ms"], "expected key=value"),
        (["describe"], "one of the arguments --topic --broker --broker-defaults is required"),
        (["describe", "--topic", "cfg", "--broker", "0"], "not allowed with argument"),
        (["describe", "--broker", "x"], "expected a whole number, got 'x'"),
    ],
)
def test_configs_bad_arguments(broker: Any, args: list[str], expected: str) -> None:
    assert expected in error_line(logbus(broker, "configs", *args), status=2)


def earliest(broker: Any, name: str) -> int:
    with WireClient(broker.bootstrap) as client:
        error, offset, _ = client.list_offset(name, 0, EARLIEST)
    assert error == ErrorCode.NONE
    return offset


def test_delete_records(broker: Any, topic: str) -> None:
    args = ["delete-records", "--topic", topic, "--partition", "0"]
    out = ok(logbus(broker, *args, "--before", "3"))
    assert out == ["Records delete operation completed:", "partition: cfg-0\tlow_watermark: 3"]
    assert earliest(broker, topic) == 3
    out = ok(logbus(broker, *args, "--before", "-1"))
    assert out[-1] == "partition: cfg-0\tlow_watermark: 5"
    assert earliest(broker, topic) == 5


@pytest.mark.parametrize(
    ("args", "status", "expected"),
    [
        (
            ["--topic", "cfg", "--partition", "0", "--before", "50"],
            1,
            "logbus: error: offset 50 is above the high watermark 5 of cfg-0",
        ),
        (
            ["--topic", "nope", "--partition", "0", "--before", "1"],
            1,
            "logbus: error: UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            ["--topic", "cfg", "--partition", "3", "--before", "1"],
            1,
            "logbus: error: UNKNOWN_TOPIC_OR_PARTITION: Topic 'cfg' has no partition 3",
        ),
        (["--topic", "cfg", "--partition", "0", "--before", "-2"], 2, "must be an offset"),
        (["--topic", "cfg", "--partition", "0"], 2, "the following arguments are required"),
    ],
)
def test_delete_records_errors(
    broker: Any, topic: str, args: list[str], status: int, expected: str
) -> None:
    line = error_line(logbus(broker, "delete-records", *args), status)
    assert expected in line, line
    assert earliest(broker, topic) == 0
