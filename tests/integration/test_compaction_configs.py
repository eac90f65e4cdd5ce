"""Invalid compaction settings are refused, naming the setting: topic configs with
INVALID_CONFIG on CreateTopics, broker log.cleaner.* settings at start-up."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from kafka_wire import WireClient

INVALID_CONFIG = 40


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "-0.1"),
        ("delete.retention.ms", "-1"),
        ("min.compaction.lag.ms", "-5"),
        ("max.compaction.lag.ms", "0"),
        ("cleanup.policy", "compact,shred"),
    ],
)
def test_invalid_compaction_topic_configs(broker: Any, name: str, value: str) -> None:
    with WireClient(broker.bootstrap) as client:
        error, message = client.create_topic(f"bad-{name}".replace(".", "-"), 1, {name: value})
    assert error == INVALID_CONFIG
    assert message is not None and name in message


def test_min_compaction_lag_above_max_is_refused(broker: Any) -> None:
    configs = {"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "10"}
    with WireClient(broker.bootstrap) as client:
        error, message = client.create_topic("lags", 1, configs)
    assert error == INVALID_CONFIG and message is not None
    assert "min.compaction.lag.ms" in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("log.cleaner.threads", "-1"),
        ("log.cleaner.min.cleanable.ratio", "2"),
        ("log.cleaner.backoff.ms", "-1"),
        ("log.cleaner.dedupe.buffer.size", "1000"),
        ("log.cleaner.io.max.bytes.per.second", "fast"),
        ("log.cleaner.enable", "maybe"),
    ],
)
def test_invalid_cleaner_settings_stop_start_up(tmp_path: Any, name: str, value: str) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "logbus.cli.main",
            "server",
            "start",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"{name}={value}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert name in result.stderr
