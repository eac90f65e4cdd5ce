"""Huge counts of work in admin requests (kept out of the request families' budgets: an
unbounded broker may spend seconds on each). CreateTopics and CreatePartitions asking for
100,000 or 2^31-1 partitions, validate_only or not, must be answered (an error is fine)
within the hang bound, leave the broker answering others, and stay under the RSS bound."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_broker import Case, Fuzzer
from fuzz_fixtures import fuzzed_fixture  # noqa: F401  (the `fuzzed` fixture)

from logbus.protocol import ApiKey, codec

pytestmark = pytest.mark.timeout(240)

COUNTS = [100_000, 2**31 - 1]


def _frame(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return codec.encode_request(codec.RequestHeader(api_key, version, 99, "fuzz"), body)


def create_topics(count: int, validate_only: bool) -> bytes:
    topic = {"name": f"huge-{count}-{validate_only}", "num_partitions": count,
             "replication_factor": 1, "assignments": [], "configs": []}
    return _frame(ApiKey.CREATE_TOPICS, 5,
                  {"topics": [topic], "timeout_ms": 10000, "validate_only": validate_only})


def create_partitions(count: int, validate_only: bool) -> bytes:
    body = {"topics": [{"name": "fz-a", "count": count, "assignments": None}],
            "timeout_ms": 10000, "validate_only": validate_only}
    return _frame(ApiKey.CREATE_PARTITIONS, 3, body)


@pytest.mark.parametrize("validate_only", [True, False])
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("request_", [create_topics, create_partitions],
                         ids=["create_topics", "create_partitions"])
def test_huge_partition_counts(fuzzed: Any, request_: Any, count: int,
                               validate_only: bool) -> None:
    broker, _world = fuzzed
    fuzzer = Fuzzer(broker)
    frame = request_(count, validate_only)
    api_key = ApiKey.CREATE_TOPICS if request_ is create_topics else ApiKey.CREATE_PARTITIONS
    version = 5 if request_ is create_topics else 3
    description = f"{request_.__name__} count {count} validate_only {validate_only}"
    fuzzer.run(Case(0, "huge_partition_counts", api_key, version, 0, description, frame),
               expect_answer=True)
    fuzzer.finish()


def test_many_creations_in_one_request(fuzzed: Any) -> None:
    """A CreateTopics naming 2,000 topics of 50 partitions (100,000 in all)."""
    broker, _world = fuzzed
    fuzzer = Fuzzer(broker)
    rng = random.Random(5)
    topics = [{"name": f"many-{i}-{rng.randrange(1 << 20)}", "num_partitions": 50,
               "replication_factor": 1, "assignments": [], "configs": []} for i in range(2000)]
    frame = _frame(ApiKey.CREATE_TOPICS, 5,
                   {"topics": topics, "timeout_ms": 10000, "validate_only": True})
    fuzzer.run(Case(0, "many_creations", ApiKey.CREATE_TOPICS, 5, 0, "2,000 topics x 50", frame),
               expect_answer=True)
    fuzzer.finish()
