"""A real Apache ZooKeeper server for tests: Debian's `zookeeper` package (`make test`
installs it), started directly with java on a free loopback port, with a capped heap and its
data in a directory of its own.

`tests/conftest.py` gives one per test session (`zookeeper`), a chroot per test
(`zk_connect`) and private servers for tests that stop, kill or pause theirs
(`zookeeper_factory`).
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from ports import free_port as _free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# zookeeper.jar's manifest names the other jars it needs; slf4j-nop keeps it quiet
CLASSPATH = f"{ZOOKEEPER_JAR}:/usr/share/java/slf4j-nop.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
TICK_MS = 200  # sessions may be as short as 2 ticks (400 ms) and as long as 60 s


def zookeeper_missing() -> str | None:
    """Why no ZooKeeper server can be started here, or None."""
    if shutil.which("java") is None:
        return "java is not installed: run `make system-deps` (installs default-jre-headless)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} is missing: run `make system-deps` (installs Debian's zookeeper)"
    return None


try:
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies (Linux), so no
    server outlives a test run that was killed."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def four_letter_word(port: int, word: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


class ZooKeeperServer:
    """One stand-alone ZooKeeper server on 127.0.0.1."""

    def __init__(self, directory: Path, port: int | None = None, heap_mb: int = 64) -> None:
        self.directory = directory
        self.port = port or _free_port()
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\n"
            f"minSessionTimeout={2 * TICK_MS}\n"
            "maxSessionTimeout=60000\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,cons\n"
        )
        return config

    def start(self, timeout: float = 60) -> ZooKeeperServer:
        problem = zookeeper_missing()
        if problem:
            raise RuntimeError(problem)
        config = self._write_config()
        args = [
            "java",
            f"-Xmx{self.heap_mb}m",
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            # a test server: the page cache is enough (a kill -9 of the server keeps it)
            "-Dzookeeper.forceSync=no",
            "-cp",
            CLASSPATH,
            MAIN_CLASS,
            str(config),
        ]
        with open(self.directory / "zookeeper.log", "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C goes to pytest, which stops it
                preexec_fn=_die_with_parent,
            )
        self.paused = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log_text = (self.directory / "zookeeper.log").read_text(errors="replace")
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}: {log_text[-2000:]}"
                )
            if self.ready():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"ZooKeeper did not answer on {self.connect} within {timeout} s")

    def ready(self) -> bool:
        """The server answers `ruok` with `imok` (it serves requests)."""
        try:
            return four_letter_word(self.port, b"ruok") == b"imok"
        except OSError:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it does not exit in time."""
        if not self.running():
            return
        assert self.proc is not None
        self.proc.terminate()
        self.resume()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL (works on a paused server too)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(20)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the server stops answering (connections stay open, sessions stall)."""
        assert self.running() and self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused and self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, *, kill: bool = False) -> ZooKeeperServer:
        """Stop (or kill) and start again on the same port with the same data: sessions
        live on (ZooKeeper stores them) when clients come back within their timeout."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def __enter__(self) -> ZooKeeperServer:
        return self.start() if not self.running() else self

    def __exit__(self, *exc: Any) -> None:
        self.kill()


def expire_session(connect: str, session: tuple[int, bytes], timeout: float = 30) -> None:
    """Expire a live session at once, as ZooKeeper's own tests do: a second client joins
    it with its id and password, then closes it. The first client learns on its next
    reconnection that its session expired."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect, client_id=session, timeout=10)
    try:
        client.start(timeout)
    finally:
        client.stop()
        client.close()
