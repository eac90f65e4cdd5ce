"""`logbus cluster up --brokers N`: a replicated cluster on one machine, in the foreground.

By default (`--mode kraft`) the nodes keep the cluster's metadata in their own Raft
quorum (cluster_kraft.py: combined broker and controller nodes, storage formatted once;
no ZooKeeper, no Java). In ZooKeeper mode (`--mode zookeeper`, or `--zookeeper`) and
without `--zookeeper`, a ZooKeeper server from Debian's `zookeeper` package is started
first (data, `zoo.cfg` and its log under `<data-dir>/zookeeper`). Then each broker gets a
`server.properties` of its own (`<data-dir>/broker-N.properties`: `broker.id=N`,
`listeners=PLAINTEXT://localhost:<base-port + N>`, `log.dirs=<data-dir>/broker-N`,
`zookeeper.connect`, `metrics.listener=http://localhost:<metrics-base-port + N>`) and
runs as a `logbus server start` process; its output goes to
`<data-dir>/broker-N.log` and, prefixed with `[broker-N]`, to our stdout. With
`--schema-registry` and `--rest-proxy`, those services start once the brokers listen
(cluster_services.py) and stop first. Ctrl-C or SIGTERM stops the brokers with SIGTERM
(a clean shutdown; SIGKILL after `--shutdown-timeout`), then ZooKeeper. A second Ctrl-C
kills what is left at once.

Every child runs in its own session, so the terminal's Ctrl-C reaches only this process,
which stops them in order; each child also gets SIGTERM if this process dies
(PR_SET_PDEATHSIG), so none is left behind by a `kill -9`.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from logbus.cli import cluster_restart, cluster_services
from logbus.cli.cluster_kraft import (
    DEFAULT_CONTROLLER_BASE_PORT,
    KRaftSetupError,
    format_storage,
    kraft_node_properties,
    quorum_voters,
)
from logbus.cli.cluster_restart import pid_file, restart_request
from logbus.cli.cluster_services import ChildRun, ServiceRun
from logbus.cli.common import key_value, positive_int, whole_number
from logbus.cli.zookeeper_process import (
    ZooKeeperError,
    ZooKeeperProcess,
    port_is_free,
)

# Not ./data itself: that is a stand-alone broker's log dir (`make run`), which would take
# broker-N for partition N of a topic "broker" and delete it as a stray log.
DEFAULT_DATA_DIR = Path("data")
DEFAULT_BASE_PORT = 9092
DEFAULT_METRICS_BASE_PORT = 9404
DEFAULT_ZOOKEEPER_PORT = 2181
MODES = ("kraft", "zookeeper")
_POLL_INTERVAL = 0.1


class ClusterError(Exception):
    """The cluster cannot start (the message says why and what to do)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = subparsers.add_parser("cluster", help="run a cluster of brokers on this machine")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        help="start N brokers (KRaft; or ZooKeeper mode) in the foreground; Ctrl-C stops all",
        description="Start a cluster of N brokers on this machine: by default in KRaft mode "
        "(combined broker and controller nodes, no ZooKeeper); with --mode zookeeper also a "
        "ZooKeeper server from Debian's zookeeper package, unless --zookeeper names one. "
        "Ctrl-C stops it.",
    )
    up.add_argument(
        "--brokers", type=positive_int, default=3, metavar="N", help="how many (default: 3)"
    )
    up.add_argument(
        "--mode",
        choices=MODES,
        help="kraft (the default: no ZooKeeper) or zookeeper (the default with --zookeeper)",
    )
    up.add_argument(
        "--controller-base-port",
        type=_port,
        metavar="PORT",
        default=DEFAULT_CONTROLLER_BASE_PORT,
        help="KRaft: node N's controller listener is on PORT + N "
        f"(default: {DEFAULT_CONTROLLER_BASE_PORT})",
    )
    up.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[,HOST:PORT][/CHROOT]",
        help="an existing ZooKeeper ensemble to use (implies --mode zookeeper; default: "
        "start one)",
    )
    up.add_argument(
        "--zookeeper-port",
        type=_port,
        metavar="PORT",
        default=DEFAULT_ZOOKEEPER_PORT,
        help="ZooKeeper mode: client port of the ZooKeeper started here "
        f"(default: {DEFAULT_ZOOKEEPER_PORT})",
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"where configs, logs and data go (default: ./{DEFAULT_DATA_DIR})",
    )
    up.add_argument(
        "--base-port",
        type=_port,
        metavar="PORT",
        default=DEFAULT_BASE_PORT,
        help=f"broker N listens on BASE_PORT + N (default: {DEFAULT_BASE_PORT})",
    )
    up.add_argument(
        "--metrics-base-port",
        type=_metrics_port,
        metavar="PORT",
        default=DEFAULT_METRICS_BASE_PORT,
        help="broker N serves Prometheus metrics at http://localhost:PORT+N/metrics "
        f"(default: {DEFAULT_METRICS_BASE_PORT}; 0: no metrics endpoint)",
    )
    up.add_argument(
        "--racks",
        metavar="RACK[,RACK...]",
        help="broker.rack of each broker, assigned in turn (e.g. a,b,c)",
    )
    up.add_argument(
        "--config",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting for every broker, over the generated ones (repeatable)",
    )
    up.add_argument(
        "--quiet", action="store_true", help="write broker output only to the log files"
    )
    up.add_argument(
        "--start-timeout",
        type=positive_int,
        default=60,
        metavar="SECONDS",
        help="how long a broker may take to listen (default: 60)",
    )
    up.add_argument(
        "--shutdown-timeout",
        type=positive_int,
        default=30,
        metavar="SECONDS",
        help="how long a broker may take to stop before it is killed (default: 30)",
    )
    cluster_services.add_arguments(up, _port)
    up.set_defaults(func=run_up)
    cluster_restart.register(actions, DEFAULT_DATA_DIR)


