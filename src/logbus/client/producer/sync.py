"""The blocking producer (`logbus.Producer`): the asyncio producer's pipeline, fed from
the caller's thread, with its sender running on a background event loop thread.

`send()` does every per-record step on the caller's thread: admission (serializing,
sizing, reserving buffer space), routing and encoding into the partition's open batch,
under the accumulator's lock. The loop thread is woken only when a batch is started or
filled (for linger.ms and batch.size), never per record; each record gets a
`FutureRecordMetadata`, settled with its batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import CancelledError
from typing import Any, TypeVar

from logbus.client.blocking import BlockingClient
from logbus.client.errors import ClientClosedError, KafkaTimeoutError
from logbus.client.producer.accumulator import RECORD_OVERHEAD, record_size
from logbus.client.producer.future import FutureRecordMetadata
from logbus.client.producer.producer import DeliveryCallback, Headers
from logbus.client.producer.producer import Producer as AsyncProducer
from logbus.client.producer.records import ProducerRecord, RecordMetadata
from logbus.client.types import ConsumerGroupMetadata, TopicPartition

T = TypeVar("T")


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
        super().__init__(AsyncProducer(config, **settings), "logbus-producer")
        self._admission = self._aio.admission
        self._router = self._aio.router
        self._closer: threading.Thread | None = None  # close() called from a callback

    def metrics(self) -> dict[str, float]:
        """The producer's metrics by Kafka's names (see docs/client.md); still readable
        after close."""
        return self._aio.metrics()

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
    ) -> FutureRecordMetadata:
        """Buffer one record; returns a `FutureRecordMetadata` (`result()` gives its
        RecordMetadata, or raises the error it failed with).

        Blocks (up to max.block.ms) only for the topic's metadata the first time and for
        buffer space when buffer.memory is used up, then raises KafkaTimeoutError (at
        once when called from a delivery callback, which holds the thread that frees
        room). Serialization errors and records larger than max.request.size raise here.
        `on_delivery(metadata, error)` runs on the producer's thread when the record is
        acknowledged or has failed (on the caller's, within send(), in the rare case its
        batch settled before send() returned).
        """
        if self._closed:
            raise ClientClosedError("the producer is closed")
        admission = self._admission
        if not (
            admission.raw_keys
            and admission.raw_values
            and (key is None or type(key) is bytes)
            and (value is None or type(value) is bytes)
        ):
            key, value = admission.serialize(key, value)
        count = self._router.count(topic)
        if count is None:
            count = self._run(self._aio.partition_count(topic))
        if partition is not None:
            self._router.check_partition(topic, partition, count)
        if headers:
            size = record_size(key, value, headers)
        else:
            headers = ()
            size = RECORD_OVERHEAD
            if key is not None:
                size += len(key)
            if value is not None:
                size += len(value)
        if size > admission.max_request_size:
            admission.check_size(size)
        if not admission.pool.try_reserve(size):
            self._wait_for_room(size)
        try:
            batch, index = self._aio.buffer(
                topic, partition, key, value, headers, timestamp, size, count
            )
        except BaseException:
            admission.pool.release(size)
            raise
        future = FutureRecordMetadata(batch, index)
        if on_delivery is not None:
            future.add_done_callback(_callback(on_delivery))
        return future

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
        return self._run(self._aio.send_batch(records, topic=topic, values=values, keys=keys))


    # --- transactions (transactional.id): as logbus.aio.Producer's -----------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional id's producer id and epoch, fencing earlier producers
        with the same id (once, before the first transaction)."""
        self._check_open()
        self._run(self._aio.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._check_open()
        self._aio.begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit the consumer's `offsets` (next offsets to read) with the transaction."""
        self._check_open()
        self._run(self._aio.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._check_open()
        self._run(self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._check_open()
        self._run(self._aio.abort_transaction(timeout))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until it is acknowledged or has failed;
        KafkaTimeoutError after `timeout` seconds."""
        self._check_open()
        self._run(self._aio.flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (up to `timeout` seconds; None: as long as it takes),
        fail the rest with ClientClosedError, disconnect and stop the loop thread.

        Called from a delivery callback (on the producer's own thread, which cannot wait
        for itself), it is Kafka's `close(0)`: what is buffered fails with
        ClientClosedError, and the closing finishes on a thread of its own once the
        callback returns."""
        if self._on_own_thread():
            with self._close_lock:
                if self._closed:
                    return
                # Started before it is seen closed, so that a close() elsewhere can join it.
                self._closer = threading.Thread(
                    target=self._close_from_callback, name="logbus-producer-close", daemon=True
                )
                self._closer.start()
                self._closed = True  # send() raises from now on
            return
        super().close(timeout)
        if self._closer is not None:
            self._closer.join()  # a close begun by a callback: let it finish

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop thread; ClientClosedError if the producer is closed
        meanwhile (the loop thread's shutdown cancels what still runs there)."""
        try:
            return super()._run(coro, timeout)
        except (CancelledError, asyncio.CancelledError, RuntimeError):
            if self._closed:
                raise ClientClosedError("the producer was closed") from None
            raise

    def _on_own_thread(self) -> bool:
        """Whether the caller runs on the producer's event loop thread (a callback)."""
        try:
            return asyncio.get_running_loop() is self._thread.loop
        except RuntimeError:  # no loop running on this thread
            return False

    def _wait_for_room(self, size: int) -> None:
        """Wait up to max.block.ms for `size` bytes of buffer.memory. A delivery callback
        cannot wait: it holds the producer's thread, the only one that frees room."""
        if self._on_own_thread():
            raise KafkaTimeoutError(
                f"no room for a record of about {size} bytes in buffer.memory="
                f"{self._admission.pool.limit}, and send() from a delivery callback "
                "cannot wait for it"
            )
        self._admission.reserve_blocking(size)

    def _close_from_callback(self) -> None:
        try:
            self._shutdown(0)
        finally:
            self._thread.close()

    def _shutdown(self, timeout: float | None) -> None:
        with contextlib.suppress(KafkaTimeoutError, ClientClosedError):
            self._run(self._aio.close(timeout))


def _callback(on_delivery: DeliveryCallback) -> Any:
    def done(future: FutureRecordMetadata) -> None:
        error = future.exception()
        on_delivery(None if error is not None else future.result(), error)

    return done
