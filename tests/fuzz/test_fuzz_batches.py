"""Produce requests whose record batches lie under a valid CRC, one family per test:
corrupt compressed payloads, lying record counts, bad record lengths and offset deltas,
bad record fields and headers, and old-format message sets (Produce v0-2). Whatever the
broker answers, every batch it stores must decode fully with the reference decoder, and
confluent-kafka must read every partition to its end afterwards."""

from __future__ import annotations

import random
from typing import Any

import pytest
from fuzz_batches import BATCH_FAMILIES
from fuzz_broker import Case, Fuzzer
from fuzz_budget import BUDGETS, Budget, selected, served_versions
from fuzz_fixtures import fuzzed_fixture  # noqa: F401  (the `fuzzed` fixture)
from fuzz_readers import confluent_read_problems

from logbus.protocol import ApiKey, codec

pytestmark = pytest.mark.timeout(300)


def produce_frame(rng: random.Random, world: Any, records: bytes, version: int) -> bytes:
    topic = rng.choice(sorted(world.topics))
    partition = rng.randrange(world.topics[topic])
    body = {
        "transactional_id": None,
        "acks": rng.choice((-1, -1, 1, 0)),
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition,
                                                          "records": records}]}],
    }
    header = codec.RequestHeader(ApiKey.PRODUCE, version, rng.randrange(1, 1 << 20), "fuzz")
    return codec.encode_request(header, body)


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("family", sorted(BATCH_FAMILIES))
def test_produce_batch_mutations(fuzzed: Any, family: str, budget: Budget) -> None:
    broker, world = fuzzed
    fuzzer = Fuzzer(broker)
    mutate = BATCH_FAMILIES[family]
    legacy = family == "bad_legacy_message_set"
    for round_ in range(budget.batch_cases):
        if fuzzer.done:
            break
        rng = random.Random(f"{budget.seed}/{family}/{round_}")
        records, description = mutate(rng)
        if legacy:
            # magic 0 in v0-1, magic 0 or 1 in v2
            version = 2 if records[16] == 1 else rng.choice((0, 1, 2))
        else:
            version = rng.randrange(3, 12)
        if not selected(ApiKey.PRODUCE, version, round_):
            continue
        frame = produce_frame(rng, world, records, version)
        fuzzer.run(Case(budget.seed, family, ApiKey.PRODUCE, version, round_, description,
                        frame, budget.name))
    if broker.alive():
        fetch_everything(fuzzer, world, budget.seed)
    extra = confluent_read_problems(broker.bootstrap, world.topics) if broker.alive() else []
    fuzzer.finish(extra)


def fetch_everything(fuzzer: Fuzzer, world: Any, seed: int) -> None:
    """Every partition read from offset 0 at every Fetch version the broker serves: the
    broker must answer each, whatever it stored (v0-3 down-convert to old formats)."""
    for api_key, version in served_versions():
        if api_key != ApiKey.FETCH:
            continue
        for topic, partitions in sorted(world.topics.items()):
            body = {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "topic_id": world.topic_ids[topic],
                            "partitions": [
                                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                                for p in range(partitions)]}],
            }
            header = codec.RequestHeader(ApiKey.FETCH, version, 4242, "fuzz-read-back")
            frame = codec.encode_request(header, body)
            fuzzer.run(Case(seed, "read_back", ApiKey.FETCH, version, 0,
                            f"Fetch v{version} of {topic} from offset 0", frame),
                       expect_answer=True)