def _metrics_port(text: str) -> int:
    return 0 if text.strip() == "0" else _port(text)


def _port(text: str) -> int:
    value = whole_number(text, 1, "must be at least 1")
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be at most 65535, got {value}")
    return value


# --- the brokers' configuration ----------------------------------------------------------


def broker_properties(
    broker_id: int,
    brokers: int,
    port: int,
    log_dir: Path,
    zookeeper_connect: str,
    rack: str | None = None,
    extra: Mapping[str, str] | None = None,
    metrics_port: int = 0,
) -> dict[str, str]:
    """One broker's server.properties for a ZooKeeper-mode cluster of `brokers` on this
    machine: internal topics and new topics replicated min(3, brokers) times; `extra`
    wins over all."""
    identity = {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://localhost:{port}",
        "log.dirs": str(log_dir),
        "zookeeper.connect": zookeeper_connect,
    }
    return _with_shared_settings(identity, brokers, rack, extra, metrics_port)


def kraft_properties(
    node_id: int,
    brokers: int,
    port: int,
    controller_base_port: int,
    log_dir: Path,
    rack: str | None = None,
    extra: Mapping[str, str] | None = None,
    metrics_port: int = 0,
) -> dict[str, str]:
    """One node's server.properties for a KRaft cluster of `brokers` nodes (see
    cluster_kraft.py); the rest as in ZooKeeper mode."""
    identity = kraft_node_properties(node_id, brokers, port, controller_base_port, log_dir)
    return _with_shared_settings(identity, brokers, rack, extra, metrics_port)


def _with_shared_settings(
    identity: Mapping[str, str],
    brokers: int,
    rack: str | None,
    extra: Mapping[str, str] | None,
    metrics_port: int,
) -> dict[str, str]:
    replication = str(min(3, brokers))
    props = {
        **identity,
        "offsets.topic.replication.factor": replication,
        "default.replication.factor": replication,
    }
    if rack is not None:
        props["broker.rack"] = rack
    if metrics_port:
        props["metrics.listener"] = f"http://localhost:{metrics_port}"
    props.update(extra or {})
    return props


def properties_text(props: Mapping[str, str]) -> str:
    """Java properties syntax (what `logbus server start` and Kafka read)."""
    lines = ["# written by `logbus cluster up`; rewritten at each start"]
    for key, value in props.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        if escaped.startswith(" "):
            escaped = "\\" + escaped
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"


def check_zookeeper_reachable(connect: str, timeout: float = 3.0) -> None:
    """ClusterError unless one of the connect string's servers accepts a connection."""
    hosts = connect.split("/", 1)[0]
    for server in filter(None, hosts.split(",")):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host or "localhost", int(port or "2181")), timeout):
                return
        except (OSError, ValueError):
            continue
    raise ClusterError(f"cannot reach ZooKeeper at {connect}: is it running?")


# --- one broker process ------------------------------------------------------------------


