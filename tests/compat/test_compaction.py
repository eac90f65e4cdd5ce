"""Log compaction seen through real clients: confluent-kafka and kafka-python write keyed
updates and deletes to a compacted topic, the broker's log cleaner compacts it, and
consumers reading from offset 0 get the latest value of every key and every tombstone,
at their original offsets, in order."""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_clients import (
    Msg,
    confluent_consume,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
    new_topic,
    stored_batches,
)

from kafka_wire import WireClient
from logbus.records.builder import build_batch
from logbus.records.reader import iter_record_set
from logbus.storage.checkpoint import OffsetCheckpointFile
from logbus.storage.log_cleaner_manager import CLEANER_OFFSET_CHECKPOINT

# A small segment.bytes gives many segments, and a low ratio makes every pass eligible.
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "min.cleanable.dirty.ratio": "0.01",
}
CLEANER_OVERRIDES = {"log_cleaner_backoff_ms": "50"}


def keyed_updates(keys: int = 12, rounds: int = 8) -> list[Msg]:
    """Updates to every key, with every third key deleted (a tombstone) in the end."""
    msgs = [
        Msg(f"key-{k}".encode(), f"value-{k}-{r}".encode() * 4)
        for r in range(rounds)
        for k in range(keys)
    ]
    msgs += [Msg(f"key-{k}".encode(), None) for k in range(0, keys, 3)]
    return msgs


