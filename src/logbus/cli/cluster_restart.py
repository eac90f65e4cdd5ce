"""`logbus cluster restart-broker N`: restart one broker of a running `logbus cluster up`,
the step of a rolling restart (docs/operations.md).

`cluster up` writes each broker's process id to `<data-dir>/broker-N.pid`. This command
leaves a request beside it (`broker-N.restart`), sends the broker SIGTERM (a controlled
shutdown: its leaderships move first) and waits; `cluster up` sees the broker exit, finds
the request, removes it and starts the broker again from `broker-N.properties` (as it
is now: an edit such as a second log dir takes effect). The command returns once the
new process listens. Nothing here imports the rest of `cluster up`: the two sides share
only these file names.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from pathlib import Path

from logbus.cli.common import positive_int, whole_number
from logbus.common.properties import load_properties

_POLL_INTERVAL = 0.1


def pid_file(data_dir: Path, broker_id: int) -> Path:
    """Where `cluster up` keeps the process id of broker `broker_id`."""
    return data_dir / f"broker-{broker_id}.pid"


def restart_request(data_dir: Path, broker_id: int) -> Path:
    """The file asking `cluster up` to start broker `broker_id` again once it exits."""
    return data_dir / f"broker-{broker_id}.restart"


class RestartError(Exception):
    """The broker cannot be restarted (the message says why)."""


def register(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], default_data_dir: Path
) -> None:
    restart = actions.add_parser(
        "restart-broker",
        help="restart one broker of a running `cluster up` (controlled shutdown, then start)",
        description="Stop broker N of a running `logbus cluster up` with SIGTERM (a "
        "controlled shutdown) and have cluster up start it again; returns once it listens.",
    )
    restart.add_argument("broker_id", type=_broker_id, metavar="N", help="the broker's id")
    restart.add_argument(
        "--data-dir",
        type=Path,
        default=default_data_dir,
        metavar="DIR",
        help=f"the --data-dir of the cluster (default: ./{default_data_dir})",
    )
    restart.add_argument(
        "--timeout",
        type=positive_int,
        default=120,
        metavar="SECONDS",
        help="how long the broker may take to stop and to listen again (default: 120)",
    )
    restart.set_defaults(func=run_restart)


def _broker_id(text: str) -> int:
    return whole_number(text, 0, "must be a broker id (0 or more)")


def run_restart(args: argparse.Namespace) -> int:
    try:
        new_pid = restart_broker(args.data_dir.resolve(), args.broker_id, args.timeout)
    except RestartError as exc:
        print(f"logbus: error: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"broker {args.broker_id} restarted (pid {new_pid})", flush=True)
    return 0


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _listener_port(config_file: Path) -> int:
    listeners = load_properties(config_file).get("listeners", "")
    return int(listeners.split(",")[0].rsplit(":", 1)[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("localhost", port), timeout=0.5):
            return True
    except OSError:
        return False


def restart_broker(data_dir: Path, broker_id: int, timeout: float) -> int:
    """Ask `cluster up` in `data_dir` to restart broker `broker_id`; the new process id."""
    pids = pid_file(data_dir, broker_id)
    old_pid = _read_pid(pids)
    if old_pid is None or not _alive(old_pid):
        raise RestartError(
            f"broker {broker_id} is not running under `logbus cluster up --data-dir "
            f"{data_dir}` (no live process in {pids})"
        )
    port = _listener_port(data_dir / f"broker-{broker_id}.properties")
    request = restart_request(data_dir, broker_id)
    request.write_text(f"{old_pid}\n", encoding="ascii")
    os.kill(old_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while True:
        new_pid = _read_pid(pids)
        if new_pid not in (None, old_pid) and _listening(port):
            return new_pid
        if time.monotonic() > deadline:
            request.unlink(missing_ok=True)
            raise RestartError(
                f"broker {broker_id} did not stop and listen again within {timeout:g}s; "
                f"see {data_dir / f'broker-{broker_id}.log'}"
            )
        time.sleep(_POLL_INTERVAL)
