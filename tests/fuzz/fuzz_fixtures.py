"""The fuzz suite's fixture: a broker subprocess holding a few topics.

It lives here rather than in a `conftest.py`: test directories are not packages, so a
second `conftest` module would replace `tests/conftest.py` in `sys.modules` and break the
`from conftest import ...` of the test modules collected after it. Each fuzz test module
imports `fuzzed` from here. The rule that keeps the large budget out of the default run
is in `tests/conftest.py`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_broker import FuzzedBroker
from fuzz_budget import seed_world


@pytest.fixture(name="fuzzed")
def fuzzed_fixture(tmp_path: Path) -> Iterator[Any]:
    """A fresh broker subprocess with the world's topics; stopped (killed if need be) at
    the end, whatever happened."""
    broker = FuzzedBroker(tmp_path)
    try:
        broker.start()
        world = seed_world(broker)
        yield broker, world
    finally:
        broker.stop()
