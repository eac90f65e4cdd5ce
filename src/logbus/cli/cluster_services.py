"""The services `logbus cluster up` may start beside its brokers, once they listen:
the schema registry (`--schema-registry`, `logbus schema-registry start`) and the REST
proxy (`--rest-proxy`, `logbus rest-proxy start`, pointed at the registry when both
run). Each is a child process in its own session, its output in `<data-dir>/<name>.log`
and, prefixed, on our stdout; the cluster stops them before the brokers."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from logbus.cli.zookeeper_process import die_with_parent

DEFAULT_REGISTRY_PORT = 8081
DEFAULT_REST_PROXY_PORT = 8082


def pump_output(
    source: IO[bytes], log_file: Path, prefix: str, echo: Callable[[str], None] | None
) -> None:
    """Copy a child's output to its log file and, prefixed, to `echo`, line by line."""
    with log_file.open("ab") as log:
        for line in iter(source.readline, b""):
            log.write(line)
            log.flush()
            if echo is not None:
                try:
                    echo(prefix + line.decode("utf-8", errors="replace").rstrip("\n"))
                except (OSError, ValueError):
                    echo = None  # our stdout is gone (`| head`): keep the log file going


@dataclass
class ChildRun:
    """A child process of `logbus cluster up` (a broker, a service): its port, its log
    file, and the thread pumping its output there (and, prefixed, to the terminal)."""

    port: int
    log_file: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, kw_only=True)
    pump: threading.Thread | None = field(default=None, repr=False, kw_only=True)

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def label(self) -> str:
        """How its output lines and its pump thread are named."""
        raise NotImplementedError

    listen_host = "127.0.0.1"

    def start(self, echo: Callable[[str], None] | None) -> None:
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        assert self.proc.stdout is not None
        self.pump = threading.Thread(
            target=pump_output,
            args=(self.proc.stdout, self.log_file, f"[{self.label}] ", echo),
            name=f"{self.label}-output",
            daemon=True,
        )
        self.pump.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def listening(self) -> bool:
        try:
            with socket.create_connection((self.listen_host, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self.pump is not None:
            self.pump.join(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


@dataclass
class ServiceRun(ChildRun):
    """One service child (the schema registry, the REST proxy): what it is and its
    command line."""

    name: str
    slug: str
    argv: list[str]

    def command(self) -> list[str]:
        return self.argv

    @property
    def label(self) -> str:
        return self.slug

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


def add_arguments(up: argparse.ArgumentParser, port_type: Callable[[str], int]) -> None:
    up.add_argument(
        "--schema-registry", action="store_true",
        help="also start a schema registry (Confluent's API) on the cluster",
    )
    up.add_argument(
        "--schema-registry-port", type=port_type, default=DEFAULT_REGISTRY_PORT, metavar="PORT",
        help=f"where it listens (default: {DEFAULT_REGISTRY_PORT})",
    )
    up.add_argument(
        "--rest-proxy", action="store_true",
        help="also start a REST proxy (Confluent's v2 API) on the cluster",
    )
    up.add_argument(
        "--rest-proxy-port", type=port_type, default=DEFAULT_REST_PROXY_PORT, metavar="PORT",
        help=f"where it listens (default: {DEFAULT_REST_PROXY_PORT})",
    )


def service_runs(args: argparse.Namespace, bootstrap: str, data_dir: Path) -> list[ServiceRun]:
    """The services `args` ask for, not started."""
    cli = [sys.executable, "-m", "logbus.cli.main"]
    services = []
    registry_url = None
    if args.schema_registry:
        port = args.schema_registry_port
        registry_url = f"http://127.0.0.1:{port}"
        services.append(
            ServiceRun(
                port=port,
                log_file=data_dir / "schema-registry.log",
                name="schema registry",
                slug="schema-registry",
                argv=[*cli, "schema-registry", "start", "--bootstrap-server", bootstrap,
                      "--listeners", registry_url],
            )
        )
    if args.rest_proxy:
        port = args.rest_proxy_port
        command = [*cli, "rest-proxy", "start", "--bootstrap-server", bootstrap,
                   "--listeners", f"http://127.0.0.1:{port}"]
        if registry_url is not None:
            command += ["--override", f"schema.registry.url={registry_url}"]
        services.append(
            ServiceRun(
                port=port,
                log_file=data_dir / "rest-proxy.log",
                name="REST proxy",
                slug="rest-proxy",
                argv=command,
            )
        )
    return services
