"""The `logbus` command's argument handling and error reporting, with no broker running."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from logbus.cli.main import build_parser, main


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exit_status(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(argv)
    return int(info.value.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["produce", "t", "--acks", "2"],
        ["produce", "t", "--acks", "none"],
        ["produce", "t", "--compression", "brotli"],
        ["produce", "t", "--partition", "-1"],
        ["produce", "t", "--property", "parse.key"],
        ["produce", "t", "--property", "no.such=1"],
        ["produce", "t", "--property", "parse.key=maybe"],
        ["produce", "t", "--key-separator", ""],
        ["consume", "t", "--offset", "5"],
        ["consume", "t", "--partition", "0", "--offset", "5", "--from-beginning"],
        ["consume", "t", "--partition", "0", "--offset", "-3"],
        ["consume", "t", "--partition", "0", "--offset", "soon"],
        ["consume", "t", "--max-messages", "x"],
        ["consume", "t", "--property", "print.colour=true"],
        ["topics", "create", "t", "--partitions", "0"],
        ["topics", "create", "t", "--config", "retention.ms"],
        ["topics", "alter", "t"],
        ["topics", "list", "--bootstrap-server", "localhost:notaport"],
        ["topics", "list", "--bootstrap-server", ","],
        ["topics"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err
    assert "Traceback" not in err


def test_server_start_arguments() -> None:
    args = build_parser().parse_args(
        [
            "server",
            "start",
            "config/server.properties",
            "--override",
            "broker.id=3",
            "--override",
            "log.dirs=/tmp/a=b",
        ]
    )
    assert args.properties == "config/server.properties"
    assert args.override == ["broker.id=3", "log.dirs=/tmp/a=b"]
    assert args.log_level == "INFO"
    bare = build_parser().parse_args(["server", "start"])
    assert bare.properties is None
    assert bare.override == []


def test_defaults() -> None:
    parser = build_parser()
    produce = parser.parse_args(["produce", "t"])
    assert produce.bootstrap_server == "localhost:9092"
    assert produce.acks == "all"
    assert produce.compression == "none"
    consume = parser.parse_args(["consume", "t", "--bootstrap-server", "[::1]:9093,b:1"])
    assert consume.bootstrap_server == "[::1]:9093,b:1"
    assert consume.partition is None
    assert consume.offset is None
    create = parser.parse_args(["topics", "create", "t", "--config", "a=b=c", "--config", "x="])
    assert create.config == [("a", "b=c"), ("x", "")]


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list"],
        ["topics", "describe", "t"],
        ["topics", "create", "t"],
        ["topics", "delete", "t"],
        ["consume", "t", "--from-beginning"],
    ],
)
def test_unreachable_broker_exits_1_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    assert main([*argv, "--bootstrap-server", address]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0] == f"logbus: error: cannot connect to {address}: Connection refused"


def test_unreachable_broker_as_a_process() -> None:
    """The installed entry point: one line on stderr, no traceback, exit status 1."""
    address = f"127.0.0.1:{closed_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "produce", "t", "--bootstrap-server", address],
        input=b"hello\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert proc.stderr.decode().splitlines() == [
        f"logbus: error: cannot connect to {address}: Connection refused"
    ]


def test_every_bootstrap_server_is_tried(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = closed_port(), closed_port()
    servers = f"127.0.0.1:{first},127.0.0.1:{second}"
    assert main(["topics", "list", "--bootstrap-server", servers]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert f"127.0.0.1:{first}" in err
    assert f"127.0.0.1:{second}" in err


def test_a_command_imports_only_its_own_module() -> None:
    # in a fresh interpreter: this one has imported every command already
    probe = (
        "import sys\n"
        "from logbus.cli.main import COMMANDS, build_parser\n"
        "build_parser('topics').parse_args(['topics', 'list'])\n"
        "others = [m for m in COMMANDS.values() if m != 'topics']\n"
        "print(sorted(m for m in others if f'logbus.cli.{m}' in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout
