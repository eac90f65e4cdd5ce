"""The harness's nouns: a `Scenario` is a list of `Case`s (one variant on one system); the
runner calls each case's `run` several times and keeps the median, min and max of every
metric. `Context` gives cases the running systems, the volume scale and the progress
display."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cluster import TICK_MS, LogbusCluster
from bench.scale import Scale
from bench.systems import LogbusBroker, NafkaBroker, RedisServer, Server

if TYPE_CHECKING:
    from bench.progress import Progress

Metrics = dict[str, float]
SERVERS = ("logbus", "redis", "nafka")
MB = 1_000_000
GIB = 1 << 30


@dataclass
class Case:
    """One row of a scenario: `variant` on `system`. `run` performs one measured run and
    returns its metrics; `setup`/`teardown` run once around all runs (not measured)."""

    variant: str
    system: str
    run: Callable[[Context], Metrics]
    setup: Callable[[Context], None] | None = None
    teardown: Callable[[Context], None] | None = None
    note: str = ""
    # the servers this case needs (default: `system` if it names one); cases whose servers
    # are not selected with --systems are skipped
    requires: tuple[str, ...] | None = None
    # runs of this case instead of ctx.runs (F1: one run is already a distribution of kills)
    runs: int | None = None
    # --profile: the pid py-spy attaches to (default: the shared logbus broker's)
    profile_pid: Callable[[Context], int] | None = None

    @property
    def servers(self) -> tuple[str, ...]:
        if self.requires is not None:
            return self.requires
        return (self.system,) if self.system in SERVERS else ()


@dataclass
class Scenario:
    name: str
    title: str
    cases: Callable[[Context], list[Case]]
    # metric name -> (unit, higher is better); the first one is the headline figure
    metrics: dict[str, tuple[str, bool]]
    description: str = ""


@dataclass
class Context:
    scale: Scale
    runs: int
    workdir: Path
    progress: Progress
    systems_wanted: set[str]
    event_loop: str = "uvloop"
    profile_dir: Path | None = None  # --profile: py-spy the logbus broker into this dir
    case_filter: list[str] = field(default_factory=list)  # --cases: label substrings
    zookeeper_tick_ms: int = TICK_MS  # the cluster's ZooKeeper (P3, L2, F1)
    _servers: dict[str, Server] = field(default_factory=dict)
    _cluster: LogbusCluster | None = None
    # data left by one scenario for another (C1 reads what P1 wrote): key -> description
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def server(self, name: str) -> Server:
        server = self._servers.get(name)
        if server is None:
            workdir = self.workdir / name
            if name == "logbus":
                server = LogbusBroker(workdir, self.event_loop)
            elif name == "redis":
                server = RedisServer(workdir)
            elif name == "nafka":
                server = NafkaBroker(workdir)
            else:
                raise KeyError(name)
            self.progress.note(f"starting {name}")
            server.start()
            self._servers[name] = server
        return server

    def own_server(self, name: str, make: Callable[[Path], Server]) -> Server:
        """A server only some scenarios use (`make(workdir)`, e.g. the security scenarios'
        broker with more listeners): started on first use, stopped with the others."""
        server = self._servers.get(name)
        if server is None:
            server = make(self.workdir / name)
            self.progress.note(f"starting {name}")
            try:
                server.start()
            except BaseException:
                server.stop()
                raise
            self._servers[name] = server
        return server

    def logbus(self) -> LogbusBroker:
        server = self.server("logbus")
        assert isinstance(server, LogbusBroker)
        return server

    def cluster(self) -> LogbusCluster:
        """Three brokers on ZooKeeper (P3, L2, F1); Unavailable without ZooKeeper/Java."""
        if self._cluster is None:
            cluster = LogbusCluster(self.workdir / "cluster", self.event_loop,
                                    tick_ms=self.zookeeper_tick_ms)
            self.progress.note("starting ZooKeeper and a cluster of 3 logbus brokers")
            cluster.start()
            self._cluster = cluster
        return self._cluster

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None


@dataclass
class Summary:
    """Median, min and max of one metric over the runs of a case."""

    median: float
    min: float
    max: float
    values: list[float]

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values), values)


@dataclass
class CaseResult:
    scenario: str
    variant: str
    system: str
    status: str  # "ok", "not available" or "failed"
    reason: str = ""
    note: str = ""
    metrics: dict[str, Summary] = field(default_factory=dict)
    profile: str = ""  # py-spy summary of the broker (--profile)

    def median(self, metric: str) -> float | None:
        summary = self.metrics.get(metric)
        return None if summary is None else summary.median


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, nearest-rank."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]