@dataclass
class BrokerRun(ChildRun):
    """One `logbus server start` child: its config, data, log file and output pump."""

    broker_id: int
    config_file: Path
    log_dir: Path
    metrics_port: int = 0  # its metrics endpoint (0: none)
    controller_port: int = 0  # KRaft: its controller listener (0: not a voter)

    listen_host = "localhost"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "logbus.cli.main", "server", "start", str(self.config_file)]

    @property
    def pid_file(self) -> Path:
        return pid_file(self.config_file.parent, self.broker_id)

    def start(self, echo: Callable[[str], None] | None) -> None:
        """Start the process and write its id where `cluster restart-broker` reads it."""
        super().start(echo)
        assert self.proc is not None
        self.pid_file.write_text(f"{self.proc.pid}\n", encoding="ascii")

    def restart_requested(self) -> bool:
        """Whether `cluster restart-broker` asked for a restart (the request is taken)."""
        request = restart_request(self.config_file.parent, self.broker_id)
        if not request.exists():
            return False
        request.unlink(missing_ok=True)
        return True

    def close(self) -> None:
        super().close()
        self.pid_file.unlink(missing_ok=True)

    @property
    def label(self) -> str:
        return f"broker-{self.broker_id}"

    def last_lines(self, count: int = 5) -> list[str]:
        try:
            lines = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        return lines[-count:]


# --- the cluster -------------------------------------------------------------------------


@dataclass
class Cluster:
    """ZooKeeper (when started here) and the broker processes of one `cluster up`; in
    KRaft mode `zookeeper_connect` is "" and `voters` the quorum's voters."""

    data_dir: Path
    brokers: list[BrokerRun]
    zookeeper: ZooKeeperProcess | None
    zookeeper_connect: str
    echo: Callable[[str], None] | None
    services: list[ServiceRun] = field(default_factory=list)
    voters: str = ""

    def start(self, start_timeout: float, stopping: threading.Event) -> None:
        """Start ZooKeeper (if ours) and every broker, and wait until each listens (or
        `stopping` is set)."""
        ports = [(f"broker {b.broker_id}", b.port) for b in self.brokers]
        ports += [
            (f"broker {b.broker_id} controller", b.controller_port)
            for b in self.brokers
            if b.controller_port
        ]
        ports += [
            (f"broker {b.broker_id} metrics", b.metrics_port)
            for b in self.brokers
            if b.metrics_port
        ]
        ports += [(s.name, s.port) for s in self.services]
        if self.zookeeper is not None:
            ports.insert(0, ("ZooKeeper", self.zookeeper.port))
        taken = [f"{port} ({who})" for who, port in ports if not port_is_free(port)]
        if taken:
            flags = "--zookeeper-port" if self.zookeeper is not None else "--controller-base-port"
            raise ClusterError(
                f"port{'s' if len(taken) > 1 else ''} already in use: {', '.join(taken)}; "
                f"stop what listens there, or choose other ports (--base-port, {flags}, "
                "--metrics-base-port)"
            )
        if self.zookeeper is not None:
            self.zookeeper.start()
            say(
                f"ZooKeeper: {self.zookeeper.connect} (config {self.zookeeper.config_file}, "
                f"log {self.zookeeper.log_file})"
            )
        elif self.zookeeper_connect:
            check_zookeeper_reachable(self.zookeeper_connect)
        for broker in self.brokers:
            broker.start(self.echo)
        deadline = time.monotonic() + start_timeout
        waiting = list(self.brokers)
        while waiting and not stopping.is_set():
            for broker in list(waiting):
                if not broker.running:
                    raise ClusterError(_exit_message(broker, "while starting"))
                if broker.listening():
                    waiting.remove(broker)
            if waiting and time.monotonic() > deadline:
                ids = ", ".join(str(b.broker_id) for b in waiting)
                raise ClusterError(
                    f"broker {ids} did not listen within {start_timeout:g}s; see the log "
                    f"file{'s' if len(waiting) > 1 else ''} in {self.data_dir}"
                )
            time.sleep(_POLL_INTERVAL)
        self._start_services(deadline, stopping)

    def _start_services(self, deadline: float, stopping: threading.Event) -> None:
        """Start the services once the brokers listen, and wait until each listens."""
        for service in self.services:
            if not stopping.is_set():
                service.start(self.echo)
        waiting = list(self.services)
        while waiting and not stopping.is_set():
            for service in list(waiting):
                if not service.running:
                    raise ClusterError(
                        f"the {service.name} exited while starting; see {service.log_file}"
                    )
                if service.listening():
                    waiting.remove(service)
            if waiting and time.monotonic() > deadline:
                raise ClusterError(
                    f"the {waiting[0].name} did not listen in time; see {waiting[0].log_file}"
                )
            time.sleep(_POLL_INTERVAL)

    def describe(self) -> list[str]:
        lines = [
            f"broker {b.broker_id}: localhost:{b.port} (config {b.config_file}, "
            f"data {b.log_dir}, log {b.log_file})"
            + (f", controller localhost:{b.controller_port}" if b.controller_port else "")
            + (f", metrics http://localhost:{b.metrics_port}/metrics" if b.metrics_port else "")
            for b in self.brokers
        ]
        lines += [f"{s.name}: {s.url} (log {s.log_file})" for s in self.services]
        bootstrap = ",".join(f"localhost:{b.port}" for b in self.brokers)
        if self.zookeeper_connect:
            lines.append(f"zookeeper.connect={self.zookeeper_connect}")
        else:
            lines.append(f"KRaft mode, controller.quorum.voters={self.voters}")
        lines.append(f"Cluster up. Bootstrap servers: {bootstrap}. Ctrl-C stops it.")
        return lines

    def watch(self, stopping: threading.Event) -> int:
        """Until `stopping` is set: report children that exit. 1 if ZooKeeper or every
        broker has gone, 0 when asked to stop."""
        reported: set[int] = set()
        exited_services: set[str] = set()
        while not stopping.wait(_POLL_INTERVAL * 2):
            if self.zookeeper is not None and not self.zookeeper.running:
                say(f"ZooKeeper exited; see {self.zookeeper.log_file}. Stopping the brokers.")
                return 1
            for service in self.services:
                if service.slug not in exited_services and not service.running:
                    exited_services.add(service.slug)
                    say(f"the {service.name} exited unexpectedly; see {service.log_file}")
            for broker in self.brokers:
                if broker.broker_id not in reported and not broker.running:
                    if broker.restart_requested():
                        self._restart(broker)
                        continue
                    reported.add(broker.broker_id)
                    say(_exit_message(broker, "unexpectedly"))
            if len(reported) == len(self.brokers):
                say("every broker has exited")
                return 1
        return 0

    def _restart(self, broker: BrokerRun) -> None:
        """Start `broker` again (`cluster restart-broker`), from its properties as they
        are now."""
        status = broker.proc.returncode if broker.proc is not None else None
        broker.close()
        broker.start(self.echo)
        say(f"broker {broker.broker_id} stopped (status {status}) and restarted")

    def _stop_services(self, timeout: float, killing: threading.Event) -> bool:
        return _stop_services_of(self.services, timeout, killing)

    def stop(self, timeout: float, killing: threading.Event) -> bool:
        """SIGTERM every broker, SIGKILL those still running after `timeout` (or at once
        when `killing` is set), then stop ZooKeeper. True if every broker stopped by
        itself."""
        clean = self._stop_services(timeout, killing)
        for broker in self.brokers:
            broker.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(b.running for b in self.brokers):
            if killing.is_set() or time.monotonic() > deadline:
                for broker in self.brokers:
                    if broker.running:
                        say(f"broker {broker.broker_id} did not stop in time: killing it")
                        clean = False
                        broker.signal(signal.SIGKILL)
                break
            time.sleep(_POLL_INTERVAL)
        for broker in self.brokers:
            broker.close()
        if self.zookeeper is not None:
            self.zookeeper.stop(0.1 if killing.is_set() else 10)
        return clean


