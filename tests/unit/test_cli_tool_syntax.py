"""Kafka's tool syntax (`--create --topic T`) turned into logbus's action words, with no
broker: what is rewritten, what is left to argparse, what is refused."""

from __future__ import annotations

import pytest

from logbus.cli import groups, topics
from logbus.cli.main import main
from logbus.cli.tool_syntax import ToolSyntaxError, translate

SYNTAXES = [topics.SYNTAX, groups.SYNTAX]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["topics", "--bootstrap-server", "b:9092", "--create", "--topic", "t"],
            ["topics", "create", "--bootstrap-server", "b:9092", "--topic", "t"],
        ),
        (["topics", "--topic", "t", "--describe"], ["topics", "describe", "--topic", "t"]),
        (
            ["groups", "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
            ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
        ),
        (
            ["groups", "--group", "g", "--delete-offsets"],
            ["groups", "delete-offsets", "--group", "g"],
        ),
    ],
)
def test_kafka_style_is_rewritten(argv: list[str], expected: list[str]) -> None:
    assert translate(argv, SYNTAXES) == (expected, True)


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "create", "t", "--partitions", "3"],
        ["topics", "describe", "--topic", "t"],
        ["groups", "reset-offsets", "g", "--all-topics", "--to-latest"],
        ["groups", "--help"],
        ["topics"],
        ["topics", "creat", "t"],  # a mistyped action word: argparse lists the choices
        ["consume", "--list"],  # not a command with actions
        [],
    ],
)
def test_logbus_syntax_is_left_alone(argv: list[str]) -> None:
    assert translate(argv, SYNTAXES) == (argv, False)


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--create", "--delete", "--topic", "t"],
        ["topics", "--bootstrap-server", "b:9092"],
        ["groups", "--list", "--describe"],
        ["groups", "--group", "g"],
    ],
)
def test_not_exactly_one_action(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ToolSyntaxError, match="Command must include exactly one action"):
        translate(argv, SYNTAXES)
    assert main(argv) == 1
    assert capsys.readouterr().err.startswith(
        "logbus: error: Command must include exactly one action: --list, --describe"
    )


def test_usage_errors_exit_1_in_kafka_syntax_and_2_in_logbus_syntax(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["topics", "--create", "--topic", "t", "--partitions", "0"]) == 1
    assert "must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["topics", "create", "t", "--partitions", "0"])
    assert info.value.code == 2
