"""The property-based side: hypothesis draws the API, the version, the mutation family
(or none) and every random choice, so a failing case shrinks to a small one and replays
with `--hypothesis-seed`. The property: the broker answers or closes in time, logs no
traceback, keeps answering others, stays under the RSS bound and stores only batches the
reference decoder reads."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_broker import Case, Fuzzer
from fuzz_budget import BUDGETS, Budget, served_versions, valid_frame
from fuzz_fixtures import fuzzed_fixture  # noqa: F401  (the `fuzzed` fixture)
from fuzz_layout import request_layout
from fuzz_mutations import FAMILIES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.timeout(300)

PAIRS = served_versions()


@pytest.mark.parametrize("budget", BUDGETS)
def test_mutated_requests_property(fuzzed: Any, budget: Budget) -> None:
    broker, world = fuzzed
    fuzzer = Fuzzer(broker)

    @settings(
        max_examples=budget.examples,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        pair=st.sampled_from(PAIRS),
        family=st.sampled_from(["none", *sorted(FAMILIES)]),
        rng=st.randoms(use_true_random=False),
    )
    def check(pair: tuple[int, int], family: str, rng: random.Random) -> None:
        if not broker.alive():  # a crash is pinned on the case that caused it, not later ones
            broker.start()
        api_key, version = pair
        frame = valid_frame(api_key, version, rng, world)
        description = "as generated"
        if family != "none":
            mutated = FAMILIES[family](frame, request_layout(frame), rng)
            if mutated is None:
                return
            frame, description = mutated
        problems = fuzzer.run(Case(0, family, api_key, version, 0, description, frame))
        assert not problems, "\n".join(problems)

    check()
    fuzzer.failures.clear()  # hypothesis reported them, shrunk
    fuzzer.finish()