def _stop_services_of(
    services: list[ServiceRun], timeout: float, killing: threading.Event
) -> bool:
    """SIGTERM each service, SIGKILL those still running after `timeout`; True if every
    one stopped by itself."""
    clean = True
    for service in services:
        service.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(s.running for s in services):
        if killing.is_set() or time.monotonic() > deadline:
            for service in services:
                if service.running:
                    say(f"the {service.name} did not stop in time: killing it")
                    clean = False
                    service.signal(signal.SIGKILL)
            break
        time.sleep(_POLL_INTERVAL)
    for service in services:
        service.close()
    return clean


def _exit_message(broker: BrokerRun, when: str) -> str:
    if broker.pump is not None:
        broker.pump.join(5)  # its last words reach the log file
    status = broker.proc.returncode if broker.proc is not None else None
    tail = "".join(f"\n  {line}" for line in broker.last_lines())
    return f"broker {broker.broker_id} exited {when} (status {status}); {broker.log_file}:{tail}"


def say(message: str) -> None:
    with _OUTPUT_LOCK:
        print(message, flush=True)


_OUTPUT_LOCK = threading.Lock()


def cluster_mode(args: argparse.Namespace) -> str:
    """"kraft" or "zookeeper", from --mode and --zookeeper (which implies zookeeper)."""
    mode: str | None = getattr(args, "mode", None)
    if args.zookeeper and mode == "kraft":
        raise ClusterError(
            "--mode kraft and --zookeeper cannot be used together: KRaft mode runs no "
            "ZooKeeper (use --mode zookeeper, or leave --zookeeper out)"
        )
    if args.zookeeper:
        return "zookeeper"
    return mode or "kraft"


