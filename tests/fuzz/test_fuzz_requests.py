"""Every request the broker serves, at every version it serves, built valid from the
generated message tables and then mutated, one family of lies per test (see README.md)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_broker import Case, Fuzzer
from fuzz_budget import BUDGETS, Budget, request_rounds, served_versions, valid_frame
from fuzz_fixtures import fuzzed_fixture  # noqa: F401  (the `fuzzed` fixture)
from fuzz_layout import request_layout
from fuzz_mutations import FAMILIES

from logbus.protocol import ApiKey, codec

pytestmark = pytest.mark.timeout(300)


def test_every_served_version_is_generated_and_walked() -> None:
    """The generators cover the registry: each served (API, version) gets a frame the
    broker's decoder reads and the layout walker maps to its last byte."""
    from fuzz_bodies import World

    world = World(topics={"t": 1})
    pairs = served_versions()
    assert len({key for key, _ in pairs}) >= 20
    for api_key, version in pairs:
        frame = valid_frame(api_key, version, random.Random(f"{api_key}/{version}"), world)
        header, _body = codec.decode_request(frame[4:])
        assert (header.api_key, header.api_version) == (api_key, version)
        assert request_layout(frame)[-1].end <= len(frame)


def _acks_zero(frame: bytes) -> bool:
    header, body = codec.decode_request(frame[4:])
    return header.api_key == ApiKey.PRODUCE and body["acks"] == 0


@pytest.mark.parametrize("budget", BUDGETS)
def test_valid_requests_are_answered(fuzzed: Any, budget: Budget) -> None:
    broker, world = fuzzed
    fuzzer = Fuzzer(broker)
    for api_key, version, round_, rng in request_rounds(budget, "valid"):
        if fuzzer.done:
            break
        frame = valid_frame(api_key, version, rng, world)
        case = Case(budget.seed, "valid", api_key, version, round_, "as generated", frame,
                    budget.name)
        fuzzer.run(case, expect_answer=not _acks_zero(frame))
    fuzzer.finish()


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_request_mutations(fuzzed: Any, family: str, budget: Budget) -> None:
    broker, world = fuzzed
    fuzzer = Fuzzer(broker)
    mutate = FAMILIES[family]
    for api_key, version, round_, rng in request_rounds(budget, family):
        if fuzzer.done:
            break
        frame = valid_frame(api_key, version, rng, world)
        mutated = mutate(frame, request_layout(frame), rng)
        if mutated is None:
            continue
        data, description = mutated
        fuzzer.run(Case(budget.seed, family, api_key, version, round_, description, data,
                        budget.name))
    fuzzer.finish()
