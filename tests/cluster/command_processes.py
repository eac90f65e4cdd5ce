"""Long-running `logbus` commands as a user runs them (`cluster up`, `mirror`, ...): a
subprocess whose output is collected line by line, and free port ranges for them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

CLI = [sys.executable, "-m", "logbus.cli.main"]


class CommandProcess:
    """A running command, its stdout collected line by line (stderr read once it exited).
    `close()` stops it with SIGTERM (SIGKILL after a minute) if it still runs."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else {**os.environ},
            cwd=cwd,
        )
        self._stderr: list[bytes] = []
        # stderr is read as it comes too: a chatty command must never block on a full pipe
        self.readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.append(line.decode("utf-8", errors="replace").rstrip("\n"))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        descriptor = self.proc.stderr.fileno()
        while chunk := os.read(descriptor, 65536):
            self._stderr.append(chunk)

    def wait_for_line(self, prefix: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no line starting {prefix!r}; output: {self.lines} {self.stderr()}")

    def stderr(self) -> str:
        """What the command wrote to stderr, once it has exited ("" before)."""
        if self.proc.poll() is None:
            return ""
        self.readers[1].join(10)
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def finish(self, timeout: float = 90) -> tuple[int, str]:
        status = self.proc.wait(timeout)
        self.readers[0].join(10)
        return status, self.stderr()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for reader in self.readers:
            reader.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class ClusterUp(CommandProcess):
    """A running `logbus cluster up --data-dir data_dir ARGS`."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        super().__init__([*CLI, "cluster", "up", "--data-dir", str(data_dir), *args], env=env)