def wait_cleaned(running: Any, topic: str, timeout: float = 60.0) -> int:
    """Wait until the cleaner checkpoint of `topic`-0 reaches its active segment."""
    log = running.broker.log_manager.get_log(topic, 0)
    checkpoint = OffsetCheckpointFile(log.dir.parent / CLEANER_OFFSET_CHECKPOINT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reached = checkpoint.read().get((topic, 0), -1)
        if reached == log.active_segment.base_offset and reached > 0:
            return reached
        time.sleep(0.05)
    raise AssertionError(f"{topic}-0 was not cleaned within {timeout}s")


def check_compacted(produced: list[tuple[int, Msg]], got: list[Any], cleaned_below: int) -> None:
    by_offset = dict(produced)
    latest: dict[bytes | None, int] = {}
    for offset, m in produced:
        latest[m.key] = offset
    offsets = [g.offset for g in got]
    assert offsets == sorted(set(offsets)), "records out of order or repeated"
    for g in got:  # every record is the one written at that offset
        assert (g.key, g.value) == (by_offset[g.offset].key, by_offset[g.offset].value)
    # The latest record of every key (tombstones included) is there...
    assert set(latest.values()) <= set(offsets)
    # ...and below the cleaned point only the latest of each key as of that point is (the
    # active segment is never read by a pass).
    latest_cleaned: dict[bytes | None, int] = {}
    for offset, m in produced:
        if offset < cleaned_below:
            latest_cleaned[m.key] = offset
    assert [o for o in offsets if o < cleaned_below] == sorted(latest_cleaned.values())


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_consumers_see_the_compacted_log(broker_factory: Any, client: str) -> None:
    running = broker_factory(**CLEANER_OVERRIDES)
    topic = new_topic("compact")
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic(topic, 1, TOPIC_CONFIGS) == (0, None)
    msgs = keyed_updates()
    # Small producer batches, so that updates spread over many segments.
    if client == "confluent":
        deliveries = confluent_produce(running.bootstrap, topic, msgs, {"batch.size": 400})
    else:
        deliveries = kafka_python_produce(running.bootstrap, topic, msgs, {"batch_size": 400})
    assert [d.error for d in deliveries if d.error is not None] == []
    produced = [(d.offset, m) for d, m in zip(deliveries, msgs, strict=True)]
    cleaned_below = wait_cleaned(running, topic)
    log = running.broker.log_manager.get_log(topic, 0)
    assert log.size_in_bytes < sum(len(m.value or b"") for m in msgs)

    expected_count = len({m.key for o, m in produced if o < cleaned_below}) + sum(
        1 for offset, _ in produced if offset >= cleaned_below
    )
    consume = confluent_consume if client == "confluent" else kafka_python_consume
    got = consume(running.bootstrap, topic, 0, 0, expected_count)
    check_compacted(produced, got, cleaned_below)
    # Tombstones younger than delete.retention.ms (a day by default) are still there.
    assert sum(1 for g in got if g.value is None) == len(range(0, 12, 3))


def test_keyless_records_are_rejected_on_a_compacted_topic(broker_factory: Any) -> None:
    running = broker_factory()
    topic = new_topic("compact")
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic(topic, 1, TOPIC_CONFIGS) == (0, None)
    assert confluent_produce(running.bootstrap, topic, [Msg(b"k", b"kept")])[0].error is None
    assert confluent_produce(running.bootstrap, topic, [Msg(None, b"no key")])[0].error == 87
    assert kafka_python_produce(running.bootstrap, topic, [Msg(None, b"x")])[0].error == 87
    # Kafka's error message names the partition; record_errors names the record.
    records = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3")])
    with WireClient(running.bootstrap) as wire:
        response = wire.produce(topic, 0, records)
    assert response["error_code"] == 87
    assert f"in topic partition {topic}-0" in response["error_message"]
    assert [e["batch_index"] for e in response["record_errors"]] == [1]
    got = confluent_consume(running.bootstrap, topic, 0, 0, 1)
    assert [(g.key, g.value) for g in got] == [(b"k", b"kept")]
    assert running.broker.log_manager.get_log(topic, 0).log_end_offset == 1


def test_the_offsets_topic_is_compacted_and_reloads(broker_factory: Any) -> None:
    """Many commits of one group fill small __consumer_offsets segments; the cleaner
    compacts them and a restarted broker still knows the last committed offset."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    running = broker_factory(
        offsets_topic_num_partitions="1", offsets_topic_segment_bytes="1024", **CLEANER_OVERRIDES
    )
    topic = new_topic("data")
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic(topic, 1) == (0, None)
    consumer = KafkaConsumer(
        bootstrap_servers=running.bootstrap, group_id="g", enable_auto_commit=False
    )
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        for offset in range(1, 61):
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()
    wait_cleaned(running, "__consumer_offsets")
    log = running.broker.log_manager.get_log("__consumer_offsets", 0)
    cleaned = [
        record
        for segment in log.segments[:-1]
        for _, records in iter_record_set(segment.read_bytes(0, segment.size))
        for record in records
    ]
    # The commits below the active segment were compacted to the latest one.
    assert len(cleaned) == 1
    running.restart()
    consumer = KafkaConsumer(
        bootstrap_servers=running.bootstrap, group_id="g", enable_auto_commit=False
    )
    try:
        assert consumer.committed(tp) == 60
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_consumers_read_past_batches_kept_empty_for_idempotent_producers(
    broker_factory: Any, client: str
) -> None:
    """An idempotent producer's last batch keeps its sequence state even when compaction
    removes all its records: it stays as an empty batch, which consumers must skip."""
    running = broker_factory(**CLEANER_OVERRIDES)
    topic = new_topic("compact")
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic(topic, 1, TOPIC_CONFIGS) == (0, None)
    first = confluent_produce(
        running.bootstrap, topic, [Msg(b"a", b"old")], {"enable.idempotence": True}
    )
    updates = [Msg(b"a", b"new")] + [Msg(b"filler-%d" % i, b"x" * 100) for i in range(60)]
    later = kafka_python_produce(running.bootstrap, topic, updates, {"batch_size": 400})
    produced = [
        (d.offset, m) for d, m in zip(first + later, [Msg(b"a", b"old"), *updates], strict=True)
    ]
    cleaned_below = wait_cleaned(running, topic)
    headers = stored_batches(running.bootstrap, topic)
    empty = [h for h in headers if h.record_count == 0]
    assert [(h.base_offset, h.producer_id >= 0) for h in empty] == [(0, True)]
    consume = confluent_consume if client == "confluent" else kafka_python_consume
    count = sum(1 for offset, _ in produced if offset >= 1)
    got = consume(running.bootstrap, topic, 0, 0, count)
    check_compacted(produced, got, cleaned_below)
    assert got[0].offset == 1 and got[0].value == b"new"
