"""Functions the bench's `in_subprocess` runs in a child process in
test_bench_smoke.py (a spawned child imports them by name, so they live in a module)."""

from __future__ import annotations

import os
from typing import Any

# Set by the test in the parent: a forked child would see the change, a spawned one not.
MARK = "as imported"


def report(value: float, progress: Any) -> dict[str, float]:
    return {"value": value, "pid": float(os.getpid()), "inherited": float(MARK != "as imported")}


def fail(message: str, progress: Any) -> dict[str, float]:
    raise LookupError(message)


def die(progress: Any) -> dict[str, float]:
    os._exit(3)
