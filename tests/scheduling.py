"""How `make test` spreads the suite over its pytest-xdist workers (`--dist loadgroup`).

A unit of work is a group of modules that must run in one worker, one test after another,
or else a single test. Units are handed out longest first (the longest-processing-time
rule), so the long ones start at once and the short ones fill the gaps at the end; without
that, a long unit that happened to be collected last would run alone while the other
workers idle. How long each module takes comes from `tests/durations.json`, which
`pytest --store-durations` rewrites from a run (a module missing from it is guessed from its
test count). The estimates only order and balance the work: a wrong one makes the run
slower, never wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
DURATIONS_FILE = TESTS / "durations.json"
SPARK_TESTS = TESTS / "spark"
# Fixtures of the tests that run ZooKeeper and broker processes (tests/cluster and the
# cluster tests of other suites)
ZOOKEEPER_FIXTURES = {
    "zookeeper",
    "zk_connect",
    "cluster_zookeeper",
    "zookeeper_factory",
    "cluster_factory",
}
# How many workers run those at once: each runs a ZooKeeper and up to 5 broker processes
# whose sessions expire when starved of CPU, so on 2 cores more than two such tests at a
# time turn slow starts into failures.
ZOOKEEPER_LANES = 2
# How many workers run a SparkSession of their own (a JVM and its Python workers each).
# Two would halve the Spark tests' lane, but PySpark 4.3 gives a Python worker it starts on
# the driver a fixed 10 s to connect back, and the second session's load made that fail.
SPARK_LANES = 1
# The guess for a test of a module the durations file does not know yet
UNKNOWN_TEST_SECONDS = 2.0


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def has_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values()
    )


def load_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per module (setup, call and teardown of all its tests), or {} when the file
    is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def store_durations(measured: dict[str, float], path: Path = DURATIONS_FILE) -> None:
    """Merge a run's per-module seconds into the file (modules the run did not reach keep
    their old figure)."""
    durations = {**load_durations(path), **{k: round(v, 1) for k, v in measured.items()}}
    path.write_text(json.dumps(dict(sorted(durations.items())), indent=0) + "\n")


def _lanes(
    modules: Iterable[str], count: int, name: str, cost: dict[str, float]
) -> dict[str, str]:
    """Spread `modules` over `count` lanes, each next-longest module to the lane with the
    least work so far."""
    load = [0.0] * count
    lanes: dict[str, str] = {}
    for module in sorted(modules, key=lambda m: (-cost[m], m)):
        lane = load.index(min(load))
        load[lane] += cost[module]
        lanes[module] = f"{name}-{lane}"
    return lanes


def module_costs(items: list[pytest.Item], durations: dict[str, float]) -> dict[str, float]:
    counts: dict[str, int] = {}
    for item in items:
        module = module_of(item.nodeid)
        counts[module] = counts.get(module, 0) + 1
    return {m: durations.get(m, n * UNKNOWN_TEST_SECONDS) for m, n in counts.items()}


def xdist_groups(items: list[pytest.Item], cost: dict[str, float]) -> dict[str, str]:
    """The worker group of each module that needs one: the tests of one group run in one
    worker, one after another; other tests go to whichever worker is free.
    - the tests that use a session's SparkSession (the `spark` fixture) are spread over
      `SPARK_LANES` groups, each a worker that starts its own; the Spark tests that start
      Spark in a process of their own (the bench's smoke run, the exactly-once jobs) go
      anywhere;
    - the modules that start ZooKeeper and broker processes share `ZOOKEEPER_LANES` groups;
    - a module with a module-scoped fixture (a browser, a broker shared by the module)
      keeps its tests in one worker, so the fixture starts once."""
    spark: set[str] = set()
    zookeeper: set[str] = set()
    groups: dict[str, str] = {}
    for item in items:
        module = module_of(item.nodeid)
        if SPARK_TESTS in Path(str(item.fspath)).parents and "spark" in item.fixturenames:
            spark.add(module)
        elif ZOOKEEPER_FIXTURES & set(getattr(item, "fixturenames", ())):
            zookeeper.add(module)
        elif has_module_fixture(item):
            groups.setdefault(module, module)
    groups.update(_lanes(spark, SPARK_LANES, "spark", cost))
    groups.update(_lanes(zookeeper - spark, ZOOKEEPER_LANES, "zookeeper", cost))
    return groups


def longest_first(
    items: list[pytest.Item], groups: dict[str, str], cost: dict[str, float]
) -> list[pytest.Item]:
    """`items` with the units expected to take longest first; the tests of one module stay
    together and in their order."""
    counts: dict[str, int] = {}
    for item in items:
        counts[module_of(item.nodeid)] = counts.get(module_of(item.nodeid), 0) + 1
    unit_cost: dict[str, float] = {}
    for module, group in groups.items():
        unit_cost[group] = unit_cost.get(group, 0.0) + cost[module]

    def key(indexed: tuple[int, pytest.Item]) -> tuple[float, str, int]:
        index, item = indexed
        module = module_of(item.nodeid)
        group = groups.get(module)
        if group is not None:
            return (-unit_cost[group], group, index)
        return (-cost[module] / counts[module], module, index)

    return [item for _, item in sorted(enumerate(items), key=key)]
