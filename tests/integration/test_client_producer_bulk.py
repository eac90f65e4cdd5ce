"""send_batch / send_many's bulk path against a real broker: what it writes reads back in
order, keys land where `send` puts them, it interleaves with `send` in call order, it keeps
idempotent sequences, and it reports too-large records and a full buffer as `send` does."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from producer_helpers import read_partition, read_partition_async, read_records

import logbus
from logbus.aio import Producer as AioProducer
from logbus.aio import ProducerRecord, RecordMetadata
from logbus.client.errors import KafkaError, KafkaTimeoutError
from logbus.client.partitioner import partition_for_key
from logbus.protocol import ErrorCode


def test_keyless_bulk_records_read_back_where_their_metadata_says(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    values = [b"%05d" % i + b"x" * 200 for i in range(3000)]

    async def main() -> list[RecordMetadata]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, batch_size=20_000) as p:
            return await p.send_batch(ProducerRecord("bulk", v) for v in values)

    mds = asyncio.run(main())
    assert len(mds) == len(values)
    # Sticky partitioning: runs of a batch's worth, then the next partition.
    runs = [len(list(group)) for _, group in itertools.groupby(mds, lambda md: md.partition)]
    assert len(runs) > 3
    assert max(runs) * 211 < 3 * 20_000
    assert {md.partition for md in mds} == {0, 1, 2}
    sizes: list[int] = []
    for partition in range(3):
        stored = {r.offset: r for r in read_records(broker.bootstrap, "bulk", partition)}
        mine = [(md, v) for md, v in zip(mds, values, strict=True) if md.partition == partition]
        assert [md.offset for md, _ in mine] == list(range(len(stored)))
        for md, value in mine:
            record = stored[md.offset]
            assert (record.key, record.value, record.headers) == (None, value, ())
            assert record.timestamp == md.timestamp
        for header, records in read_partition(broker.bootstrap, "bulk", partition):
            assert header.size <= 20_000
            assert header.record_count == len(records)
            sizes.append(header.size)
    # Every batch but the last is filled to within a record of batch.size.
    assert sum(1 for size in sizes if size < 20_000 - 2 * 220) <= 1


def test_keyed_bulk_records_land_where_send_puts_them_in_order(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="4")
    records = [ProducerRecord("keyed", b"%d" % i, key=b"user-%d" % (i % 11)) for i in range(500)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=2000) as producer:
        single = [producer.send("keyed", b"one", key=b"user-%d" % k) for k in range(11)]
        mds = producer.send_batch(records)
        singles = [f.result(60) for f in single]
    assert [md.partition for md in mds] == [partition_for_key(r.key, 4) for r in records]
    expected_singles = [partition_for_key(b"user-%d" % k, 4) for k in range(11)]
    assert [md.partition for md in singles] == expected_singles
    for partition in range(4):
        stored = read_records(broker.bootstrap, "keyed", partition)
        expected = [
            (r.key, r.value) for r in records if partition_for_key(r.key, 4) == partition
        ]
        # send()'s records came first, then the batch's in the order given
        sent_first = sum(1 for md in singles if md.partition == partition)
        assert [(r.key, r.value) for r in stored[sent_first:]] == expected
        mine = [md.offset for md in mds if md.partition == partition]
        assert mine == list(range(sent_first, sent_first + len(expected)))


def test_bulk_and_single_sends_keep_call_order_on_one_partition(broker: Any) -> None:
    async def main() -> list[int]:
        async with AioProducer(
            bootstrap_servers=broker.bootstrap, linger_ms=50, batch_size=4000
        ) as p:
            first = [await p.send("mix", b"send-%d" % i) for i in range(3)]
            many = await p.send_many([ProducerRecord("mix", b"many-%d" % i) for i in range(40)])
            middle = [await p.send("mix", b"send-%d" % i, key=b"k") for i in range(3, 5)]
            batch = await p.send_batch(
                [ProducerRecord("mix", b"batch-%d" % i, key=b"k") for i in range(40)]
            )
            last = await p.send_and_wait("mix", b"last")
            offsets = [(await f).offset for f in first]
            offsets += [md.offset for md in await many]
            offsets += [(await f).offset for f in middle]
            offsets += [md.offset for md in batch]
            return [*offsets, last.offset]

    offsets = asyncio.run(main())
    assert offsets == list(range(3 + 40 + 2 + 40 + 1))
    expected = (
        [b"send-%d" % i for i in range(3)]
        + [b"many-%d" % i for i in range(40)]
        + [b"send-%d" % i for i in range(3, 5)]
        + [b"batch-%d" % i for i in range(40)]
        + [b"last"]
    )
    assert [r.value for r in read_records(broker.bootstrap, "mix")] == expected


def test_idempotent_bulk_batches_carry_consecutive_sequences(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="2")

    async def main() -> None:
        async with AioProducer(bootstrap_servers=broker.bootstrap, batch_size=3000) as p:
            assert p.config["enable.idempotence"] is True
            await p.send_batch([ProducerRecord("seq", b"x" * 100) for _ in range(300)])
            await p.send_and_wait("seq", b"single", partition=0)
            await p.send_batch(
                [ProducerRecord("seq", b"y" * 50, key=b"%d" % i) for i in range(300)]
            )

    asyncio.run(main())
    producer_ids = set()
    for partition in range(2):
        headers = [h for h, _ in read_partition(broker.bootstrap, "seq", partition)]
        assert len(headers) > 2
        producer_ids |= {(h.producer_id, h.producer_epoch) for h in headers}
        assert headers[0].base_sequence == 0
        for previous, header in itertools.pairwise(headers):
            assert header.base_sequence == previous.base_sequence + previous.record_count
    [(producer_id, _)] = producer_ids
    assert producer_id >= 0


def test_bulk_refuses_a_record_over_max_request_size_before_buffering(broker: Any) -> None:
    records = [ProducerRecord("big", b"x" * 100) for _ in range(10)]
    records.append(ProducerRecord("big", b"x" * 2000))
    with logbus.Producer(bootstrap_servers=broker.bootstrap, max_request_size=1000) as p:
        with pytest.raises(KafkaError) as info:
            p.send_batch(records)
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        p.flush()
        assert p.send_and_wait("big", b"after").offset == 0  # nothing of the batch was sent
    assert [r.value for r in read_records(broker.bootstrap, "big")] == [b"after"]


def test_bulk_waits_for_buffer_memory_then_raises_after_max_block_ms(broker: Any) -> None:
    async def main() -> None:
        async with AioProducer(
            bootstrap_servers=broker.bootstrap,
            buffer_memory=10_000,
            max_block_ms=200,
            request_timeout_ms=1000,
            delivery_timeout_ms=1500,
        ) as p:
            await p.send_and_wait("full", b"while up")
            broker.stop()
            with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory=10000"):
                await p.send_batch([ProducerRecord("full", b"x" * 1000) for _ in range(100)])
            await p.close(timeout=0)

    asyncio.run(main())


def test_blocking_send_batch_of_many_batches_returns_metadata_in_order(broker: Any) -> None:
    values = [b"%06d" % i * 20 for i in range(5000)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=16_384) as producer:
        mds = producer.send_batch(ProducerRecord("sync", v) for v in values)
    assert [md.offset for md in mds] == list(range(len(values)))
    assert [r.value for r in read_records(broker.bootstrap, "sync")] == values


def test_send_many_without_metadata_resolves_once_every_record_is_acknowledged(
    broker_factory: Any,
) -> None:
    # metadata=False (what `logbus perf produce` uses): the future resolves to an empty
    # list, only once every record of the call is written; a batch the broker refuses
    # (over its message.max.bytes) still fails it.
    broker = broker_factory(message_max_bytes="100000")

    async def main() -> None:
        async with AioProducer(bootstrap_servers=broker.bootstrap, linger_ms=60_000) as p:
            values = [b"v%d" % i for i in range(5000)]
            future = await p.send_many(topic="quiet", values=values, metadata=False)
            assert await future == []
            written = [r.value for _, records in
                       await read_partition_async(broker.bootstrap, "quiet") for r in records]
            assert written == values
            refused = await p.send_many(topic="quiet", values=[b"x" * 200_000],
                                        metadata=False)
            with pytest.raises(KafkaError) as error:
                await refused
            assert error.value.code == ErrorCode.MESSAGE_TOO_LARGE

    asyncio.run(main())
