"""Brokers for tests, in the test process (`RunningBroker`, on a background event loop
thread: the client's `LoopThread`) or as a `logbus server start` subprocess
(`BrokerProcess`). tests/conftest.py turns them into fixtures (`broker`, `broker_factory`,
`broker_process`); test modules and suite helpers that need the classes import them from
here (never from a conftest)."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from logbus.client.loop_thread import LoopThread
from logbus.server.broker import Broker
from logbus.server.config.broker_config import BrokerConfig

# A broker's start or stop that takes longer than this has hung
START_STOP_TIMEOUT = 30.0
# Consumer groups that form at once (no initial rebalance delay) and accept sessions from
# 1 s: for tests of groups that are not about those delays (`fast_broker`)
FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def collect_leaks() -> None:
    """Collect reference cycles as a broker test ends, so a client socket or file left
    unclosed is reported (an error, by the warning filter) against the test that leaked it,
    not whichever later test the collector happens to run in. Only broker tests pay for
    the collection.

    What survives it lives on (modules, session fixtures, caches) and is frozen into the
    permanent generation, so the next collection looks only at what was made since: a full
    collection of a worker's whole heap took ~0.2 s, and paid after every broker test it
    was a large share of the suite's CPU time."""
    gc.collect()
    gc.freeze()


@dataclass
class RunningBroker:
    """A broker in this process. `restart()` stops it cleanly and starts it again."""

    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    broker: Broker | None = None
    loop: LoopThread | None = None
    port: int = 0
    node: type[Broker] = Broker
    """The broker class to run (a KRaft broker's, `KRaftBroker`, on formatted storage)."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RunningBroker:
        props = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "log.flush.offset.checkpoint.interval.ms": "1000",
            **self.overrides,
        }
        self.loop = LoopThread("test-broker")
        self.broker = self.node(BrokerConfig.from_properties(props))
        self.loop.run(self.broker.start(), START_STOP_TIMEOUT)
        self.port = self.broker.port
        return self

    def stop(self) -> None:
        if self.broker is not None and self.loop is not None:
            self.loop.run(self.broker.stop(), START_STOP_TIMEOUT)
            self.loop.close()
        self.broker = None
        self.loop = None

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass
class BrokerProcess:
    """`logbus server start` in a subprocess, for kill -9 and CLI tests."""

    data_dir: Path
    port: int
    extra: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> BrokerProcess:
        args = [
            sys.executable,
            "-m",
            "logbus.cli.main",
            "server",
            "start",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
            *self.extra,
        ]
        # The child keeps its own copy of the descriptor; ours is closed at once.
        with open(self.data_dir.parent / f"broker-{self.port}.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, env={**os.environ})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.kill()  # not left running behind the failure
        raise RuntimeError(f"broker did not start listening within {timeout:g}s")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.terminate()
        return self.proc.wait(20)
