"""Profiles the logbus broker with py-spy while a case runs (`python -m bench --profile`):
samples go to a raw (collapsed stacks) file, summarized as the top frames by own time and
by total time, written next to the results."""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.systems import Unavailable

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::\d+)?\)$")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise Unavailable("py-spy is not installed (bench extra)")
    return found


class Profiler:
    """`py-spy record` attached to `pid` for the duration of a `with` block."""

    def __init__(self, pid: int, raw_path: Path, rate: int = 250) -> None:
        self.pid = pid
        self.raw_path = raw_path
        self.rate = rate
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        self.raw_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [py_spy(), "record", "--pid", str(self.pid), "--format", "raw",
             "--output", str(self.raw_path), "--rate", str(self.rate), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)  # let it attach before the measured work starts
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _short(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    path = match["file"]
    if "/logbus/" in path:
        path = "logbus/" + path.split("/logbus/", 1)[1]
    else:
        path = Path(path).name
    return f"{match['func']} ({path})"


def summarize(raw_path: Path, top: int = 15) -> str:
    """Top frames by own samples and by total samples, as a Markdown-ready text block."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    if raw_path.exists():
        for line in raw_path.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [_short(f) for f in stack.split(";") if f and not f.startswith("process ")
                      and not f.startswith("thread ")]
            if not frames:
                continue
            samples += count
            own[frames[-1]] += count
            for frame in set(frames):
                total[frame] += count
    if not samples:
        return "no samples (py-spy could not attach, or the broker was idle)\n"
    lines = [f"{samples} samples of busy (non-idle) broker threads", "", "by own time:"]
    lines += [f"  {100 * n / samples:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines += ["", "by total time (the frame and what it calls):"]
    lines += [f"  {100 * n / samples:5.1f}%  {f}" for f, n in total.most_common(top)]
    return "\n".join(lines) + "\n"
