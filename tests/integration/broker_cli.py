"""`logbus server start` run to completion, for tests of configurations it refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def start_broker(data_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """Start a broker on an ephemeral port with `overrides` ("name=value") and wait for it
    to exit (60 s at most: a broker that starts is killed then, and the test fails)."""
    args = [
        sys.executable, "-m", "logbus.cli.main", "server", "start",
        "--override", "listeners=PLAINTEXT://127.0.0.1:0",
        "--override", f"log.dirs={data_dir}",
    ]  # fmt: skip
    for override in overrides:
        args += ["--override", override]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