def _check_port_ranges(args: argparse.Namespace, kraft: bool) -> None:
    last = args.brokers - 1
    ranges = [("--base-port", args.base_port)]
    ranges.append(("--metrics-base-port", getattr(args, "metrics_base_port", 0)))
    if kraft:
        ranges.append(("--controller-base-port", args.controller_base_port))
    for flag, base in ranges:
        if base and base + last > 65535:
            raise ClusterError(f"{flag} {base} leaves no port for broker {last}")


def build_cluster(args: argparse.Namespace) -> Cluster:
    kraft = cluster_mode(args) == "kraft"
    _check_port_ranges(args, kraft)
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    zookeeper = None
    connect = ""
    if not kraft and args.zookeeper:
        connect = args.zookeeper
    elif not kraft:
        zookeeper = ZooKeeperProcess(data_dir / "zookeeper", args.zookeeper_port)
        connect = zookeeper.connect
    racks = [r.strip() for r in args.racks.split(",")] if args.racks else []
    metrics_base = getattr(args, "metrics_base_port", 0)
    brokers = []
    all_props = []
    for broker_id in range(args.brokers):
        port = args.base_port + broker_id
        metrics_port = metrics_base + broker_id if metrics_base else 0
        log_dir = data_dir / f"broker-{broker_id}"
        rack = racks[broker_id % len(racks)] if racks else None
        if kraft:
            props = kraft_properties(
                broker_id, args.brokers, port, args.controller_base_port, log_dir, rack,
                dict(args.config), metrics_port,
            )  # fmt: skip
        else:
            props = broker_properties(
                broker_id, args.brokers, port, log_dir, connect, rack, dict(args.config),
                metrics_port,
            )  # fmt: skip
        all_props.append(props)
        brokers.append(
            BrokerRun(
                port=port,
                log_file=data_dir / f"broker-{broker_id}.log",
                broker_id=broker_id,
                config_file=data_dir / f"broker-{broker_id}.properties",
                log_dir=log_dir,
                metrics_port=metrics_port,
                controller_port=_controller_port(props),
            )
        )
    if kraft:
        _prepare_kraft_storage(all_props)
    for broker, props in zip(brokers, all_props, strict=True):
        broker.config_file.write_text(properties_text(props), encoding="utf-8")
    echo = None if args.quiet else say
    bootstrap = ",".join(f"localhost:{b.port}" for b in brokers)
    services = cluster_services.service_runs(args, bootstrap, data_dir)
    voters = quorum_voters(args.brokers, args.controller_base_port) if kraft else ""
    return Cluster(data_dir, brokers, zookeeper, connect, echo, services, voters)


def _controller_port(props: Mapping[str, str]) -> int:
    """The port of a node's controller listener (0: it has none)."""
    for listener in props.get("listeners", "").split(","):
        name, _, address = listener.partition("://")
        if name.strip() == props.get("controller.listener.names", "").split(",")[0].strip():
            return int(address.rsplit(":", 1)[1])
    return 0


def _prepare_kraft_storage(all_props: list[dict[str, str]]) -> None:
    """Format the nodes' storage the first time (one new cluster id), say so."""
    try:
        cluster_id, formatted = format_storage(all_props)
    except KRaftSetupError as exc:
        raise ClusterError(str(exc)) from exc
    if formatted:
        say(f"formatted the storage of a new KRaft cluster, cluster.id {cluster_id}")
    else:
        say(f"KRaft cluster {cluster_id}: storage already formatted, kept")


def run_up(args: argparse.Namespace) -> int:
    stopping = threading.Event()
    killing = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            killing.set()
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    cluster: Cluster | None = None
    status = 0
    try:
        cluster = build_cluster(args)
        cluster.start(args.start_timeout, stopping)
        if not stopping.is_set():
            for line in cluster.describe():
                say(line)
        status = cluster.watch(stopping)
        say("stopping the cluster")
    except (ClusterError, ZooKeeperError) as exc:
        print(f"logbus: error: {exc}", file=sys.stderr, flush=True)
        status = 1
    except OSError as exc:
        print(f"logbus: error: {exc}", file=sys.stderr, flush=True)
        status = 1
    finally:
        if cluster is not None:
            clean = cluster.stop(args.shutdown_timeout, killing)
            if status == 0 and not clean:
                status = 1
            if status == 0:
                say("cluster stopped")
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
