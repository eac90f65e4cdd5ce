"""Running the `logbus` command as a user does, for the CLI tests: a subprocess of this
Python with its exit status, stdout and stderr."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

CLI = [sys.executable, "-m", "logbus.cli.main"]


def run_cli(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv],
        input=(stdin or b"").decode(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that succeeded."""
    assert result.returncode == 0, result.stderr
    return result.stdout


def failed(result: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a command that failed with exit status 1 (a readable error)."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    return result.stderr.strip()


def logbus(
    broker: Any, *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`logbus ARGS --bootstrap-server <broker>`, its output decoded strictly."""
    raw = subprocess.run(
        [*CLI, *args, "--bootstrap-server", broker.bootstrap],
        input=stdin or b"",
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    # The CLI writes UTF-8 whatever the locale; decode strictly to prove it.
    return subprocess.CompletedProcess(
        raw.args, raw.returncode, raw.stdout.decode("utf-8"), raw.stderr.decode("utf-8")
    )
