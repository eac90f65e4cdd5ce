"""The scenarios, one module each, run in the order of `SCENARIOS`.

To add one: write `bench/scenarios/<name>.py` with a `Scenario` (its `cases(ctx)` returns
`Case`s whose `run(ctx)` does one measured run and returns a dict of metrics), then add it
to `SCENARIOS` below. See bench/README.md.
"""

from __future__ import annotations

from bench.core import Scenario
from bench.scenarios.ceilings import CEIL
from bench.scenarios.clients import CL
from bench.scenarios.cluster import F1, L2, P3
from bench.scenarios.consume import C1
from bench.scenarios.defaults import D1, D3
from bench.scenarios.groups import G1
from bench.scenarios.growth import S1
from bench.scenarios.isolation import F2
from bench.scenarios.latency import L1
from bench.scenarios.mirror import MM1
from bench.scenarios.operations import CS1, RA1
from bench.scenarios.produce import P1, P2
from bench.scenarios.requests import R1
from bench.scenarios.security import SCRAM, TLS
from bench.scenarios.transactions import TX1, TX2

SCENARIOS: list[Scenario] = [CEIL, P1, P2, C1, L1, R1, CL, P3, L2, F1, F2, TX1, TX2, TLS,
                             SCRAM, D1, D3, S1, MM1, RA1, CS1, G1]


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name.lower() == name.lower():
            return scenario
    known = ", ".join(s.name for s in SCENARIOS)
    raise KeyError(f"unknown scenario {name!r} (known: {known})")
