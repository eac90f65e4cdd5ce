"""logbus's Producer (asyncio and blocking) against a real broker: send, send_and_wait,
send_batch, flush, close, partitioning, serializers, headers, timestamps, codecs,
idempotence markers and configuration errors."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from typing import Any

import pytest
from producer_helpers import read_partition, read_records, run_threads

import logbus
from logbus.aio import Producer as AioProducer
from logbus.aio import ProducerRecord, RecordMetadata
from logbus.client.errors import ClientClosedError, KafkaError, SerializationError
from logbus.client.partitioner import partition_for_key
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode
from logbus.records.compression import CompressionType


def test_asyncio_send_send_and_wait_and_send_batch(broker: Any) -> None:
    async def main() -> tuple[RecordMetadata, RecordMetadata, list[RecordMetadata]]:
        async with AioProducer({"bootstrap.servers": broker.bootstrap}) as producer:
            future = await producer.send("t", b"one", key=b"k1")
            waited = await producer.send_and_wait("t", b"two", timestamp=1_700_000_000_000)
            first = await future
            batch = await producer.send_batch(
                [ProducerRecord("t", b"v%d" % i, key=b"k") for i in range(100)]
            )
            return first, waited, batch

    first, waited, batch = asyncio.run(main())
    assert first == RecordMetadata("t", 0, 0, first.timestamp)
    assert waited == RecordMetadata("t", 0, 1, 1_700_000_000_000)
    assert [m.offset for m in batch] == list(range(2, 102))
    records = read_records(broker.bootstrap, "t")
    assert [(r.key, r.value) for r in records[:2]] == [(b"k1", b"one"), (None, b"two")]
    assert records[1].timestamp == 1_700_000_000_000
    assert records[0].timestamp == first.timestamp
    assert [r.value for r in records[2:]] == [b"v%d" % i for i in range(100)]


def test_blocking_send_futures_callbacks_flush_and_close(broker: Any) -> None:
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    done = threading.Event()

    def on_delivery(md: RecordMetadata | None, err: BaseException | None) -> None:
        delivered.append((md, err))
        if len(delivered) == 50:
            done.set()

    with logbus.Producer(bootstrap_servers=broker.bootstrap, linger_ms=50) as producer:
        futures = [
            producer.send("t", b"r%d" % i, on_delivery=on_delivery) for i in range(50)
        ]
        assert all(isinstance(f, logbus.FutureRecordMetadata) for f in futures)
        producer.flush()
        assert all(f.done() for f in futures)
        assert [f.result().offset for f in futures] == list(range(50))
        assert done.wait(60)
        md = producer.send_and_wait("t", b"last")
        assert md.offset == 50
        pair = producer.send_batch([ProducerRecord("t", b"x"), ProducerRecord("t", b"y")])
        assert [(m.topic, m.partition, m.offset) for m in pair] == [("t", 0, 51), ("t", 0, 52)]
    assert sorted(md.offset for md, err in delivered if md is not None) == list(range(50))
    assert all(err is None for _, err in delivered)
    with pytest.raises(ClientClosedError):
        producer.send("t", b"after close")
    assert [r.value for r in read_records(broker.bootstrap, "t")] == [
        *(b"r%d" % i for i in range(50)),
        b"last",
        b"x",
        b"y",
    ]


def test_keys_land_where_the_java_partitioner_puts_them(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="5")
    keys = [b"key-%d" % i for i in range(40)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap) as producer:
        mds = [producer.send("keyed", b"v", key=k) for k in keys]
        producer.flush()
        results = [f.result() for f in mds]
        assert producer.partitions_for("keyed") == [0, 1, 2, 3, 4]
    assert [md.partition for md in results] == [partition_for_key(k, 5) for k in keys]
    seen = {p: [r.key for r in read_records(broker.bootstrap, "keyed", p)] for p in range(5)}
    for key in keys:
        assert key in seen[partition_for_key(key, 5)]


def test_keyless_records_stick_to_a_partition_per_batch(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="4")

    async def main() -> list[RecordMetadata]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, batch_size=2000) as p:
            return await p.send_batch([ProducerRecord("s", b"x" * 100) for _ in range(200)])

    mds = asyncio.run(main())
    # Consecutive records share a partition until a batch fills, then move on.
    runs = 1 + sum(1 for a, b in itertools.pairwise(mds) if a.partition != b.partition)
    assert 1 < runs < 200
    assert {md.partition for md in mds} == {0, 1, 2, 3}
    for partition in range(4):
        offsets = [md.offset for md in mds if md.partition == partition]
        assert offsets == list(range(len(offsets)))


def test_explicit_partition_headers_and_tombstones(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    with logbus.Producer(bootstrap_servers=broker.bootstrap) as producer:
        md = producer.send(
            "h", None, key=b"gone", partition=2, headers=[("trace", b"abc"), ("empty", None)]
        ).result()
        assert (md.partition, md.offset) == (2, 0)
        with pytest.raises(KafkaError) as info:
            producer.send("h", b"v", partition=3)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    [record] = read_records(broker.bootstrap, "h", 2)
    assert record.value is None
    assert record.key == b"gone"
    assert record.headers == (("trace", b"abc"), ("empty", None))


def test_send_batch_keeps_order_across_many_batches_and_partitions(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    records = [
        ProducerRecord("o", b"%d" % i, key=b"k%d" % (i % 7)) for i in range(3000)
    ]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=1024) as producer:
        mds = producer.send_batch(records)
    assert [md.partition for md in mds] == [partition_for_key(r.key, 3) for r in records]
    for partition in range(3):
        expected = [r.value for r in records if partition_for_key(r.key, 3) == partition]
        stored = read_records(broker.bootstrap, "o", partition)
        assert [r.value for r in stored] == expected
        mine = [md for md in mds if md.partition == partition]
        assert [md.offset for md in mine] == list(range(len(expected)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec(broker: Any, codec: str) -> None:
    values = [json.dumps({"n": i, "pad": "x" * 50}).encode() for i in range(500)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, compression_type=codec) as p:
        p.send_batch([ProducerRecord("c", v) for v in values])
    batches = read_partition(broker.bootstrap, "c")
    assert {h.compression for h, _ in batches} == {CompressionType.from_name(codec)}
    assert [r.value for _, records in batches for r in records] == values


def test_idempotent_by_default_batches_carry_producer_id_and_sequences(broker: Any) -> None:
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=500) as p:
        p.send_batch([ProducerRecord("i", b"x" * 100) for _ in range(20)])
    with logbus.Producer(bootstrap_servers=broker.bootstrap, acks=1) as p:
        assert p.config["enable.idempotence"] is False
        p.send_and_wait("i", b"plain")
    batches = read_partition(broker.bootstrap, "i")
    idempotent = [h for h, _ in batches[:-1]]
    assert len(idempotent) > 1
    assert len({h.producer_id for h in idempotent}) == 1
    assert idempotent[0].producer_id >= 0
    sequences = [h.base_sequence for h in idempotent]
    assert sequences[0] == 0
    for previous, header in itertools.pairwise(idempotent):
        assert header.base_sequence == previous.base_sequence + previous.record_count
    assert batches[-1][0].producer_id == -1


def test_acks_zero_reports_no_offset(broker: Any) -> None:
    with logbus.Producer(bootstrap_servers=broker.bootstrap, acks=0) as p:
        md = p.send_and_wait("z", b"fire and forget")
    assert md.offset == -1
    assert md.partition == 0


def test_serializers(broker: Any) -> None:
    def upper(value: Any) -> bytes:
        return str(value).upper().encode()

    config = {"bootstrap.servers": broker.bootstrap, "value.serializer": "json"}
    with logbus.Producer(config, key_serializer="str") as p:
        p.send_and_wait("j", {"a": [1, "é"]}, key="clé")
        with pytest.raises(SerializationError):
            p.send("j", {"set": {1}})
        with pytest.raises(SerializationError):
            p.send("j", {"a": 1}, key=b"not a str")
        p.send_and_wait("j", None, key="tomb")
    with logbus.Producer(bootstrap_servers=broker.bootstrap, value_serializer=upper) as p:
        p.send_and_wait("j", "shout")
        with pytest.raises(SerializationError):
            p.send("j", None, key="a str for the bytes serializer")
    records = read_records(broker.bootstrap, "j")
    assert [(r.key, r.value) for r in records] == [
        ("clé".encode(), '{"a":[1,"é"]}'.encode()),
        (b"tomb", None),
        (None, b"SHOUT"),
    ]


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigError, match=re.escape("did you mean 'linger.ms'")):
        AioProducer(lingr_ms=5)
    with pytest.raises(ConfigError, match=re.escape("unknown producer config 'no.such.thing'")):
        AioProducer({"no.such.thing": 1})
    with pytest.raises(ConfigError, match="acks"):
        AioProducer(acks="some")
    with pytest.raises(ConfigError, match=re.escape("compression.type")):
        AioProducer(compression_type="brotli")
    with pytest.raises(ConfigError, match=re.escape("enable.idempotence=true: acks must be all")):
        AioProducer(enable_idempotence=True, acks=1)
    with pytest.raises(ConfigError, match=re.escape("delivery.timeout.ms")):
        AioProducer(delivery_timeout_ms=1000)
    with pytest.raises(ConfigError, match=re.escape("value.serializer")):
        AioProducer(value_serializer="yaml")
    assert AioProducer(acks="1").config["enable.idempotence"] is False
    assert AioProducer({"acks": "all"}).config["acks"] == -1


def test_records_over_max_request_size_are_refused(broker: Any) -> None:
    with logbus.Producer(bootstrap_servers=broker.bootstrap, max_request_size=1000) as p:
        with pytest.raises(KafkaError) as info:
            p.send("big", b"x" * 2000)
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert p.send_and_wait("big", b"x" * 500).offset == 0


BAD_RECORDS: list[dict[str, Any]] = [
    {"headers": [("h", "a str, not bytes")]},
    {"headers": [(b"a bytes key", b"v")]},
    {"timestamp": "now"},
    {"timestamp": 2**70},
    {"timestamp": -5},
]


@pytest.mark.parametrize(
    "bad", BAD_RECORDS, ids=["header-value", "header-key", "ts", "ts-big", "ts-negative"]
)
def test_a_record_that_cannot_be_encoded_leaves_its_batch_intact(
    broker: Any, bad: dict[str, Any]
) -> None:
    # A record that fails while it is encoded into its partition's open batch raises
    # from send(), first in a batch or after other records, and leaves the batch as it
    # was: the records before and after it are written whole, none of them corrupt.
    with logbus.Producer(bootstrap_servers=broker.bootstrap, linger_ms=60_000) as p:
        p.partitions_for("bad")
        with pytest.raises((TypeError, ValueError, AttributeError)):
            p.send("bad", b"bad first", **bad)
        sent = [p.send("bad", b"before")]
        with pytest.raises((TypeError, ValueError, AttributeError)):
            p.send("bad", b"bad", **bad)
        sent.append(p.send("bad", b"after", headers=[("h", b"v")]))
        p.flush()
        assert [f.result().offset for f in sent] == [0, 1]

    async def asyncio_send() -> list[int]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, linger_ms=60_000) as aio:
            with pytest.raises((TypeError, ValueError, AttributeError)):
                await aio.send("bad", b"bad first", **bad)
            with pytest.raises((TypeError, ValueError, AttributeError)):
                await aio.send_batch([ProducerRecord("bad", b"bad", **bad)])
            return [md.offset for md in await aio.send_batch([ProducerRecord("bad", b"fine")])]

    assert asyncio.run(asyncio_send()) == [2]
    records = read_records(broker.bootstrap, "bad")
    assert [(r.value, list(r.headers)) for r in records] == [
        (b"before", []),
        (b"after", [("h", b"v")]),
        (b"fine", []),
    ]


def test_asyncio_producer_must_be_started_and_refuses_after_close(broker: Any) -> None:
    async def main() -> None:
        producer = AioProducer(bootstrap_servers=broker.bootstrap)
        with pytest.raises(ClientClosedError, match="not started"):
            await producer.send("t", b"v")
        await producer.start()
        future = await producer.send("t", b"v", on_delivery=seen.append_pair)
        await producer.close()
        assert (await future).offset == 0
        with pytest.raises(ClientClosedError):
            await producer.send("t", b"v")

    class Seen:
        def __init__(self) -> None:
            self.pairs: list[tuple[Any, Any]] = []

        def append_pair(self, md: Any, err: Any) -> None:
            self.pairs.append((md, err))

    seen = Seen()
    asyncio.run(main())
    assert len(seen.pairs) == 1
    assert seen.pairs[0][1] is None


def test_blocking_send_gives_each_record_its_batchs_error(broker: Any) -> None:
    # The broker refuses the whole batch of "refusing" (larger than its
    # max.message.bytes): every record of it fails, through its future and its callback,
    # while a record of another topic sent in between is written.
    with logbus.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([logbus.NewTopic("refusing", 1, config={"max.message.bytes": "2000"})])
    errors: list[BaseException | None] = []
    with logbus.Producer(bootstrap_servers=broker.bootstrap, linger_ms=100) as producer:
        refused = [
            producer.send("refusing", b"v" * 100, on_delivery=lambda md, err: errors.append(err))
            for _ in range(20)
        ]
        fine = producer.send("accepting", b"ok")
        refused += [producer.send("refusing", b"w" * 100) for _ in range(20)]
        producer.flush()
        assert fine.result(10).offset == 0
        for future in refused:
            assert future.done()
            error = future.exception()
            assert isinstance(error, KafkaError)
            assert error.code == ErrorCode.MESSAGE_TOO_LARGE
            with pytest.raises(KafkaError):
                future.result()
    assert len(errors) == 20 and all(isinstance(e, KafkaError) for e in errors)
    assert read_records(broker.bootstrap, "refusing") == []


def test_blocking_send_from_many_threads_keeps_each_threads_order(broker_factory: Any) -> None:
    # Records are encoded on the senders' threads: each thread's records for a key keep
    # their order in the partition, and each future gives its own record's offset.
    broker = broker_factory(num_partitions="3")
    threads, per_thread = 4, 3000
    futures: dict[int, list[logbus.FutureRecordMetadata]] = {}
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=4096) as producer:

        def run(thread: int) -> None:
            key = b"thread-%d" % thread
            futures[thread] = [
                producer.send("threads", b"%d-%05d" % (thread, i), key=key)
                for i in range(per_thread)
            ]

        run_threads(run, threads)
        producer.flush()
    for thread, sent in futures.items():
        metadata = [future.result() for future in sent]
        partition = partition_for_key(b"thread-%d" % thread, 3)
        assert {md.partition for md in metadata} == {partition}
        offsets = [md.offset for md in metadata]
        assert offsets == sorted(offsets) and len(set(offsets)) == per_thread
        stored = {r.offset: r.value for r in read_records(broker.bootstrap, "threads", partition)}
        assert [stored[o] for o in offsets] == [b"%d-%05d" % (thread, i) for i in range(per_thread)]
