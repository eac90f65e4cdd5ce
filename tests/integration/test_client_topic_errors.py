"""What the blocking client tells a user who names a topic the broker cannot serve."""

from __future__ import annotations

from typing import Any

import pytest

from logbus import Consumer, Producer
from logbus.client.errors import KafkaError
from logbus.protocol import ErrorCode


def test_invalid_topic_name_is_explained(broker: Any) -> None:
    with (Producer(bootstrap_servers=broker.bootstrap, max_block_ms=10_000) as producer,
          pytest.raises(KafkaError) as raised):
        producer.send("bad topic!", b"x").result(30)
    assert raised.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert "'bad topic!' is not a valid topic name" in str(raised.value)


def test_missing_partition_names_the_partition_count(broker: Any) -> None:
    with Producer(bootstrap_servers=broker.bootstrap) as producer:
        producer.send("three", b"x").result(30)  # auto-created with one partition
        with pytest.raises(KafkaError) as raised:
            producer.send("three", b"x", partition=2).result(30)
    assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "has no partition 2 (it has 1)" in str(raised.value)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g",
                  auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["three"])
        assert [r.value for r in consumer.poll(timeout=15.0)] == [b"x"]
