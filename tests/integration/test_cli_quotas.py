"""`logbus configs --entity-type users|clients` (kafka-configs' options) as a subprocess
against a real broker: quotas set, described and deleted, a one-line error with exit
status 1 for bad values, nothing stored, and users described without a name as
kafka-configs does (every user's quotas, then every user with SCRAM credentials)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

CLI = [sys.executable, "-m", "logbus.cli.main", "configs"]


def configs(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_set_describe_and_delete_quotas(broker: Any) -> None:
    assert ok(configs(
        broker, "--entity-type", "users", "--entity-name", "alice", "--alter",
        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2048",
    )) == ["Completed updating config for user-principal 'alice'."]
    assert ok(configs(
        broker, "--entity-type", "users", "--entity-name", "alice",
        "--entity-type", "clients", "--entity-default", "--alter",
        "--add-config", "request_percentage=25.5",
    )) == ["Completed updating config for user-principal 'alice', the default client-id."]
    assert ok(configs(
        broker, "--client-defaults", "--alter", "--add-config", "producer_byte_rate=100",
    )) == ["Completed updating config for the default client-id."]
    assert ok(configs(
        broker, "--entity-type", "users", "--entity-name", "alice", "--describe"
    )) == [
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1048576.0"
    ]
    assert ok(configs(broker, "--user", "alice", "--client-defaults", "--describe")) == [
        "Quota configs for user-principal 'alice', the default client-id are "
        "request_percentage=25.5"
    ]
    assert ok(configs(broker, "--entity-type", "clients", "--entity-default", "--describe")) == [
        "Quota configs for the default client-id are producer_byte_rate=100.0"
    ]
    ok(configs(broker, "--user", "alice", "--alter", "--delete-config", "consumer_byte_rate"))
    assert ok(configs(broker, "--entity-type", "users", "--describe")) == [
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0"
    ]
    # the broker applies them
    from logbus.server.quotas.entity import QuotaEntity, QuotaType

    assert broker.broker.quotas.quota(QuotaType.PRODUCE, "bob", "x") == (
        100.0, QuotaEntity(None, "<default>")
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--add-config", "producer_byte_rate=-5"], "must be a non-negative number"),
        (["--add-config", "producer_byte_rate=fast"], "not a number"),
        (["--add-config", "producer_byte_rate"], "expected KEY=VALUE"),
        (["--add-config", "no_such_quota=5"], "Invalid configuration key no_such_quota"),
        (["--add-config", "consumer_byte_rate=1.5"], "must be a Long value"),
        ([], "nothing to change"),
    ],
)
def test_bad_values_exit_1_and_store_nothing(
    broker: Any, args: list[str], message: str
) -> None:
    line = failed(configs(broker, "--entity-type", "clients", "--entity-name", "app",
                          "--alter", *args))
    assert line.startswith("logbus: error: ") and message in line
    assert ok(configs(broker, "--entity-type", "clients", "--describe")) == []
    assert not broker.broker.store.exists("/config/clients/app")


def test_bad_entity_options(broker: Any) -> None:
    assert "--entity-name or --entity-default" in failed(
        configs(broker, "--entity-type", "users", "--alter", "--add-config", "producer_byte_rate=1")
    )
    assert "--alter or --describe" in failed(configs(broker, "--entity-type", "users"))
    assert "--entity-type" in failed(configs(broker))
    usage = configs(broker, "--entity-type", "groups", "--describe")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_describing_users_without_a_name_lists_every_scram_user(broker: Any) -> None:
    """kafka-configs' output: every user's quotas, then every user with SCRAM credentials
    (a user with quotas only has none; one named without credentials prints nothing)."""
    for user, credential in (("bob", "SCRAM-SHA-256=[iterations=8192,password=b]"),
                             ("alice", "SCRAM-SHA-512=[password=a]")):
        ok(configs(broker, "--entity-type", "users", "--entity-name", user, "--alter",
                   "--add-config", credential))  # fmt: skip
    ok(configs(broker, "--user", "carol", "--alter", "--add-config", "producer_byte_rate=1024"))
    assert ok(configs(broker, "--entity-type", "users", "--describe")) == [
        "Quota configs for user-principal 'carol' are producer_byte_rate=1024.0",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192",
    ]
    assert ok(configs(broker, "--entity-type", "users", "--entity-name", "carol",
                      "--describe")) == [
        "Quota configs for user-principal 'carol' are producer_byte_rate=1024.0"
    ]  # fmt: skip
    assert ok(configs(broker, "--entity-type", "users", "--entity-name", "bob",
                      "--describe")) == [
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192"
    ]  # fmt: skip
    assert ok(configs(broker, "--entity-type", "users", "--entity-default", "--describe")) == []
