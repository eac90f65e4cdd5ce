"""The `logbus` command with security: SCRAM users created and described with
kafka-configs' syntax, then every client command over SASL_SSL with a Kafka-style
--command-config file (sasl.jaas.config, PEM truststore)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from security_support import SCRAM_JAAS, Pki, address, sasl_broker

pytest_plugins = ["secure_fixtures"]

CLI = [sys.executable, "-m", "logbus.cli.main"]


def logbus(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def ok(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_users_and_commands_over_sasl_ssl(secure_broker: Any, pki: Pki, tmp_path: Path) -> None:
    running = sasl_broker(secure_broker, pki)
    plain = ["--bootstrap-server", address(running, "PLAINTEXT")]
    out = ok(logbus(
        "configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "bob",
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
        "SCRAM-SHA-512=[password=bob-secret]",
    ))  # fmt: skip
    assert out == ["Completed updating config for user bob."]
    out = ok(logbus("configs", *plain, "--describe", "--entity-type", "users",
                    "--entity-name", "bob"))  # fmt: skip
    assert out == [
        "SCRAM credential configs for user-principal 'bob' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    ]
    everyone = ok(logbus("configs", *plain, "--describe", "--entity-type", "users"))
    assert len(everyone) == 2  # alice and bob

    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        + "sasl.jaas.config=" + SCRAM_JAAS.replace('"admin"', '"bob"')
        .replace('"admin-secret"', '"bob-secret"') + "\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca.cert_file}\n"
    )  # fmt: skip
    secure = ["--bootstrap-server", address(running, "SASL_SSL"), "--command-config", str(config)]
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    ok(logbus("topics", "create", topic, *secure))
    assert topic in ok(logbus("topics", "list", *secure))
    ok(logbus("produce", topic, *secure, stdin="one\ntwo\n"))
    lines = ok(logbus("consume", topic, *secure, "--from-beginning", "--max-messages", "2",
                      "--group", "cli-group"))  # fmt: skip
    assert lines == ["one", "two"]
    ok(logbus("configs", "describe", "--topic", topic, *secure))
    assert ok(logbus("get-offsets", *secure, "--topic", topic)) == [f"{topic}:0:2"]
    ok(logbus("perf", "produce", "--topic", topic, "--num-records", "10",
              "--record-size", "10", "--throughput", "-1", *secure))  # fmt: skip
    assert ok(logbus("get-offsets", *secure, "--topic", topic)) == [f"{topic}:0:12"]
    dirs = ok(logbus("log-dirs", "--describe", "--topic-list", topic, *secure))
    assert f'"partitions":[{{"partition":"{topic}-0","size":' in dirs[2]

    # without the command config the SASL_SSL listener refuses; with a wrong password too
    refused = logbus("topics", "list", "--bootstrap-server", address(running, "SASL_SSL"))
    assert refused.returncode == 1
    config.write_text(config.read_text().replace("bob-secret", "wrong"))
    refused = logbus("topics", "list", *secure)
    assert refused.returncode == 1
    assert "authentication" in refused.stderr.lower(), refused.stderr
    # deleting a mechanism, and bad input that stores nothing
    ok(logbus("configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "bob",
              "--delete-config", "SCRAM-SHA-256"))  # fmt: skip
    bad = logbus("configs", *plain, "--alter", "--entity-type", "users", "--entity-name", "bob",
                 "--add-config", "SCRAM-SHA-256=[iterations=10,password=x]")  # fmt: skip
    assert bad.returncode == 1 and "terations" in bad.stderr
    out = ok(logbus("configs", *plain, "--describe", "--entity-type", "users",
                    "--entity-name", "bob"))  # fmt: skip
    assert out == ["SCRAM credential configs for user-principal 'bob' are "
                   "SCRAM-SHA-512=iterations=4096"]  # fmt: skip
