"""The budgets of the fuzz suite, the (API, version) pairs it covers, and the world of
topics each fuzzed broker starts with."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fuzz_bodies import World, valid_body
from fuzz_broker import FuzzedBroker

from kafka_wire import WireClient
from logbus.protocol import ErrorCode, codec
from logbus.records.builder import build_batch
from logbus.server.api.registry import build_registry


@dataclass(frozen=True)
class Budget:
    name: str
    rounds: int  # cases per (API, version) and request family
    batch_cases: int  # cases per Produce batch family
    examples: int  # hypothesis examples
    seed: int

    def __str__(self) -> str:
        return self.name


def _seed(default: int | None) -> int:
    text = os.environ.get("LOGBUS_FUZZ_SEED")
    if text:
        return int(text)
    return default if default is not None else random.randrange(1 << 32)


# The small budget runs in `make test` with a fixed seed (the same cases every run); the
# large one draws a new seed each run, printed in every failure, unless LOGBUS_FUZZ_SEED
# is set.
SMALL = Budget("small", rounds=1, batch_cases=40, examples=60, seed=_seed(13))
LARGE_BUDGET = Budget(
    "large",
    rounds=int(os.environ.get("LOGBUS_FUZZ_ROUNDS", "40")),
    batch_cases=int(os.environ.get("LOGBUS_FUZZ_BATCH_CASES", "2000")),
    examples=int(os.environ.get("LOGBUS_FUZZ_EXAMPLES", "3000")),
    seed=_seed(None),
)
BUDGETS = [
    pytest.param(SMALL, id="small"),
    pytest.param(
        LARGE_BUDGET, id="large", marks=[pytest.mark.fuzz_large, pytest.mark.timeout(4 * 3600)]
    ),
]


def served_versions() -> list[tuple[int, int]]:
    """Every (API key, version) the broker serves, from its own registry."""
    return [
        (key, version)
        for key, handler in sorted(build_registry().items())
        for version in range(handler.min_version, handler.max_version + 1)
    ]


def selected(api_key: int, version: int, round_: int) -> bool:
    """LOGBUS_FUZZ_ONLY=<api key>/<version>/<round> replays one case."""
    only = os.environ.get("LOGBUS_FUZZ_ONLY")
    return not only or only == f"{api_key}/{version}/{round_}"


def request_rounds(
    budget: Budget, family: str
) -> Iterator[tuple[int, int, int, random.Random]]:
    """(api key, version, round, rng) of every case of a request family, each rng seeded
    by the budget's seed and the case's names."""
    for api_key, version in served_versions():
        for round_ in range(budget.rounds):
            if selected(api_key, version, round_):
                seed = f"{budget.seed}/{family}/{api_key}/{version}/{round_}"
                yield api_key, version, round_, random.Random(seed)


def valid_frame(api_key: int, version: int, rng: random.Random, world: World) -> bytes:
    body = valid_body(api_key, version, rng, world)
    correlation_id = rng.randrange(1, 1 << 20)
    header = codec.RequestHeader(api_key, version, correlation_id, rng.choice(("fuzz", None, "")))
    return codec.encode_request(header, body)


TOPICS = {"fz-a": 1, "fz-b": 3, "fz-c": 2}


def seed_world(broker: FuzzedBroker) -> World:
    """Topics (one compacted) with a few records each, for requests to name."""
    with WireClient(broker.bootstrap) as client:
        for name, partitions in TOPICS.items():
            configs = {"cleanup.policy": "compact"} if name == "fz-c" else {}
            error, message = client.create_topic(name, partitions, configs)
            assert error == ErrorCode.NONE, message
            for p in range(partitions):
                batch = build_batch([(b"key", b"seed value")] * 3)
                assert client.produce(name, p, batch)["error_code"] == ErrorCode.NONE
        ids = {t["name"]: t["topic_id"] for t in client.metadata(sorted(TOPICS))["topics"]}
    return World(topics=dict(TOPICS), topic_ids=ids)
