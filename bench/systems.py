"""The systems under test, each a subprocess on loopback started and stopped by the harness:
the logbus broker, `redis-server`, and nafka (a pure-Python Kafka broker, run from its own
virtualenv because it needs Python >= 3.12 and kafka-python < 3)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

try:
    import psutil
except ImportError:  # the bench extra is not installed: runs without resource figures fail
    psutil = None

REPO = Path(__file__).resolve().parent.parent
NAFKA_VENV = REPO / "bench" / ".venv-nafka"


class Unavailable(Exception):
    """A system or tool the scenario needs is not installed here; the row is reported as
    "not available" with this reason instead of failing the run."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: str, log: Path,
                   timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode} at start-up:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


@dataclass
class ResourceUsage:
    cpu_seconds: float
    peak_rss_bytes: int


class ResourceSampler:
    """Samples a process's RSS in a background thread while a measured run lasts, and
    takes its CPU time (user + system) at both ends."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        if psutil is not None:
            self.process = psutil.Process(pid)
        elif not Path(f"/proc/{pid}/stat").exists():
            raise Unavailable("psutil is not installed (pip install -e '.[bench]')")
        self.interval = interval
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self._cpu_start = 0.0

    def _cpu(self) -> float:
        if psutil is not None:
            times = self.process.cpu_times()
            return float(times.user + times.system)
        # without psutil (Linux): utime and stime, fields 14 and 15 of /proc/<pid>/stat
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _rss(self) -> int:
        if psutil is not None:
            return int(self.process.memory_info().rss)
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_rss = max(self.peak_rss, self._rss())
            except Exception:  # the process is gone (psutil.Error or OSError)
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> ResourceSampler:
        self._cpu_start = self._cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.usage = ResourceUsage(self._cpu() - self._cpu_start, self.peak_rss)


class Server:
    """A server subprocess with a log file; `stop()` sends SIGTERM, then SIGKILL."""

    name = "server"
    stop_timeout = 30.0

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"{self.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=log, env=self.env(), cwd=self.workdir
            )
        wait_listening(self.proc, self.port, self.name, self.log)

    def sampler(self) -> ResourceSampler:
        return ResourceSampler(self.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class LogbusBroker(Server):
    name = "logbus"

    def __init__(self, workdir: Path, event_loop: str = "uvloop", metrics: bool = False) -> None:
        super().__init__(workdir)
        self.event_loop = event_loop
        self.data_dir = workdir / "data"
        # metrics.listener's port (P1 "metrics on"), 0: no metrics endpoint
        self.metrics_port = free_port() if metrics else 0

    def overrides(self) -> list[str]:
        """The broker settings; a subclass adds listeners (bench/secure_broker.py)."""
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            f"log.dirs={self.data_dir}",
            "num.partitions=6",
            # deleted bench topics leave the disk at once instead of after a minute
            "log.segment.delete.delay.ms=0",
        ] + (
            [f"metrics.listener=http://127.0.0.1:{self.metrics_port}"] if self.metrics_port else []
        )

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "logbus.cli.main", "server", "start"]
        for override in self.overrides():
            command += ["--override", override]
        return command

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        src = str(REPO / "src")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        env["LOGBUS_EVENT_LOOP"] = self.event_loop
        # Bytecode cached in the work dir: a restart (S1) imports as an installed broker
        # does, not compiling every module again where the environment sets
        # PYTHONDONTWRITEBYTECODE.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(self.workdir / "pycache")
        return env


class RedisServer(Server):
    name = "redis"

    def command(self) -> list[str]:
        binary = shutil.which("redis-server")
        if binary is None:
            raise Unavailable("redis-server is not installed (make bench-deps installs it)")
        return [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--protected-mode", "no", "--dir", str(self.workdir),
        ]


def nafka_python() -> Path:
    """The interpreter of nafka's own virtualenv (NAFKA_PYTHON overrides)."""
    override = os.environ.get("NAFKA_PYTHON")
    python = Path(override) if override else NAFKA_VENV / "bin" / "python"
    if not python.exists():
        raise Unavailable(
            f"no nafka virtualenv at {python}: nafka 0.1 needs Python >= 3.12 (it calls "
            "sqlite3.connect(autocommit=True)) and kafka-python < 3, which conflicts with "
            "the test extra; `make bench-deps` builds it when a python3.12+ is found"
        )
    return python


class NafkaBroker(Server):
    name = "nafka"
    # nafka's stop() calls asyncio.Server.close_clients, new in Python 3.13: on 3.12 it
    # never finishes, and its data is not needed afterwards
    stop_timeout = 3.0

    def command(self) -> list[str]:
        # nafka's own main() logs every request at DEBUG level; run its server without that.
        code = (
            "import asyncio, sys; from nafka.server import run_server; "
            "asyncio.run(run_server(sys.argv[1], int(sys.argv[2])))"
        )
        return [str(nafka_python()), "-c", code, str(self.workdir / "kafka.sqlite"),
                str(self.port)]
