"""send_batch / send_many's columnar form (`topic=`, `values=`, `keys=`) against a real
broker: it writes the same batches to the same partitions as the record form, its values
and keys go through the serializers, null values and mixed null keys still arrive, the
blocking producer offers it, confluent-kafka reads what it wrote, and bad arguments get a
clear TypeError / ValueError before anything is buffered."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from producer_helpers import read_partition, read_records

import logbus
from brokers import RunningBroker
from logbus.aio import Producer as AioProducer
from logbus.aio import ProducerRecord, RecordMetadata
from logbus.client.errors import KafkaError, SerializationError
from logbus.client.partitioner import StickyPartitioner, partition_for_key
from logbus.records.batch import BatchHeader
from logbus.records.record import Record

PARTITIONS = 3
_topics = itertools.count()


def _layout(bootstrap: str, topic: str) -> list[list[tuple[Any, ...]]]:
    """Every batch of every partition of `topic`, header fields and records, without what
    differs between two sends of the same records (base offset, timestamps, CRC). Record
    timestamp deltas are left out too: a send that waits for buffer.memory stamps the rest
    of its records after the wait, so on a loaded machine the two sends' deltas differ by a
    millisecond or two (the same one-byte varint: batch lengths still compare)."""

    def batch(header: BatchHeader, records: list[Record]) -> tuple[Any, ...]:
        return (
            header.batch_length,
            header.attributes,
            header.last_offset_delta,
            header.record_count,
            [
                (r.offset - header.base_offset, r.key, r.value, r.headers)
                for r in records
            ],
        )

    return [
        [batch(h, rs) for h, rs in read_partition(bootstrap, topic, p)]
        for p in range(PARTITIONS)
    ]


keys_strategy = st.one_of(
    st.none(),  # every key null
    st.just("keyed"),  # every key bytes
    st.just("mixed"),  # some null: the general path, for both forms
)


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """One broker for every example of the property test (a broker per example would
    make it slow); each example writes topics of its own."""
    running = RunningBroker(
        tmp_path_factory.mktemp("columns"), {"num.partitions": str(PARTITIONS)}
    ).start()
    yield running
    running.stop()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 400), min_size=1, max_size=300),
    key_kind=keys_strategy,
    batch_size=st.sampled_from([600, 3000, 16_384]),
    idempotent=st.booleans(),
)
def test_columns_write_the_batches_and_partitions_of_the_record_form(
    shared_broker: Any, lengths: list[int], key_kind: str | None, batch_size: int,
    idempotent: bool,
) -> None:
    values = [bytes([i % 251]) * n for i, n in enumerate(lengths)]
    keys: list[bytes | None] | None = None
    if key_kind == "keyed":
        keys = [b"key-%d" % (i % 7) for i in range(len(values))]
    elif key_kind == "mixed":
        keys = [None if i % 3 else b"key-%d" % (i % 5) for i in range(len(values))]
    n = next(_topics)
    by_records, by_columns = f"records-{n}", f"columns-{n}"

    async def main() -> tuple[list[RecordMetadata], list[RecordMetadata]]:
        # A linger far beyond the test: only a full batch is cut early, so both forms cut
        # the same batches however slowly a loaded machine runs the loop (send_batch sends
        # the rest at once).
        async with AioProducer(bootstrap_servers=shared_broker.bootstrap,
                               batch_size=batch_size, enable_idempotence=idempotent,
                               linger_ms=60_000) as p:
            for topic in (by_records, by_columns):
                # Keyless records start on the same partition in both topics (the sticky
                # partitioner's start is otherwise random).
                await p.partitions_for(topic)
                p.router.stick_to(topic, StickyPartitioner(PARTITIONS, start=1))
            column = keys or [None] * len(values)
            records = [ProducerRecord(by_records, v, k) for v, k in zip(values, column,
                                                                         strict=True)]
            return (await p.send_batch(records),
                    await p.send_batch(topic=by_columns, values=values, keys=keys))

    from_records, from_columns = asyncio.run(main())
    assert [md.topic for md in from_columns] == [by_columns] * len(values)
    assert [(md.partition, md.offset) for md in from_columns] == [
        (md.partition, md.offset) for md in from_records
    ]
    for md, key in zip(from_columns, keys or [], strict=False):
        if key is not None:
            assert md.partition == partition_for_key(key, PARTITIONS)
    # The same batches, byte for byte but for offsets, timestamps and CRC.
    assert _layout(shared_broker.bootstrap, by_columns) == _layout(
        shared_broker.bootstrap, by_records
    )

def test_columns_go_through_the_configured_serializers(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="4")
    values = [f"value {i}" for i in range(300)]
    keys = [f"user-{i % 9}" for i in range(300)]

    async def main() -> tuple[list[RecordMetadata], list[RecordMetadata]]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, key_serializer="str",
                               value_serializer="json") as p:
            strs = await p.send_batch(topic="strs", values=values, keys=keys)
            docs = await p.send_batch(topic="docs", values=({"n": i} for i in range(10)))
            return strs, docs

    strs, docs = asyncio.run(main())
    stored = {
        (p, r.offset): r for p in range(4) for r in read_records(broker.bootstrap, "strs", p)
    }
    for md, value, key in zip(strs, values, keys, strict=True):
        assert md.partition == partition_for_key(key.encode(), 4)
        record = stored[md.partition, md.offset]
        assert (record.key, record.value) == (key.encode(), b'"%s"' % value.encode())
    written = {(md.partition, md.offset) for md in docs}
    read = {
        (p, r.offset): r.value for p in range(4) for r in read_records(broker.bootstrap, "docs", p)
    }
    assert set(read) == written
    assert [read[md.partition, md.offset] for md in docs] == [b'{"n":%d}' % i for i in range(10)]


def test_null_values_and_mixed_null_keys_arrive_as_given(broker: Any) -> None:
    values: list[bytes | None] = [b"a", None, b"c", None]
    keys: list[bytes | None] = [None, b"k1", b"k2", None]
    with logbus.Producer(bootstrap_servers=broker.bootstrap) as producer:
        mds = producer.send_batch(topic="nulls", values=values, keys=keys)
        assert producer.send_batch(topic="nulls", values=[]) == []
    assert [md.offset for md in mds] == [0, 1, 2, 3]
    assert [(r.key, r.value) for r in read_records(broker.bootstrap, "nulls")] == list(
        zip(keys, values, strict=True)
    )


def test_send_many_columns_keep_chunks_in_flight_in_order(broker: Any) -> None:
    chunks = [[b"%d-%d" % (c, i) for i in range(2000)] for c in range(5)]

    async def main() -> list[RecordMetadata]:
        out: list[RecordMetadata] = []
        async with AioProducer(bootstrap_servers=broker.bootstrap, batch_size=8192) as p:
            pending: asyncio.Future[list[RecordMetadata]] | None = None
            for chunk in chunks:
                sent = await p.send_many(topic="stream", values=iter(chunk))
                if pending is not None:
                    out += await pending
                pending = sent
            assert pending is not None
            out += await pending
        return out

    mds = asyncio.run(main())
    assert [md.offset for md in mds] == list(range(10_000))
    assert [r.value for r in read_records(broker.bootstrap, "stream")] == [
        v for chunk in chunks for v in chunk
    ]


def test_confluent_kafka_reads_what_blocking_columns_wrote(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    values = [b"payload-%04d" % i * 10 for i in range(3000)]
    keys = [b"key-%d" % (i % 13) for i in range(3000)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=16_384) as producer:
        mds = producer.send_batch(topic="shared", values=values, keys=keys)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "columns",
                         "enable.auto.commit": False})
    got: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    try:
        consumer.assign([TopicPartition("shared", p, 0) for p in range(3)])
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=1):
                assert message.error() is None, message.error()
                got[message.partition(), message.offset()] = (message.key(), message.value())
    finally:
        consumer.close()
    assert len(got) == len(values)
    for md, key, value in zip(mds, keys, values, strict=True):
        assert md.partition == partition_for_key(key, 3)
        assert got[md.partition, md.offset] == (key, value)


def test_bad_columns_are_refused_before_anything_is_buffered(broker: Any) -> None:
    with logbus.Producer(bootstrap_servers=broker.bootstrap) as producer:
        refused: list[tuple[type[Exception], str, dict[str, Any]]] = [
            (ValueError, r"2 keys for 3 values",
             {"topic": "bad", "values": [b"a", b"b", b"c"], "keys": [b"k", b"l"]}),
            (SerializationError, r"bytes serializer takes bytes, not str",
             {"topic": "bad", "values": [b"a", "text"]}),
            (SerializationError, r"bytes serializer takes bytes, not int",
             {"topic": "bad", "values": [b"a"], "keys": [7]}),
            (TypeError, r"topic= missing", {"values": [b"a"]}),
            (TypeError, r"values= missing", {"topic": "bad"}),
            (TypeError, r"topic= and values= missing", {}),
            (TypeError, r"topic must be a str, not int", {"topic": 5, "values": [b"a"]}),
            (TypeError, r"values must be a list of values, not one bytes",
             {"topic": "bad", "values": b"abc"}),
            (TypeError, r"keys must be a list of keys, not int",
             {"topic": "bad", "values": [b"a"], "keys": 3}),
        ]
        for error, message, kwargs in refused:
            with pytest.raises(error, match=message):
                producer.send_batch(**kwargs)
        with pytest.raises(TypeError, match="not both"):
            producer.send_batch([ProducerRecord("bad", b"a")], topic="bad", values=[b"b"])
        producer.send_batch(topic="bad", values=[b"good"])
    # Only the call that was accepted wrote anything.
    assert [r.value for r in read_records(broker.bootstrap, "bad")] == [b"good"]


def test_async_columns_refuse_mixed_forms(broker: Any) -> None:
    async def main() -> None:
        async with AioProducer(bootstrap_servers=broker.bootstrap) as p:
            with pytest.raises(TypeError, match="not both"):
                await p.send_many([], topic="x", values=[])
            with pytest.raises(ValueError, match="1 keys for 2 values"):
                await p.send_many(topic="x", values=[b"a", b"b"], keys=[b"k"])

    asyncio.run(main())


def test_columns_keep_the_partition_and_the_timestamps_given(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    base = 1_700_000_000_000
    values = [b"v%05d" % i for i in range(3000)]  # one length: the keyless fast path's shape
    stamps = [base + (i * 7919) % 5000 - 2500 for i in range(3000)]  # out of order
    keys = [b"k%d" % (i % 5) for i in range(3000)]

    async def main() -> tuple[list[RecordMetadata], list[RecordMetadata]]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, batch_size=8192) as p:
            keyless = await p.send_many(topic="kept", values=values, partition=2,
                                        timestamps=stamps)
            keyed = await p.send_many(topic="kept", values=values, keys=keys, partition=1,
                                      timestamps=iter(stamps))
            return await keyless, await keyed

    keyless, keyed = asyncio.run(main())
    for mds in (keyless, keyed):
        assert [md.timestamp for md in mds] == stamps
        assert [md.offset for md in mds] == list(range(3000))
    assert {md.partition for md in keyless} == {2}
    assert {md.partition for md in keyed} == {1}
    # confluent-kafka reads them back: keys, values and timestamps, in order.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kept",
                         "enable.auto.commit": False})
    got: dict[int, list[tuple[bytes | None, bytes | None, int]]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([TopicPartition("kept", p, 0) for p in range(3)])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < 6000 and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=1):
                assert message.error() is None, message.error()
                got[message.partition()].append(
                    (message.key(), message.value(), message.timestamp()[1])
                )
    finally:
        consumer.close()
    assert got[0] == []
    assert got[2] == [(None, v, t) for v, t in zip(values, stamps, strict=True)]
    assert got[1] == list(zip(keys, values, stamps, strict=True))


def test_bad_partition_or_timestamps_are_refused_before_anything_is_buffered(
    broker_factory: Any,
) -> None:
    broker = broker_factory(num_partitions="2")
    refused: list[tuple[type[Exception], str, dict[str, Any]]] = [
        (ValueError, r"1 timestamps for 2 values", {"timestamps": [5]}),
        (ValueError, r"Invalid timestamp: -1", {"timestamps": [5, -1]}),
        (ValueError, r"Invalid timestamp: '5'", {"timestamps": [5, "5"]}),
        (TypeError, r"partition must be a non-negative int, not -1", {"partition": -1}),
        (KafkaError, r"has no partition 2 \(it has 2\)", {"partition": 2}),
    ]

    async def main() -> None:
        async with AioProducer(bootstrap_servers=broker.bootstrap) as p:
            for error, message, kwargs in refused:
                with pytest.raises(error, match=message):
                    await p.send_many(topic="checked", values=[b"a", b"b"], **kwargs)
            with pytest.raises(TypeError, match="not both"):
                await p.send_many([], timestamps=[])
            await p.send_batch(topic="checked", values=[b"good"])

    asyncio.run(main())
    assert [r.value for p in range(2) for r in read_records(broker.bootstrap, "checked", p)] == [
        b"good"
    ]
