"""Fixtures of the fuzz suite: a broker subprocess holding a few topics, and the rule
that keeps the large budget out of the default run (see README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_broker import FuzzedBroker
from fuzz_budget import seed_world

LARGE = "fuzz_large"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the large budget unless `-m` names it (`pytest -m fuzz_large tests/fuzz`)."""
    if LARGE in (config.getoption("markexpr") or ""):
        return
    keep = [item for item in items if item.get_closest_marker(LARGE) is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


@pytest.fixture
def fuzzed(tmp_path: Path) -> Iterator[Any]:
    """A fresh broker subprocess with the world's topics; stopped (killed if need be) at
    the end, whatever happened."""
    broker = FuzzedBroker(tmp_path)
    try:
        broker.start()
        world = seed_world(broker)
        yield broker, world
    finally:
        broker.stop()
