"""Fixtures that start real brokers: in the test process (on a background event loop
thread) or as a `logbus server start` subprocess."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from brokers import FAST_GROUPS, BrokerProcess, RunningBroker, collect_leaks
from ports import free_port
from scheduling import (
    load_durations,
    longest_first,
    module_costs,
    module_of,
    store_durations,
    xdist_groups,
)
from zookeeper_server import ZooKeeperServer, zookeeper_missing

# Property tests are judged on what they find, not on how fast each example runs: a
# per-example deadline (or the too_slow health check) is a timed assertion that fails on a
# loaded machine.
settings.register_profile("logbus", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("logbus")


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[RunningBroker] = []

    def make(**overrides: str) -> RunningBroker:
        running = RunningBroker(
            tmp_path / f"data{len(started)}", {k.replace("_", "."): v for k, v in overrides.items()}
        )
        started.append(running.start())
        return running

    yield make
    for running in started:
        running.stop()
    collect_leaks()


@pytest.fixture
def broker(broker_factory: Any) -> RunningBroker:
    """A fresh broker with auto topic creation on and 1 partition per new topic."""
    return broker_factory()  # type: ignore[no-any-return]


@pytest.fixture
def fast_broker(broker_factory: Any) -> RunningBroker:
    """A fresh broker whose consumer groups form at once and accept sessions from 1 s
    (`brokers.FAST_GROUPS`)."""
    return broker_factory(**FAST_GROUPS)  # type: ignore[no-any-return]


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[Any]:
    procs: list[BrokerProcess] = []

    def make(*extra: str, data_dir: Path | None = None, port: int | None = None) -> BrokerProcess:
        proc = BrokerProcess(data_dir or tmp_path / "data", port or free_port(), list(extra))
        procs.append(proc)  # killed at the end even when its start fails
        return proc.start()

    yield make
    for proc in procs:
        if proc.proc is not None and proc.proc.poll() is None:
            proc.kill()
    collect_leaks()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole test session (tests/zookeeper_server.py).
    Tests share it, each in its own chroot (`zk_connect`); a test that stops, kills or
    pauses ZooKeeper takes a private one from `zookeeper_factory`. Fails (never skips)
    when ZooKeeper or java is not installed."""
    problem = zookeeper_missing()
    if problem:
        pytest.fail(f"ZooKeeper tests need a ZooKeeper server: {problem}", pytrace=False)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:  # killed whatever ends the session: a failure, Ctrl-C (pytest tears down)
        server.start()
        yield server
    finally:
        server.kill()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """`127.0.0.1:<port>/<chroot>`: the session's ZooKeeper under a chroot of this test's
    own (the store creates it), so tests never see each other's nodes."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)[:60]
    return f"{zookeeper.connect}/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zookeeper_factory(tmp_path: Path) -> Iterator[Any]:
    """`make()` starts a private ZooKeeper server (for tests that stop, kill, pause or
    restart it); every one is killed when the test ends."""
    problem = zookeeper_missing()
    if problem:
        pytest.fail(f"ZooKeeper tests need a ZooKeeper server: {problem}", pytrace=False)
    servers: list[ZooKeeperServer] = []

    def make() -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path / f"zookeeper-{len(servers)}")
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.kill()


FUZZ_LARGE = "fuzz_large"
SOAK = "soak"
# markers whose tests run only when `-m` names them
OPT_IN_MARKERS = (FUZZ_LARGE, SOAK)


# --- parallel workers: pytest-xdist schedules each group (`xdist_groups`) as one unit ------
# Workers collect, the controller schedules. pytest 9 ignores the node ids that
# pytest-xdist's own `xdist_group` marker rewrites, so the groups go their own way: each
# worker writes them to a file the controller names, and the controller's scheduler reads
# it to cut the work into units.
GROUPS_FILE = "logbus_xdist_groups"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: name the workers' groups file (one per run)."""
    config = node.config
    if not hasattr(config, "_logbus_groups_file"):
        config._logbus_groups_file = Path(tempfile.mkdtemp(prefix="logbus-xdist-")) / "groups"
    node.workerinput[GROUPS_FILE] = str(config._logbus_groups_file)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller, under `--dist loadgroup`: a scope scheduler whose scope of a test is its
    module's group, or the test alone."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # The units come longest first from the collection (`scheduling.longest_first`); the
    # scheduler's own reordering, by test count, would undo that.
    config.option.loadscopereorder = False

    groups: dict[str, str] = {}

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if not groups:
                path = getattr(config, "_logbus_groups_file", None)
                if path is not None and Path(path).exists():
                    groups.update(json.loads(Path(path).read_text()))
            return groups.get(nodeid.split("::", 1)[0], nodeid)

    return GroupScheduling(config, log)


def write_groups(config: pytest.Config, groups: dict[str, str]) -> None:
    """Worker: hand this collection's groups to the controller (every worker collects the
    same tests, so any worker's file will do)."""
    path = getattr(config, "workerinput", {}).get(GROUPS_FILE)
    if path is None:
        return
    partial = Path(f"{path}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the opt-in markers' tests unless `-m` names the marker: the fuzz suite's
    large budget (`pytest -m fuzz_large tests/fuzz`; see tests/fuzz/README.md) and the
    cluster fault soaks (`pytest -m soak tests/cluster`; see tests/cluster/README.md).
    Then hand the parallel workers' groups (`xdist_groups`) to the controller."""
    markexpr = config.getoption("markexpr") or ""
    skipped = [m for m in OPT_IN_MARKERS if m not in markexpr]
    keep = [item for item in items if not any(item.get_closest_marker(m) for m in skipped)]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    cost = module_costs(items, load_durations())
    groups = xdist_groups(items, cost)
    items[:] = longest_first(items, groups, cost)
    write_groups(config, groups)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        help="write each module's time in this run to tests/durations.json, which orders "
        "and balances the parallel workers' work (see tests/scheduling.py)",
    )


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Controller (or a run without workers): add up each module's time."""
    module = module_of(report.nodeid)
    _measured[module] = _measured.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if config.getoption("store_durations") and not hasattr(config, "workerinput"):
        store_durations(_measured)


# Debian's Chromium for the console's browser tests, driven by Playwright (its own browser
# download is impossible here). One browser per test module, closed when the module ends:
# while sync Playwright runs, its event loop counts as running in the main thread, so a
# browser kept for the session would make every later test's asyncio.run() fail.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the console's browser tests need Debian's chromium "
            "(`make system-deps` installs it, as root)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
