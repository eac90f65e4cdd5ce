"""Broker loggers' levels changed at run time (KIP-412): DescribeConfigs and
IncrementalAlterConfigs on the BROKER_LOGGER resource, from kafka-python's admin client
(confluent-kafka's ResourceType has no BROKER_LOGGER) and from `logbus configs`.

The in-process broker shares this process's loggers, so those tests put every level back
(`levels`); the tests that read the broker's log run it as a `logbus server start`
subprocess.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode

CLI = [sys.executable, "-m", "logbus.cli.main"]
LOGGER = ConfigResourceType.BROKER_LOGGER
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DESCRIBE_LINE = "DEBUG logbus.server.api.configs: describing"


@pytest.fixture
def levels() -> Iterator[None]:
    """Every logger's own level as it was before the test, restored after it."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    saved = {logger: logger.level for logger in loggers}
    yield
    for logger, level in saved.items():
        logger.setLevel(level)
    for logger in logging.Logger.manager.loggerDict.values():
        if isinstance(logger, logging.Logger) and logger not in saved:
            logger.setLevel(logging.NOTSET)


@pytest.fixture
def admin_for() -> Iterator[Any]:
    admins: list[KafkaAdminClient] = []

    def make(bootstrap: str) -> KafkaAdminClient:
        admins.append(KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000))
        return admins[-1]

    yield make
    for admin in admins:
        admin.close()


def describe(admin: KafkaAdminClient, *names: str) -> dict[str, dict[str, Any]]:
    resource = ConfigResource(LOGGER, "0", list(names) or None)
    found = admin.describe_configs([resource], config_filter="all")
    return found["broker_logger"]["0"]  # type: ignore[no-any-return]


def alter(admin: KafkaAdminClient, ops: dict[str, Any], validate_only: bool = False) -> str:
    resource = ConfigResource(LOGGER, "0", ops)
    answer = admin.alter_configs([resource], validate_only=validate_only, raise_on_unknown=False)
    return str(answer["broker_logger"]["0"])


def level(admin: KafkaAdminClient, name: str) -> str:
    return str(describe(admin, name)[name]["value"])


