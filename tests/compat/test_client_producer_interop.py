"""Records written by logbus's Producer, read by third-party consumers (confluent-kafka,
kafka-python, aiokafka, kcat): byte-identical keys, values, headers and timestamps; every
codec; keys on the partitions Kafka's Java partitioner picks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from compat_clients import (
    CODECS,
    CONSUMERS,
    KCAT,
    PRODUCERS,
    Delivery,
    Msg,
    expected,
    kcat_consume,
    new_topic,
    sample_messages,
    stored_batches,
)

import logbus
from kafka_wire import create_topic
from logbus.aio import Producer as AioProducer
from logbus.aio import ProducerRecord

pytestmark = pytest.mark.timeout(90)

# Kafka's UtilsTest.testMurmur2: keys and the signed hash Java's Utils.murmur2 returns.
JAVA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def logbus_produce(
    bootstrap: str, topic: str, msgs: Sequence[Msg], config: dict[str, Any] | None = None
) -> list[Delivery]:
    """Send with the blocking Producer, one future per record."""
    with logbus.Producer({"bootstrap.servers": bootstrap, **(config or {})}) as producer:
        futures = [
            producer.send(
                topic,
                m.value,
                key=m.key,
                partition=m.partition,
                timestamp=m.timestamp,
                headers=list(m.headers),
            )
            for m in msgs
        ]
        producer.flush()
        out = []
        for future in futures:
            error = future.exception()
            if error is not None:
                out.append(Delivery(-1, -1, getattr(error, "code", -1)))
            else:
                md = future.result()
                out.append(Delivery(md.partition, md.offset, None))
        return out


def logbus_send_batch(
    bootstrap: str, topic: str, msgs: Sequence[Msg], **config: Any
) -> list[Delivery]:
    async def main() -> list[Delivery]:
        async with AioProducer(bootstrap_servers=bootstrap, **config) as producer:
            mds = await producer.send_batch(
                ProducerRecord(topic, m.value, m.key, m.partition, m.timestamp, m.headers)
                for m in msgs
            )
        return [Delivery(md.partition, md.offset, None) for md in mds]

    return asyncio.run(main())


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_logbus_records_read_byte_identical_by_other_clients(broker: Any, consumer: str) -> None:
    topic = new_topic()
    msgs = sample_messages(48)
    deliveries = logbus_produce(broker.bootstrap, topic, msgs)
    assert deliveries == [Delivery(0, i, None) for i in range(48)]
    assert CONSUMERS[consumer](broker.bootstrap, topic, 0, 0, 48) == expected(msgs)


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_send_batch_records_read_by_other_clients(broker: Any, consumer: str) -> None:
    topic = new_topic()
    msgs = sample_messages(64)
    deliveries = logbus_send_batch(broker.bootstrap, topic, msgs, batch_size=1024)
    assert deliveries == [Delivery(0, i, None) for i in range(64)]
    assert len(stored_batches(broker.bootstrap, topic)) > 1
    assert CONSUMERS[consumer](broker.bootstrap, topic, 0, 0, 64) == expected(msgs)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != "none"])
@pytest.mark.parametrize("consumer", ["confluent", "kafka-python"])
def test_every_codec_read_back_by_other_clients(broker: Any, codec: str, consumer: str) -> None:
    topic = new_topic()
    msgs = sample_messages(120)
    deliveries = logbus_produce(broker.bootstrap, topic, msgs, {"compression.type": codec})
    assert [d.offset for d in deliveries] == list(range(120))
    codec_id = CODECS.index(codec)
    assert {h.compression for h in stored_batches(broker.bootstrap, topic)} == {codec_id}
    assert CONSUMERS[consumer](broker.bootstrap, topic, 0, 0, 120) == expected(msgs)


def test_keys_on_the_java_partitioners_partitions(broker: Any) -> None:
    """The partition of each key of Kafka's own murmur2 test vectors is
    toPositive(hash) % partitions, computed from the Java hash values."""
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 7)
    msgs = [Msg(key, b"v") for key, _ in JAVA_MURMUR2_VECTORS]
    deliveries = logbus_produce(broker.bootstrap, topic, msgs)
    assert [d.partition for d in deliveries] == [
        (java_hash & 0x7FFFFFFF) % 7 for _, java_hash in JAVA_MURMUR2_VECTORS
    ]


@pytest.mark.parametrize("other", list(PRODUCERS))
def test_same_partition_for_the_same_key_as_other_producers(broker: Any, other: str) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 6)
    msgs = [Msg(f"user-{i}".encode(), f"v{i}".encode()) for i in range(50)]
    ours = logbus_produce(broker.bootstrap, topic, msgs)
    config = {"partitioner": "murmur2_random"} if other == "confluent" else None
    theirs = PRODUCERS[other](broker.bootstrap, topic, msgs, config)
    assert [d.partition for d in ours] == [d.partition for d in theirs]


@pytest.mark.skipif(KCAT is None, reason="kcat is not on PATH (`make test` installs it)")
def test_logbus_records_read_by_kcat(broker: Any) -> None:
    topic = new_topic()
    msgs = [
        Msg(f"k{i}".encode(), f"value {i}".encode(), (("h", b"x"),), 1_700_000_000_000 + i)
        for i in range(20)
    ]
    logbus_produce(broker.bootstrap, topic, msgs, {"compression.type": "zstd"})
    assert kcat_consume(broker.bootstrap, topic, 0, "beginning", 20) == expected(msgs)
