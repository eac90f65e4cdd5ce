"""The Producer shared between threads and callbacks: sends from many threads (keyed and
keyless) with idempotence, close() from a delivery callback (Kafka's close(0)), close()
ending sends that wait for buffer.memory or metadata, callbacks that raise, and a callback
resending into a full buffer."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from producer_helpers import read_records, run_threads

import logbus
from logbus.aio import Producer as AioProducer
from logbus.client.errors import ClientClosedError, KafkaTimeoutError


def test_threads_sending_keyed_and_keyless_records_lose_and_repeat_none(
    broker_factory: Any,
) -> None:
    # Keyed and keyless records from six threads into three partitions, small batches:
    # every future names a distinct (partition, offset) holding its own record, and each
    # thread's records keep their order within a partition.
    broker = broker_factory(num_partitions="3")
    threads, per_thread = 6, 2000
    futures: dict[int, list[logbus.FutureRecordMetadata]] = {}
    with logbus.Producer(bootstrap_servers=broker.bootstrap, batch_size=2048, linger_ms=1) as p:

        def run(thread: int) -> None:
            futures[thread] = [
                p.send("mixed", b"%d-%05d" % (thread, i), key=None if i % 3 else b"k%d" % (i % 7))
                for i in range(per_thread)
            ]

        run_threads(run, threads)
        p.flush()
    sent: dict[tuple[int, int], bytes] = {}
    for thread, thread_futures in futures.items():
        offsets: dict[int, list[int]] = {}
        for i, future in enumerate(thread_futures):
            md = future.result(0)
            sent[(md.partition, md.offset)] = b"%d-%05d" % (thread, i)
            offsets.setdefault(md.partition, []).append(md.offset)
        assert all(o == sorted(o) for o in offsets.values())
    assert len(sent) == threads * per_thread
    stored = {
        (partition, r.offset): r.value
        for partition in range(3)
        for r in read_records(broker.bootstrap, "mixed", partition)
    }
    assert stored == sent


def test_close_from_a_delivery_callback_fails_what_is_buffered(broker: Any) -> None:
    # The callback of a record sent at once (a full batch) closes the producer while
    # records of another topic linger: as Kafka's close() from a callback, that is
    # close(0). Every buffered record fails with ClientClosedError (its future and its
    # callback), later sends raise, and the producer's thread stops.
    producer = logbus.Producer(bootstrap_servers=broker.bootstrap, linger_ms=60_000,
                               batch_size=1000)
    producer.partitions_for("trigger")
    held_errors: list[BaseException | None] = []
    after: list[BaseException] = []

    def close_now(md: Any, err: BaseException | None) -> None:
        producer.close()
        try:
            producer.send("held", b"after close")
        except ClientClosedError as exc:
            after.append(exc)

    held = [
        producer.send("held", b"h%d" % i, on_delivery=lambda md, err: held_errors.append(err))
        for i in range(10)
    ]
    trigger = producer.send("trigger", b"x" * 1000, on_delivery=close_now)
    assert trigger.result(60).offset == 0
    for future in held:
        assert isinstance(future.exception(60), ClientClosedError)
    producer.close()  # waits for the close the callback began
    assert len(after) == 1
    assert len(held_errors) == 10 and all(isinstance(e, ClientClosedError) for e in held_errors)
    with pytest.raises(ClientClosedError):
        producer.send("held", b"later")
    assert [r.value for r in read_records(broker.bootstrap, "trigger")] == [b"x" * 1000]
    assert read_records(broker.bootstrap, "held") == []


async def close_then_error_of(
    producer: AioProducer, waiting: asyncio.Future[Any]
) -> BaseException | None:
    """Close the producer at once, then what the send `waiting` raised (None: nothing)."""
    await producer.close(timeout=0)
    try:
        await asyncio.wait_for(waiting, 60)
    except Exception as exc:
        return exc
    return None


_FULL = {"buffer_memory": 5000, "max_block_ms": 120_000, "request_timeout_ms": 1000}


def test_close_fails_sends_waiting_for_buffer_memory(broker: Any) -> None:
    # With the broker gone, buffer.memory fills and send() waits (max.block.ms is long):
    # close(timeout=0) from another thread ends that wait with ClientClosedError instead
    # of leaving the sending thread blocked until max.block.ms.
    producer = logbus.Producer(bootstrap_servers=broker.bootstrap, **_FULL)
    producer.send_and_wait("blocked", b"while up")
    broker.stop()
    errors: list[BaseException] = []
    filled = threading.Event()

    def fill() -> None:
        try:
            for _ in range(4):
                producer.send("blocked", b"x" * 1000)
            filled.set()
            producer.send("blocked", b"x" * 2000)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=fill, daemon=True)
    worker.start()
    assert filled.wait(60)
    producer.close(timeout=0)
    worker.join(60)
    assert [type(e) for e in errors] == [ClientClosedError]


def test_close_fails_asyncio_sends_waiting_for_buffer_memory(broker: Any) -> None:
    async def main() -> BaseException | None:
        async with AioProducer(bootstrap_servers=broker.bootstrap, **_FULL) as producer:
            await producer.send_and_wait("blocked", b"while up")
            broker.stop()
            held = [await producer.send("blocked", b"x" * 1000) for _ in range(4)]
            waiting = asyncio.ensure_future(producer.send("blocked", b"x" * 2000))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            error = await close_then_error_of(producer, waiting)
            for future in held:
                assert isinstance(future.exception(), ClientClosedError)
            return error

    assert isinstance(asyncio.run(main()), ClientClosedError)


def test_a_raising_callback_added_to_a_settled_future_is_logged_not_raised(
    broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    with logbus.Producer(bootstrap_servers=broker.bootstrap) as producer:
        future = producer.send("settled", b"one")
        producer.flush()
        with caplog.at_level(logging.ERROR):
            future.add_done_callback(lambda f: 1 / 0)
        future.add_done_callback(lambda f: calls.append(f.result().offset))
        assert "a delivery callback raised" in caplog.text
        assert calls == [0]
        assert producer.send_and_wait("settled", b"two").offset == 1


def test_a_callback_resending_into_a_full_buffer_is_refused_not_frozen(broker: Any) -> None:
    # A common pattern: resend a record from its callback when it failed. With the broker
    # gone and buffer.memory full, that send cannot wait for room (its callback holds the
    # producer's thread, the only one freeing room): it raises KafkaTimeoutError at once
    # instead of freezing the producer for max.block.ms.
    producer = logbus.Producer(
        bootstrap_servers=broker.bootstrap,
        buffer_memory=3000,
        max_block_ms=120_000,
        delivery_timeout_ms=1500,
        request_timeout_ms=1000,
        linger_ms=0,
    )
    producer.send_and_wait("first", b"while up")
    producer.partitions_for("later")
    broker.stop()
    resent: list[BaseException] = []
    called = threading.Event()

    def resend(md: Any, err: BaseException | None) -> None:
        try:
            producer.send("first", b"y" * 1500)
        except KafkaTimeoutError as exc:
            resent.append(exc)
        called.set()

    first = producer.send("first", b"x" * 1000, on_delivery=resend)
    time.sleep(0.3)  # so that "later" expires after "first", holding its room meanwhile
    later = producer.send("later", b"z" * 1900)
    assert called.wait(60)
    assert [str(e) for e in resent] == [
        "no room for a record of about 1521 bytes in buffer.memory=3000, and send() from "
        "a delivery callback cannot wait for it"
    ]
    assert isinstance(first.exception(60), KafkaTimeoutError)
    assert isinstance(later.exception(60), KafkaTimeoutError)
    producer.close(timeout=0)


def test_close_fails_a_send_waiting_for_metadata(broker_factory: Any) -> None:
    # send() to a topic that does not exist (and is not auto-created) waits up to
    # max.block.ms for its metadata; close() from another thread ends that wait with
    # ClientClosedError, not the CancelledError of the loop thread's shutdown.
    broker = broker_factory(auto_create_topics_enable="false")
    producer = logbus.Producer(bootstrap_servers=broker.bootstrap, max_block_ms=120_000)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            producer.send("missing", b"x")
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=send, daemon=True)
    worker.start()
    time.sleep(0.3)  # so that send() is waiting for the metadata
    producer.close(timeout=0)
    worker.join(60)
    assert [type(e) for e in errors] == [ClientClosedError]


def test_close_fails_an_asyncio_send_waiting_for_metadata(broker_factory: Any) -> None:
    broker = broker_factory(auto_create_topics_enable="false")

    async def main() -> BaseException | None:
        async with AioProducer(bootstrap_servers=broker.bootstrap, max_block_ms=120_000) as p:
            waiting = asyncio.ensure_future(p.send("missing", b"x"))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            return await close_then_error_of(p, waiting)

    assert isinstance(asyncio.run(main()), ClientClosedError)
