"""A stand-alone Apache ZooKeeper server run from Debian's `zookeeper` package, for
`logbus cluster up` and the cluster tests: `ZooKeeperProcess(data_dir, port).start()`
writes a `zoo.cfg` under `data_dir`, starts `ZooKeeperServerMain` with a small heap and
waits until it answers `ruok`; `stop()` ends it. One object owns one server process; it
is not meant to be shared between threads."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Debian's zookeeper.jar names its own dependencies in its manifest; only a logger binding
# is ours to choose (slf4j-simple writes to stderr, which goes to the log file).
_LOGGER_JARS = (Path("/usr/share/java/slf4j-simple.jar"), Path("/usr/share/java/slf4j-nop.jar"))
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "install it with: sudo apt-get install zookeeper (Debian/Ubuntu)"


_PR_SET_PDEATHSIG = 1


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if sys.platform != "linux" or name is None:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()


def die_with_parent() -> None:
    """For `preexec_fn` (in the child between fork and exec): have the kernel send the
    child SIGTERM when its parent dies (Linux PR_SET_PDEATHSIG), so a parent killed with
    SIGKILL leaves no server behind. Nothing elsewhere."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ZooKeeperError(Exception):
    """ZooKeeper cannot be started (missing Java or package, port taken, early exit);
    the message says what to do."""


def java_command(heap: str = "64m") -> list[str]:
    """The command line that runs ZooKeeper's server main class (without zoo.cfg)."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(f"no 'java' on PATH: ZooKeeper needs a Java runtime; {INSTALL_HINT}")
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperError(
            f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing); {INSTALL_HINT}"
        )
    classpath = [str(ZOOKEEPER_JAR)]
    logger = next((jar for jar in _LOGGER_JARS if jar.is_file()), None)
    if logger is not None:
        classpath.append(str(logger))
    return [
        java,
        f"-Xmx{heap}",
        "-XX:+UseSerialGC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dzookeeper.admin.enableServer=false",
        "-cp",
        ":".join(classpath),
        _MAIN_CLASS,
    ]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def four_letter_word(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    """ZooKeeper's answer to a four-letter command (b"" when it closes without one)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


@dataclass
class ZooKeeperProcess:
    """One ZooKeeper server: data and `zoo.cfg` in `data_dir`, output in
    `data_dir/zookeeper.log`, clients on `127.0.0.1:port`."""

    data_dir: Path
    port: int = 2181
    heap: str = "64m"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def config_file(self) -> Path:
        return self.data_dir / "zoo.cfg"

    def write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "# written by logbus; rewritten at each start\n"
            # ZooKeeper expires sessions at tick boundaries: with half-second ticks a
            # dead broker's session ends within 0.5 s of zookeeper.session.timeout.ms
            # (2 s with ZooKeeper's sample 2000), and failover follows at once
            "tickTime=500\n"
            f"dataDir={(self.data_dir / 'data').resolve()}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr\n"
            # Kafka's zookeeper.session.timeout.ms (18 s) must fit under the maximum
            "maxSessionTimeout=60000\n"
        )
        return self.config_file

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        command = [*java_command(self.heap), str(self.write_config())]
        if not port_is_free(self.port):
            raise ZooKeeperError(
                f"port {self.port} is in use: ZooKeeper cannot listen there (stop what "
                "listens on it, or choose another port)"
            )
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # its own process group: the terminal's Ctrl-C reaches only our parent,
                # which stops ZooKeeper after the brokers that use it
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                status = self.proc.returncode
                self.proc = None
                raise ZooKeeperError(
                    f"ZooKeeper exited with status {status} at start-up; see {self.log_file}"
                )
            if self.is_ready():
                return self
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not answer within {timeout:g}s; see {self.log_file}")

    def is_ready(self) -> bool:
        try:
            return four_letter_word("127.0.0.1", self.port, b"ruok") == b"imok"
        except OSError:
            return False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; the exit status (None if not started)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.stop()
