"""The Producer when things go wrong: a lost Produce response (idempotence keeps the
resent batch from being appended twice), a broker killed and restarted mid-stream,
a stopped broker (delivery timeout, buffer.memory and max.block.ms), partitions added
(metadata.max.age.ms) and reconnect backoff."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from typing import Any

import pytest
from producer_helpers import read_partition, read_records

import logbus
from logbus.aio import Producer as AioProducer
from logbus.aio import ProducerRecord
from logbus.client.cluster import Cluster
from logbus.client.errors import ClientClosedError, KafkaConnectionError, KafkaTimeoutError
from logbus.client.requests.topics import create_partitions, delete_topics
from logbus.protocol import ApiKey
from ports import free_port

_SIZE = struct.Struct(">i")


class LostResponseProxy:
    """A TCP proxy in front of a broker that swallows the response to the first
    `drops` Produce requests and cuts the client's connection instead, as a network
    failure after the broker has appended would."""

    def __init__(self, drops: int) -> None:
        self.drops = drops
        self.dropped = 0
        self.upstream_port = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        await self._server.wait_closed()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self._writers.append(cwriter)
        ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.append(uwriter)
        produce_ids: set[int] = set()

        async def upstream() -> None:
            while True:
                size = await creader.readexactly(4)
                frame = await creader.readexactly(_SIZE.unpack(size)[0])
                api_key, _, correlation_id = struct.unpack_from(">hhi", frame)
                if api_key == ApiKey.PRODUCE:
                    produce_ids.add(correlation_id)
                uwriter.write(size + frame)
                await uwriter.drain()

        async def downstream() -> None:
            while True:
                size = await ureader.readexactly(4)
                frame = await ureader.readexactly(_SIZE.unpack(size)[0])
                (correlation_id,) = struct.unpack_from(">i", frame)
                if correlation_id in produce_ids and self.dropped < self.drops:
                    self.dropped += 1
                    return  # the broker answered; the client never hears it
                cwriter.write(size + frame)
                await cwriter.drain()

        with contextlib.suppress(Exception):
            _, pending = await asyncio.wait(
                [asyncio.create_task(upstream()), asyncio.create_task(downstream())],
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        cwriter.close()
        uwriter.close()


def test_a_batch_resent_after_a_lost_response_is_not_appended_twice(broker_factory: Any) -> None:
    proxy = LostResponseProxy(drops=2)

    async def main() -> list[int]:
        await proxy.start()
        broker = broker_factory(advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}")
        proxy.upstream_port = broker.port
        try:
            config = {"bootstrap.servers": f"127.0.0.1:{proxy.port}", "retry.backoff.ms": 10}
            async with AioProducer(config) as producer:
                first = await producer.send_and_wait("dup", b"first")
                rest = await producer.send_batch(
                    [ProducerRecord("dup", b"r%d" % i) for i in range(10)]
                )
            return [first.offset, *(md.offset for md in rest)]
        finally:
            await proxy.close()
            broker_factory_bootstrap.append(broker.bootstrap)

    broker_factory_bootstrap: list[str] = []
    offsets = asyncio.run(main())
    assert proxy.dropped == 2
    assert offsets == list(range(11))
    values = [r.value for r in read_records(broker_factory_bootstrap[0], "dup")]
    assert values == [b"first", *(b"r%d" % i for i in range(10))]


def test_retries_across_a_broker_killed_and_restarted(broker_process: Any) -> None:
    proc = broker_process()
    total = 3000
    with logbus.Producer(
        bootstrap_servers=proc.bootstrap,
        linger_ms=2,
        batch_size=2048,
        request_timeout_ms=5000,
        reconnect_backoff_ms=20,
        retry_backoff_ms=20,
    ) as producer:
        futures = [producer.send("restart", b"%05d" % i) for i in range(total // 2)]
        futures[len(futures) // 2].result(60)  # some are written, some may be in flight
        proc.kill()
        futures += [producer.send("restart", b"%05d" % i) for i in range(total // 2, total)]
        proc.start()
        producer.flush()
        offsets = [f.result().offset for f in futures]
    assert offsets == list(range(total))
    values = [r.value for r in read_records(proc.bootstrap, "restart")]
    assert values == [b"%05d" % i for i in range(total)]


def test_delivery_timeout_fails_records_a_stopped_broker_cannot_take(broker: Any) -> None:
    with logbus.Producer(
        bootstrap_servers=broker.bootstrap,
        linger_ms=0,
        request_timeout_ms=500,
        delivery_timeout_ms=1500,
        max_block_ms=1000,
    ) as producer:
        assert producer.send_and_wait("gone", b"while up").offset == 0
        broker.stop()
        reported: list[tuple[Any, BaseException | None]] = []
        called = threading.Event()

        def on_delivery(md: Any, err: BaseException | None) -> None:
            reported.append((md, err))
            called.set()

        future = producer.send("gone", b"while down", on_delivery=on_delivery)
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            future.result(60)
        assert called.wait(60)
        [(md, err)] = reported
        assert md is None
        assert isinstance(err, KafkaTimeoutError)
        with pytest.raises(KafkaTimeoutError):
            producer.send_batch([ProducerRecord("gone", b"also down")])
        producer.close(timeout=0)


def test_buffer_memory_blocks_send_then_raises_after_max_block_ms(broker: Any) -> None:
    producer = logbus.Producer(
        bootstrap_servers=broker.bootstrap,
        buffer_memory=10_000,
        max_block_ms=200,
        request_timeout_ms=1000,
    )
    try:
        producer.send_and_wait("full", b"while up")
        broker.stop()
        accepted = []
        with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory=10000"):
            for _ in range(100):
                accepted.append(producer.send("full", b"x" * 1000))
        assert 5 <= len(accepted) < 100

        async def aio_full() -> None:
            with pytest.raises(KafkaTimeoutError, match=r"max\.block\.ms=200"):
                await producer._aio.send("full", b"x" * 1000)

        producer._thread.run(aio_full())
    finally:
        producer.close(timeout=0)
    for future in accepted:
        with pytest.raises(ClientClosedError):
            future.result(10)


def test_buffer_memory_smaller_than_the_data_makes_send_wait_not_fail(broker: Any) -> None:
    values = [b"%04d" % i + b"x" * 996 for i in range(400)]
    with logbus.Producer(bootstrap_servers=broker.bootstrap, buffer_memory=8000) as producer:
        futures = [producer.send("wait", v) for v in values]
        assert [f.result(60).offset for f in futures] == list(range(400))

    async def batch() -> list[int]:
        async with AioProducer(bootstrap_servers=broker.bootstrap, buffer_memory=8000) as p:
            mds = await p.send_batch(ProducerRecord("wait", v) for v in values)
            return [md.offset for md in mds]

    assert asyncio.run(batch()) == list(range(400, 800))
    assert [r.value for r in read_records(broker.bootstrap, "wait")] == values + values


def test_partitions_added_are_found_after_metadata_max_age(broker: Any) -> None:
    with logbus.Producer(bootstrap_servers=broker.bootstrap, metadata_max_age_ms=100) as p:
        p.send_and_wait("grow", b"one partition")

        async def grow() -> None:
            async with await Cluster.connect(broker.bootstrap) as cluster:
                await create_partitions(await cluster.controller(), "grow", 2)

        asyncio.run(grow())
        deadline = time.monotonic() + 30
        while True:
            try:
                md = p.send_and_wait("grow", b"second partition", partition=1)
                break
            except logbus.KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    assert (md.partition, md.offset) == (1, 0)
    assert [r.value for r in read_records(broker.bootstrap, "grow", 1)] == [b"second partition"]


def test_reconnect_backoff_after_a_failed_connection() -> None:
    port = free_port()

    async def main() -> None:
        cluster = Cluster(f"127.0.0.1:{port}", reconnect_backoff=30, reconnect_backoff_max=60)
        with pytest.raises(KafkaConnectionError, match="Connection refused"):
            await cluster.bootstrap()
        with pytest.raises(KafkaConnectionError, match="before reconnecting"):
            await cluster.bootstrap()
        await cluster.close()

    asyncio.run(main())


def test_batches_keep_one_producer_id_across_a_lost_response(broker_factory: Any) -> None:
    proxy = LostResponseProxy(drops=1)
    bootstrap: list[str] = []

    async def main() -> None:
        await proxy.start()
        broker = broker_factory(advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}")
        bootstrap.append(broker.bootstrap)
        proxy.upstream_port = broker.port
        try:
            async with AioProducer(
                bootstrap_servers=f"127.0.0.1:{proxy.port}", batch_size=300, retry_backoff_ms=10
            ) as producer:
                await producer.send_batch(
                    [ProducerRecord("seq", b"x" * 50) for _ in range(40)]
                )
        finally:
            await proxy.close()

    asyncio.run(main())
    headers = [h for h, _ in read_partition(bootstrap[0], "seq")]
    assert len({h.producer_id for h in headers}) == 1
    assert sum(h.record_count for h in headers) == 40
    assert [h.base_sequence for h in headers] == sorted(h.base_sequence for h in headers)


def test_metadata_refreshed_when_the_topic_vanishes_under_the_producer(broker: Any) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION from the broker makes the producer refresh its metadata
    (which, with auto-creation on, makes the topic again) and retry."""
    with logbus.Producer(bootstrap_servers=broker.bootstrap, retry_backoff_ms=20) as p:
        assert p.send_and_wait("vanish", b"before").offset == 0

        async def delete() -> None:
            async with await Cluster.connect(broker.bootstrap) as cluster:
                await delete_topics(await cluster.controller(), ["vanish"])

        asyncio.run(delete())
        md = p.send_and_wait("vanish", b"after")
    assert (md.partition, md.offset) == (0, 0)
    assert [r.value for r in read_records(broker.bootstrap, "vanish")] == [b"after"]
