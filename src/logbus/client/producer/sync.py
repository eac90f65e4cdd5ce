"""The blocking producer (`logbus.Producer`): the asyncio producer run on a background
event loop thread.

`send()` does its caller-side work (serializing, sizing, reserving buffer space) on the
caller's thread and hands records to the loop in bulk: one wake-up of the loop carries
every record sent since the last, so a tight loop of sends costs little more than the
encoding of each record.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from logbus.client.blocking import BlockingClient
from logbus.client.errors import ClientClosedError, KafkaTimeoutError
from logbus.client.producer.accumulator import record_size
from logbus.client.producer.producer import DeliveryCallback, Headers
from logbus.client.producer.producer import Producer as AsyncProducer
from logbus.client.producer.records import ProducerRecord, RecordMetadata

_Pending = tuple[
    str, int | None, bytes | None, bytes | None, Any, int | None, "Future[RecordMetadata]", int
]


class Producer(BlockingClient[AsyncProducer]):
    """A blocking Kafka producer, safe to share between threads.

    Same settings as `logbus.aio.Producer`. Connects on creation; `close()` (or leaving
    `with`) delivers what is buffered and stops its event loop thread. Delivery callbacks
    run on that thread and must not block.

    Example::

        with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
            producer.send("events", b"hello").result()
    """

    _noun = "producer"

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self._pending: deque[_Pending] = deque()
        self._scheduled = False
        super().__init__(AsyncProducer(config, **settings), "logbus-producer")

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions (waiting up to max.block.ms for its metadata)."""
        self._check_open()
        return self._run(self._aio.partitions_for(topic))

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> Future[RecordMetadata]:
        """Buffer one record; returns a `concurrent.futures.Future` of its RecordMetadata.

        Blocks (up to max.block.ms) only for the topic's metadata the first time and for
        buffer space when buffer.memory is used up, then raises KafkaTimeoutError.
        `on_delivery(metadata, error)` runs on the producer's thread when the record is
        acknowledged or has failed.
        """
        if self._closed:
            raise ClientClosedError("the producer is closed")
        aio = self._aio
        if not (
            aio._raw_keys
            and aio._raw_values
            and (key is None or type(key) is bytes)
            and (value is None or type(value) is bytes)
        ):
            key, value = aio._serialize(key, value)
        count = aio._partition_counts.get(topic)
        if count is None:
            count = self._run(aio._partition_count(topic))
        if partition is not None:
            aio._check_partition(topic, partition, count)
        hdrs = headers or ()
        size = record_size(key, value, hdrs)
        if size > aio._max_request_size:
            aio._check_size(size)
        pool = aio._pool
        assert pool is not None
        if not pool.try_reserve(size):
            pool.reserve_blocking(size, aio._max_block)
        future: Future[RecordMetadata] = Future()
        if on_delivery is not None:
            future.add_done_callback(_callback(on_delivery))
        self._pending.append((topic, partition, key, value, hdrs, timestamp, future, size))
        if not self._scheduled:
            self._scheduled = True
            self._thread.call_soon(self._drain_pending)
        return future

    def _drain_pending(self) -> None:
        """On the loop: move records handed over by `send()` into their batches."""
        self._scheduled = False
        pending = self._pending
        append = self._aio._append
        while pending:
            topic, partition, key, value, hdrs, timestamp, future, size = pending.popleft()
            if self._aio._closed:
                self._aio._pool.release(size)  # type: ignore[union-attr]
                future.set_exception(ClientClosedError("the producer is closed"))
                continue
            try:
                append(topic, partition, key, value, hdrs, timestamp, future, size)
            except Exception as exc:  # a bad header, say: the record's own failure
                self._aio._pool.release(size)  # type: ignore[union-attr]
                future.set_exception(exc)

    def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its RecordMetadata."""
        self._check_open()
        return self._run(
            self._aio.send_and_wait(topic, value, key, partition, timestamp, headers), timeout
        )

    def send_batch(
        self,
        records: Iterable[ProducerRecord] | None = None,
        *,
        topic: str | None = None,
        values: Iterable[Any] | None = None,
        keys: Iterable[Any] | None = None,
    ) -> list[RecordMetadata]:
        """Send many records, wait until all are acknowledged and return their
        RecordMetadata in order (raises the first error). The records are
        `ProducerRecord`s, or in columnar form `topic=` and lists of `values=` (and
        `keys=`, one per value), as for `logbus.aio.Producer.send_batch`."""
        self._check_open()
        if records is not None and not isinstance(records, list):
            records = list(records)
        return self._run(self._send_batch(records, topic, values, keys))

    async def _send_batch(
        self,
        records: list[ProducerRecord] | None,
        topic: str | None,
        values: Iterable[Any] | None,
        keys: Iterable[Any] | None,
    ) -> list[RecordMetadata]:
        self._drain_pending()
        return await self._aio.send_batch(records, topic=topic, values=values, keys=keys)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until it is acknowledged or has failed;
        KafkaTimeoutError after `timeout` seconds."""
        self._check_open()
        self._run(self._flush(timeout))

    async def _flush(self, timeout: float | None) -> None:  # noqa: ASYNC109
        self._drain_pending()
        await self._aio.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (up to `timeout` seconds; None: as long as it takes),
        fail the rest with ClientClosedError, disconnect and stop the loop thread."""
        super().close(timeout)

    def _shutdown(self, timeout: float | None) -> None:
        with contextlib.suppress(KafkaTimeoutError):
            self._run(self._close(timeout))

    async def _close(self, timeout: float | None) -> None:  # noqa: ASYNC109
        self._drain_pending()
        await self._aio.close(timeout)


def _callback(on_delivery: DeliveryCallback) -> Any:
    def done(future: Future[RecordMetadata]) -> None:
        error = future.exception()
        on_delivery(None if error is not None else future.result(), error)

    return done