def test_describe_lists_the_broker_loggers(broker: Any, admin_for: Any, levels: None) -> None:
    logging.getLogger("asyncio")  # a logger of the process, not of the broker
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("logbus.server").setLevel(logging.ERROR)
    found = describe(admin_for(broker.bootstrap))
    names = list(found)
    assert names[0] == "root"
    assert names[1:] == sorted(names[1:])
    assert {"kafka.request.logger", "logbus.server.api.configs", "logbus.server"} <= set(names)
    assert all(n.startswith(("logbus", "kafka")) for n in names[1:]), names
    assert "asyncio" not in names
    assert found["root"]["value"] == "WARN"
    # effective levels: a logger without a level of its own shows its ancestor's
    assert found["logbus.server.api.configs"]["value"] == "ERROR"
    assert found["logbus.controller"]["value"] == "WARN"
    for entry in found.values():
        assert entry["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
        assert entry["read_only"] is False
        assert entry["is_sensitive"] is False
    # naming loggers returns only them; an unknown name is left out, as Kafka does
    assert set(describe(admin_for(broker.bootstrap), "root", "no.such.logger")) == {"root"}


def test_a_logger_created_after_start_is_listed_and_settable(
    broker: Any, admin_for: Any, levels: None
) -> None:
    admin = admin_for(broker.bootstrap)
    assert "logbus.plugins.late" not in describe(admin)
    late = logging.getLogger("logbus.plugins.late")
    assert "logbus.plugins.late" in describe(admin)
    assert alter(admin, {"logbus.plugins.late": "DEBUG"}) == "OK"
    assert late.level == logging.DEBUG
    assert level(admin, "logbus.plugins.late") == "DEBUG"


def test_set_trace_on_a_package_then_delete(broker: Any, admin_for: Any, levels: None) -> None:
    admin = admin_for(broker.bootstrap)
    logging.getLogger().setLevel(logging.INFO)
    assert level(admin, "logbus.server.replica.partition") == "INFO"
    assert alter(admin, {"logbus.server.replica": "TRACE"}) == "OK"
    assert logging.getLogger("logbus.server.replica").level == 5
    assert logging.getLevelName(5) == "TRACE"
    found = describe(admin, "logbus.server.replica", "logbus.server.replica.partition")
    assert {name: e["value"] for name, e in found.items()} == {
        "logbus.server.replica": "TRACE",
        "logbus.server.replica.partition": "TRACE",
    }
    assert alter(admin, {"logbus.server.replica": (AlterConfigOp.DELETE, None)}) == "OK"
    assert logging.getLogger("logbus.server.replica").level == logging.NOTSET
    assert level(admin, "logbus.server.replica.partition") == "INFO"  # the root's again
    # the root logger's own level moves every logger without one
    assert alter(admin, {"root": "ERROR"}) == "OK"
    assert level(admin, "logbus.server.replica") == "ERROR"


def test_validate_only_changes_nothing(broker: Any, admin_for: Any, levels: None) -> None:
    admin = admin_for(broker.bootstrap)
    before = describe(admin)
    assert alter(admin, {"logbus.server": "FATAL", "root": "TRACE"}, validate_only=True) == "OK"
    assert describe(admin) == before
    assert logging.getLogger("logbus.server").level == logging.NOTSET


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ({"logbus.server": "LOUD"}, "InvalidConfigurationError: Cannot set the log level"),
        ({"logbus.server": "debug"}, "InvalidConfigurationError"),  # names are case-sensitive
        ({"logbus.server": "OFF"}, "InvalidConfigurationError"),  # not one of Kafka's six
        ({"no.such.logger": "INFO"}, "InvalidConfigurationError: Logger no.such.logger does"),
        ({"asyncio": "INFO"}, "InvalidConfigurationError: Logger asyncio does not exist!"),
        ({"root": (AlterConfigOp.DELETE, None)}, "InvalidRequestError: Removing the log level"),
        ({"root": (AlterConfigOp.APPEND, "INFO")}, "InvalidRequestError: APPEND operation"),
        ({"root": (AlterConfigOp.SUBTRACT, "INFO")}, "InvalidRequestError: SUBTRACT operation"),
        # one bad operation refuses the whole resource: the good one is not applied
        ({"logbus.server": "DEBUG", "root": "LOUD"}, "InvalidConfigurationError"),
    ],
)
def test_bad_changes_are_refused(
    broker: Any, admin_for: Any, levels: None, ops: dict[str, Any], error: str
) -> None:
    logging.getLogger("asyncio")
    admin = admin_for(broker.bootstrap)
    before = describe(admin)
    assert error in alter(admin, ops)
    assert describe(admin) == before


