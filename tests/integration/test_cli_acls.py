"""`logbus acls` as a subprocess against a broker with the ACL authorizer: kafka-acls'
options and output, the ACLs stored as asked, and a one-line error with exit status 1
(nothing stored) for bad principals, operations and pattern types.

The CLI connects anonymously (no SASL yet), so the broker makes User:ANONYMOUS a super
user; the ACLs it writes are checked by principals from `acl_helpers`."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from acl_helpers import ALICE, AUTHORIZER, assign_principals, call

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation as Op

CLI = [sys.executable, "-m", "logbus.cli.main", "acls"]


@pytest.fixture
def secured_broker(broker_factory: Any) -> Any:
    running = broker_factory(authorizer_class_name=AUTHORIZER, super_users="User:ANONYMOUS")
    assign_principals(running)
    return running


def acls(broker: Any, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=stdin,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def stored(broker: Any) -> list[tuple[int, str, int, str, int, int]]:
    body = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    r = call(broker.bootstrap, "cli-check", ApiKey.DESCRIBE_ACLS, body)
    return sorted(
        (x["resource_type"], x["resource_name"], x["pattern_type"], a["principal"],
         a["operation"], a["permission_type"])
        for x in r["resources"]
        for a in x["acls"]
    )  # fmt: skip


def test_add_list_and_remove(secured_broker: Any) -> None:
    out = ok(
        acls(secured_broker, "--add", "--allow-principal", ALICE, "--operation", "Read",
             "--operation", "describe", "--topic", "orders")
    )  # fmt: skip
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, " \
        "patternType=LITERAL)`" in out  # fmt: skip
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out
    assert stored(secured_broker) == [
        (2, "orders", 3, ALICE, Op.READ, 3),
        (2, "orders", 3, ALICE, Op.DESCRIBE, 3),
    ]
    listed = ok(acls(secured_broker, "--list", "--topic", "orders"))
    assert listed.count("operation=") == 2
    assert ok(acls(secured_broker, "--list", "--topic", "other")).strip() == ""
    # without --force the removal asks; "n" keeps everything
    kept = acls(secured_broker, "--remove", "--topic", "orders", stdin="n\n")
    assert kept.returncode == 1 and len(stored(secured_broker)) == 2
    removed = ok(acls(secured_broker, "--remove", "--force", "--topic", "orders",
                      "--operation", "Read"))  # fmt: skip
    assert "operation=READ" in removed
    assert stored(secured_broker) == [(2, "orders", 3, ALICE, Op.DESCRIBE, 3)]


def test_producer_and_consumer_convenience_sets(secured_broker: Any) -> None:
    ok(acls(secured_broker, "--add", "--allow-principal", ALICE, "--producer", "--topic",
            "in-", "--resource-pattern-type", "prefixed", "--transactional-id", "tx"))
    ok(acls(secured_broker, "--add", "--allow-principal", ALICE, "--consumer", "--topic",
            "out", "--group", "g"))  # fmt: skip
    assert stored(secured_broker) == sorted([
        (2, "in-", 4, ALICE, Op.WRITE, 3),
        (2, "in-", 4, ALICE, Op.DESCRIBE, 3),
        (2, "in-", 4, ALICE, Op.CREATE, 3),
        (5, "tx", 4, ALICE, Op.WRITE, 3),
        (5, "tx", 4, ALICE, Op.DESCRIBE, 3),
        (2, "out", 3, ALICE, Op.READ, 3),
        (2, "out", 3, ALICE, Op.DESCRIBE, 3),
        (3, "g", 3, ALICE, Op.READ, 3),
    ])  # fmt: skip
    # the ACLs work: alice may describe in-anything, not others
    body = {"topics": [{"name": "in-x"}, {"name": "other"}], "allow_auto_topic_creation": False}
    codes = [t["error_code"] for t in call(secured_broker.bootstrap, ALICE, ApiKey.METADATA,
                                           body)["topics"]]  # fmt: skip
    assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_deny_and_cluster(secured_broker: Any) -> None:
    ok(acls(secured_broker, "--add", "--deny-principal", "User:*", "--deny-host", "10.0.0.1",
            "--operation", "Alter", "--cluster"))  # fmt: skip
    assert stored(secured_broker) == [(4, "kafka-cluster", 3, "User:*", Op.ALTER, 2)]
    listing = ok(acls(secured_broker, "--list", "--cluster"))
    assert "host=10.0.0.1, operation=ALTER, permissionType=DENY" in listing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--add", "--allow-principal", "alice", "--topic", "t"], "invalid principal"),
        (["--add", "--allow-principal", ALICE, "--operation", "Fly", "--topic", "t"],
         "unknown --operation"),
        (["--add", "--allow-principal", ALICE, "--operation", "ClusterAction", "--topic", "t"],
         "Topic does not have the operation(s) ClusterAction"),
        (["--add", "--allow-principal", ALICE, "--topic", "t", "--resource-pattern-type",
          "match"], "--add takes only literal or prefixed patterns"),
        (["--add", "--allow-principal", ALICE, "--topic", "t", "--resource-pattern-type",
          "wild"], "invalid --resource-pattern-type"),
        (["--add", "--allow-principal", ALICE], "--add needs a resource"),
        (["--add", "--topic", "t"], "--add needs --allow-principal or --deny-principal"),
        (["--add", "--allow-principal", ALICE, "--consumer", "--topic", "t"],
         "--consumer needs --group"),
    ],
)  # fmt: skip
def test_bad_input_is_one_error_line_and_nothing_stored(
    secured_broker: Any, args: list[str], message: str
) -> None:
    result = acls(secured_broker, *args)
    assert result.returncode == 1, (result.stdout, result.stderr)
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert stored(secured_broker) == []


def test_a_broker_without_authorizer_says_so(broker: Any) -> None:
    result = acls(broker, "--add", "--allow-principal", ALICE, "--topic", "t")
    assert result.returncode == 1
    assert "SECURITY_DISABLED" in result.stderr
