"""Produce with one client, consume with another: keys, values, headers and timestamps
arrive byte-identical, and equal to what the broker stored (read back raw)."""

from __future__ import annotations

from typing import Any

import pytest
from compat_clients import (
    CONSUMERS,
    KCAT,
    PRODUCERS,
    Got,
    Msg,
    expected,
    kcat_consume,
    kcat_produce,
    new_topic,
    sample_messages,
)

from kafka_wire import WireClient, create_topic
from logbus.client.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(90)

needs_kcat = pytest.mark.skipif(
    KCAT is None, reason="kcat is not on PATH (`make test` installs it)"
)

PAIRS = [(p, c) for p in PRODUCERS for c in CONSUMERS if p != c]


def stored(bootstrap: str, topic: str, partition: int = 0) -> list[Got]:
    with WireClient(bootstrap) as client:
        records = client.read_all(topic, partition)
    return [
        Got(partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in records
    ]


@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_records_cross_clients_byte_identical(broker: Any, producer: str, consumer: str) -> None:
    topic = new_topic()
    msgs = sample_messages(48, null_header=producer != "kafka-python")
    deliveries = PRODUCERS[producer](broker.bootstrap, topic, msgs)
    assert [(d.partition, d.offset, d.error) for d in deliveries] == [
        (0, i, None) for i in range(48)
    ]
    want = expected(msgs)
    assert stored(broker.bootstrap, topic) == want
    assert CONSUMERS[consumer](broker.bootstrap, topic, 0, 0, 48) == want


@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_keyed_records_over_partitions_cross_clients(
    broker: Any, producer: str, consumer: str
) -> None:
    """With murmur2 (the Python clients' default, librdkafka's `murmur2_random`) every
    client puts a key on the same partition, and any client reads it back in order."""
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 6)
    msgs = [Msg(f"key-{i % 10}".encode(), f"v{i}".encode()) for i in range(60)]
    config = {"partitioner": "murmur2_random"} if producer == "confluent" else None
    deliveries = PRODUCERS[producer](broker.bootstrap, topic, msgs, config)
    sent: dict[int, list[Msg]] = {}
    for m, d in zip(msgs, deliveries, strict=True):
        assert m.key is not None
        assert d.partition == partition_for_key(m.key, 6)
        sent.setdefault(d.partition, []).append(m)
    for partition, records in sent.items():
        got = CONSUMERS[consumer](broker.bootstrap, topic, partition, 0, len(records))
        assert [(r.offset, r.key, r.value) for r in got] == [
            (i, m.key, m.value) for i, m in enumerate(records)
        ]


KCAT_LINES: list[tuple[bytes | None, bytes]] = [
    (f"key-{i}".encode(), f"value {i} with spaces/and:punctuation".encode()) for i in range(20)
] + [(None, b"keyless"), (b"empty-value", b"")]


@needs_kcat
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_kcat_to_python_clients(broker: Any, consumer: str) -> None:
    topic = new_topic()
    proc = kcat_produce(
        broker.bootstrap, topic, KCAT_LINES, headers=("trace=abc", "trace=def", "e="),
        extra=["-z", "zstd"],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    truth = stored(broker.bootstrap, topic)
    assert [(r.key, r.value) for r in truth] == KCAT_LINES
    assert {r.headers for r in truth} == {(("trace", b"abc"), ("trace", b"def"), ("e", b""))}
    assert CONSUMERS[consumer](broker.bootstrap, topic, 0, 0, len(KCAT_LINES)) == truth


@needs_kcat
@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_python_clients_to_kcat(broker: Any, producer: str) -> None:
    topic = new_topic()
    msgs = [
        Msg(key, value, (("h", b"x"), ("h2", b"")), 1_700_000_000_000 + i)
        for i, (key, value) in enumerate(KCAT_LINES)
    ]
    PRODUCERS[producer](broker.bootstrap, topic, msgs)
    truth = stored(broker.bootstrap, topic)
    assert truth == expected(msgs)
    assert kcat_consume(broker.bootstrap, topic, 0, "beginning", len(msgs)) == truth