def test_the_legacy_alter_configs_is_refused(broker: Any, admin_for: Any, levels: None) -> None:
    admin = admin_for(broker.bootstrap)
    before = describe(admin)
    resource = ConfigResource(LOGGER, "0", {"logbus.server": "DEBUG"})
    answer = admin.alter_configs([resource], raise_on_unknown=False, incremental=False)
    assert "InvalidRequestError" in str(answer["broker_logger"]["0"])
    assert "resource type is BROKER_LOGGER" in str(answer["broker_logger"]["0"])
    assert describe(admin) == before


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("7", "Unexpected broker id, expected 0, but received 7"),
        ("zero", "Broker id must be an integer, but it is: zero"),
        ("", "Broker id must not be empty"),
    ],
)
def test_another_broker_id_is_an_invalid_request(broker: Any, name: str, message: str) -> None:
    with WireClient(broker.bootstrap) as client:
        resource = {
            "resource_type": 8,
            "resource_name": name,
            "configs": [{"name": "root", "config_operation": SET, "value": "DEBUG"}],
        }
        answer = client.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [resource], "validate_only": False}
        )
        [result] = answer["responses"]
        assert (result["error_code"], result["error_message"]) == (
            ErrorCode.INVALID_REQUEST,
            message,
        )
        body = {
            "resources": [{"resource_type": 8, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        }
        [described] = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
        assert described["error_code"] == ErrorCode.INVALID_REQUEST
        assert described["configs"] == []
    assert logging.getLogger().level != logging.DEBUG


# --- the broker's own log, in a `logbus server start` process ----------------------------


def broker_log(proc: Any) -> str:
    return Path(proc.data_dir.parent / f"broker-{proc.port}.log").read_text()


def test_a_debug_line_appears_after_the_change_and_not_before(
    broker_process: Any, admin_for: Any, tmp_path: Path
) -> None:
    proc = broker_process()
    admin = admin_for(proc.bootstrap)
    assert level(admin, "logbus.server.api.configs") == "INFO"
    assert DESCRIBE_LINE not in broker_log(proc)
    assert alter(admin, {"logbus.server.api": "DEBUG"}) == "OK"
    wait_for(lambda: "updating the log level of logbus.server.api to DEBUG" in broker_log(proc))
    assert level(admin, "logbus.server.api.configs") == "DEBUG"
    wait_for(lambda: DESCRIBE_LINE in broker_log(proc))
    assert alter(admin, {"logbus.server.api": (AlterConfigOp.DELETE, None)}) == "OK"
    wait_for(lambda: "unsetting the log level of logbus.server.api" in broker_log(proc))
    count = broker_log(proc).count(DESCRIBE_LINE)
    assert level(admin, "logbus.server.api.configs") == "INFO"
    assert broker_log(proc).count(DESCRIBE_LINE) == count
    # not kept across a restart, as in Kafka
    assert alter(admin, {"root": "ERROR"}) == "OK"
    admin.close()
    assert proc.terminate() == 0
    again = broker_process(data_dir=proc.data_dir, port=proc.port)
    assert level(admin_for(again.bootstrap), "root") == "INFO"


def logbus(proc: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "configs", "--bootstrap-server", proc.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_describe_alter_and_delete(broker_process: Any) -> None:
    proc = broker_process()
    target = ["--entity-type", "broker-loggers", "--entity-name", "0"]
    described = logbus(proc, *target, "--describe")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 0 are:"
    assert lines[1] == "  root=INFO sensitive=false synonyms={}"
    # the request log is off by default (WARN), as Kafka's log4j.properties sets it
    assert "  kafka.request.logger=WARN sensitive=false synonyms={}" in lines
    assert "  logbus.server.api.configs=INFO sensitive=false synonyms={}" in lines

    changed = logbus(
        proc, *target, "--alter", "--add-config", "logbus.server.api=DEBUG,logbus.server=WARN"
    )
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.splitlines() == ["Completed updating config for broker-logger 0."]
    # the shorthand, and every broker when no name is given
    for args in (["--broker-logger", "0"], ["--entity-type", "broker-loggers"]):
        shown = logbus(proc, *args, "--describe").stdout.splitlines()
        assert "  logbus.server.api.configs=DEBUG sensitive=false synonyms={}" in shown
        assert "  logbus.server.network=WARN sensitive=false synonyms={}" in shown
    wait_for(lambda: DESCRIBE_LINE in broker_log(proc))

    deleted = logbus(proc, *target, "--alter", "--delete-config", "logbus.server.api,logbus.server")
    assert deleted.returncode == 0, deleted.stderr
    shown = logbus(proc, *target, "--describe").stdout.splitlines()
    assert "  logbus.server.api.configs=INFO sensitive=false synonyms={}" in shown


BAD_CLI = [
    (
        ["--add-config", "logbus.server=LOUD"],
        "INVALID_CONFIG: Cannot set the log level of logbus.server to LOUD",
    ),
    (["--add-config", "no.such.logger=DEBUG"], "Invalid broker logger(s): no.such.logger"),
    (["--delete-config", "no.such.logger"], "Invalid broker logger(s): no.such.logger"),
    (["--delete-config", "root"], "INVALID_REQUEST: Removing the log level of the root"),
    ([], "nothing to change"),
]


def test_cli_bad_input_is_one_readable_line(broker_process: Any) -> None:
    proc = broker_process()
    target = ["--entity-type", "broker-loggers", "--entity-name", "0", "--alter"]
    for args, message in BAD_CLI:
        result = logbus(proc, *target, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("logbus: error: ") and message in line, line
    other = logbus(proc, "--entity-type", "broker-loggers", "--entity-name", "7", "--describe")
    assert other.returncode == 1
    assert "broker 7" in other.stderr
    assert "root=INFO" in logbus(proc, "--broker-logger", "0", "--describe").stdout
