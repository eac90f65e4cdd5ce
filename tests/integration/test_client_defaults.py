"""The clients' defaults (issue 21): what the documentation's settings tables say is what a
client made with nothing but `bootstrap.servers` uses, the producer's default batches are
~1 MB rather than Kafka's 16 KiB, and `buffer.memory` still bounds what is held."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from producer_helpers import read_partition

import logbus
from logbus.aio import Consumer as AioConsumer
from logbus.aio import Producer as AioProducer
from logbus.client.errors import KafkaTimeoutError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def documented_defaults(page: str) -> dict[str, str]:
    """Each `| \\`setting\\` | default | ... |` row of a page's tables: setting -> default
    as written (backquotes dropped)."""
    rows = re.findall(r"^\| `([a-z.]+)` \| ([^|]+) \|", (DOCS / page).read_text(), re.M)
    return {name: default.strip().strip("`") for name, default in rows}


@pytest.mark.parametrize(
    ("page", "make", "settings"),
    [
        ("client.md", AioProducer,
         ("acks", "enable.idempotence", "batch.size", "linger.ms", "buffer.memory",
          "max.request.size", "max.in.flight.requests.per.connection")),
        ("client-consumer.md", AioConsumer,
         ("max.poll.records", "fetch.min.bytes", "fetch.max.wait.ms", "fetch.max.bytes",
          "max.partition.fetch.bytes")),
    ],
)
def test_the_documented_defaults_are_the_clients(page: str, make: Any,
                                                 settings: tuple[str, ...]) -> None:
    documented = documented_defaults(page)
    config = make({"bootstrap.servers": "127.0.0.1:1"}).config
    for name in settings:
        value = config[name]
        if name == "acks":
            value = {-1: "all"}.get(value, str(value))
        elif isinstance(value, bool):
            value = str(value).lower()
        assert documented[name] == str(value), name


def test_default_producer_fills_batches_of_about_a_megabyte(broker: Any) -> None:
    # 3,000 records of 1 KiB through the bulk path: with Kafka's 16 KiB batches they would
    # make ~200 batches; with the default batch.size (1,000,000) they make 4.
    with logbus.Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send_batch(topic="big", values=[b"v" * 1024] * 3000)
    batches = read_partition(broker.bootstrap, "big")
    assert sum(len(records) for _, records in batches) == 3000
    assert len(batches) == 4
    assert all(900_000 < header.size <= 1_000_000 for header, _ in batches[:-1])


def test_default_buffer_memory_still_bounds_what_is_held(broker: Any) -> None:
    # With the broker gone nothing drains: sends fill buffer.memory (Kafka's 32 MiB,
    # unchanged by the larger batches) and the next one times out after max.block.ms.
    producer = logbus.Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 200})
    limit = producer.metrics()["buffer-available-bytes"]
    assert limit == 32 * 1024 * 1024
    producer.send_and_wait("held", b"while up")
    broker.stop()
    value = b"x" * 1024
    held = 0
    with pytest.raises(KafkaTimeoutError):
        for _ in range(40_000):
            producer.send("held", value)
            held += 1
    size = len(value) + 21  # the accounted size: value plus RECORD_OVERHEAD
    assert limit - size < held * size <= limit
    assert producer.metrics()["buffer-available-bytes"] < size
    producer.close(timeout=0)
