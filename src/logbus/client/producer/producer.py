"""The asyncio producer (`logbus.aio.Producer`): Kafka's KafkaProducer for asyncio.

`send()` admits a record (`RecordAdmission`: serialized, sized, buffer space reserved),
routes it to a partition (`PartitionRouter`) and appends it to the accumulator, which
encodes it into that partition's open batch; the sender task ships batches when they are
full or have lingered `linger.ms`. Each record's future resolves to its RecordMetadata
once the broker acknowledges its batch. The blocking producer and the Spark sink feed
the same accumulator and sender (`buffer`, `send_encoded`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from logbus.client.cluster import Cluster
from logbus.client.errors import ClientClosedError, KafkaError, KafkaTimeoutError
from logbus.client.lifecycle import AsyncService
from logbus.client.metadata import ClusterMetadata
from logbus.client.metrics import Metrics, ProducerMetrics
from logbus.client.producer.accumulator import (
    RECORD_OVERHEAD,
    EncodedBatch,
    ProducerBatch,
    RecordAccumulator,
    RecordFuture,
    all_settled,
    record_size,
    valid_timestamp,
)
from logbus.client.producer.admission import RecordAdmission
from logbus.client.producer.bulk import (
    BulkAppender,
    Columns,
    PlainRecords,
    Run,
    append_plain,
    batch_input,
    metadata_of,
    plain_columns,
    plain_records,
    unsort,
)
from logbus.client.producer.config import compression_of, parse_producer_config
from logbus.client.producer.records import ProducerRecord, RecordMetadata
from logbus.client.producer.router import PartitionRouter
from logbus.client.producer.sender import Sender, SenderSettings
from logbus.client.producer.transaction_manager import TransactionManager
from logbus.client.producer.transactional import TransactionalProducer
from logbus.records.builder import now_ms
from logbus.records.record import HeaderInput

# Buffer space send_many takes at a time (and gives back what it did not use).
_RESERVE_AHEAD = 256 * 1024

DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], Any]
Headers = Sequence[tuple[str, bytes | None]]


class Producer(TransactionalProducer, AsyncService):
    """An asyncio Kafka producer.

    Made with Kafka's producer settings (a dict, and/or keyword arguments with dots
    written as underscores); started by `start()` or `async with`; stopped by `close()`,
    which first delivers what is buffered. Use it from one event loop; its methods are
    not thread-safe (the blocking `logbus.Producer` is).

    Example::

        async with Producer({"bootstrap.servers": "127.0.0.1:9092"}, linger_ms=5) as p:
            metadata = await p.send_and_wait("events", b"hello", key=b"k")
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = parse_producer_config(config, settings)
        c = self.config
        self.admission = RecordAdmission(c)
        codec, level = compression_of(c)
        self._settings = SenderSettings(
            acks=c["acks"],
            idempotent=c["enable.idempotence"],
            linger=c["linger.ms"] / 1000,
            batch_size=c["batch.size"],
            max_request_size=c["max.request.size"],
            max_in_flight=c["max.in.flight.requests.per.connection"],
            retries=c["retries"],
            delivery_timeout=c["delivery.timeout.ms"] / 1000,
            request_timeout_ms=c["request.timeout.ms"],
            retry_backoff=c["retry.backoff.ms"] / 1000,
            retry_backoff_max=max(c["retry.backoff.max.ms"], c["retry.backoff.ms"]) / 1000,
            reconnect_backoff=c["reconnect.backoff.ms"] / 1000,
            reconnect_backoff_max=max(c["reconnect.backoff.max.ms"], c["reconnect.backoff.ms"])
            / 1000,
            metadata_max_age=c["metadata.max.age.ms"] / 1000,
            compression=codec,
            compression_level=level,
            max_block=c["max.block.ms"] / 1000,
        )
        self._max_block = c["max.block.ms"] / 1000
        self._topics: set[str] = set()
        self._cluster: Cluster | None = None
        self._sender: Sender | None = None
        self._accumulator = RecordAccumulator(c["batch.size"], self._wake_sender)
        self.router = PartitionRouter(self._accumulator, c["partitioner.ignore.keys"])
        self._closed = False
        self._txn: TransactionManager | None = None
        pool = self.admission.pool
        self._metrics = ProducerMetrics(
            Metrics.from_config(c), lambda: float(pool.limit - pool.used)
        )

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (and get a producer id when idempotent)."""
        if self._sender is not None:
            return
        if self._closed:
            raise ClientClosedError("the producer is closed")
        cluster = await Cluster.from_config(self.config)
        try:
            sender = Sender(
                cluster, self._accumulator, self.admission.pool, self._settings, self._topics
            )
            sender.on_metadata = self._metadata_updated
            c = self.config
            txn_id = c["transactional.id"]
            if txn_id is not None:
                s = self._settings
                txn = TransactionManager(
                    txn_id,
                    c["transaction.timeout.ms"],
                    cluster,
                    retry_backoff=s.retry_backoff,
                    retry_backoff_max=s.retry_backoff_max,
                    delivery_timeout=s.delivery_timeout,
                )
                sender.txn, txn.sender, self._txn = txn, sender, txn
            sender.metrics = self._metrics
            await sender.start()
        except BaseException:
            await cluster.close()
            raise
        self._cluster, self._sender = cluster, sender

    @property
    def accumulator(self) -> RecordAccumulator:
        """The batches waiting to be sent (shared with the sender)."""
        return self._accumulator

    @property
    def sender(self) -> Sender:
        """The sending task (ClientClosedError before `start()` or after `close()`)."""
        return self._check_open()

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, float]:
        """The producer's metrics by Kafka's names (`record-send-rate`,
        `request-latency-avg`, ...): see docs/client.md. Safe from any thread."""
        return self._metrics.metrics.snapshot()

    def _metadata_updated(self, md: ClusterMetadata) -> None:
        with self._accumulator.lock:
            self.router.metadata_updated(md)

    def _wake_sender(self) -> None:
        if self._sender is not None:
            self._sender.wakeup()

    # A timeout argument as on Kafka's producer (and the blocking API), not asyncio.timeout.
    async def close(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Deliver what is buffered (waiting up to `timeout` seconds; None: as long as it
        takes), then fail whatever is left with ClientClosedError and disconnect."""
        if self._closed:
            return
        self._closed = True
        self.admission.pool.close()  # sends waiting for buffer space fail now
        sender, cluster = self._sender, self._cluster
        if sender is None or cluster is None:
            return
        try:
            if timeout is None or timeout > 0:
                try:
                    async with asyncio.timeout(timeout):
                        await self._flush_all()
                except TimeoutError:
                    pass
        finally:
            if self._txn is not None:
                await self._txn.close()
            await sender.stop()
            error = ClientClosedError("the producer was closed before the record was sent")
            for batch in sender.pending_batches():
                if batch.done is None or not batch.done.done():
                    batch.fail(error)
            await cluster.close()

    # --- sending ------------------------------------------------------------------------

    def check_open(self) -> Sender:
        """The sender; ClientClosedError when not started or closed."""
        return self._check_open()

    def _check_open(self) -> Sender:
        sender = self._sender
        if sender is None:
            if self._closed:
                raise ClientClosedError("the producer is closed")
            raise ClientClosedError("the producer is not started: use start() or async with")
        if self._closed:
            raise ClientClosedError("the producer is closed")
        return sender

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions (waiting up to max.block.ms for its metadata)."""
        return list(range(await self.partition_count(topic)))

    async def partition_count(self, topic: str) -> int:
        """The topic's partition count, once its metadata is found (asking for it, and
        creating the topic where the broker does so, for up to max.block.ms)."""
        count = self.router.count(topic)
        if count is not None:
            return count
        sender = self._check_open()
        assert self._cluster is not None
        self._topics.add(topic)
        deadline = time.monotonic() + self._max_block
        last: BaseException | None = None
        while True:
            try:
                md = await self._cluster.refresh(
                    sorted(self._topics), allow_auto_topic_creation=True
                )
                count = md.ready_partition_count(topic)
                if count is not None:
                    with self._accumulator.lock:
                        self.router.known(topic, count)
                    return count
            except KafkaError as exc:
                if not exc.retriable:
                    self._topics.discard(topic)
                    raise
                last = exc
            if time.monotonic() + self._settings.retry_backoff > deadline:
                self._topics.discard(topic)
                reason = f" ({last})" if last is not None else ""
                raise KafkaTimeoutError(
                    f"Topic {topic} not present in metadata after "
                    f"{self._max_block * 1000:g} ms{reason}"
                )
            sender.wakeup()
            await asyncio.sleep(self._settings.retry_backoff)
            self._check_open()  # closed meanwhile: stop waiting

    def buffer(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderInput,
        timestamp: int | None,
        size: int,
        count: int,
        future: RecordFuture | None = None,
    ) -> tuple[ProducerBatch, int]:
        """Route a record already admitted (serialized, `size` bytes reserved) of a
        topic of `count` partitions (`partition`, if given, checked) and encode it into
        its partition's open batch: the batch and the record's index in it. Safe to call
        from any thread: ClientClosedError once the producer is closing (then nothing was
        buffered, and the caller gives the reserved bytes back)."""
        accumulator = self._accumulator
        with accumulator.lock:
            if self._closed:
                raise ClientClosedError("the producer is closed")
            if self._txn is not None:
                self._txn.check_send()
            tp = self.router.route(topic, partition, key, count, size)
            ts = now_ms() if timestamp is None else valid_timestamp(timestamp)
            if headers:
                return accumulator.append(tp, key, value, headers, ts, future, size)
            batch = accumulator.append_plain(tp, key, value, ts, size, future)
            return batch, batch.count - 1

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Buffer one record; returns a future of its RecordMetadata.

        Waits (up to max.block.ms) only for the topic's metadata the first time and for
        buffer space when buffer.memory is used up; KafkaTimeoutError after that.
        `on_delivery(metadata, error)` is called once the record is acknowledged or has
        failed (exactly one of the two is None). Serialization errors and records larger
        than max.request.size raise here, before anything is buffered.
        """
        if self._sender is None or self._closed:
            self._check_open()
        txn = self._txn
        if txn is not None:
            txn.check_send()
        admission = self.admission
        # The per-record path, as the blocking send's: `bytes` keys and values skip the
        # identity serializers, and the size is summed here (record_size with headers).
        if not (
            admission.raw_keys
            and admission.raw_values
            and (key is None or type(key) is bytes)
            and (value is None or type(value) is bytes)
        ):
            key, value = admission.serialize(key, value)
        count = self.router.count(topic)
        if count is None:
            count = await self.partition_count(topic)
        if partition is not None:
            self.router.check_partition(topic, partition, count)
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
        pool = admission.pool
        if not pool.try_reserve(size):
            await pool.reserve(size, self._max_block)
            self._check_open()
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        try:
            batch, index = self.buffer(
                topic, partition, key, value, headers, timestamp, size, count, future
            )
        except BaseException:
            pool.release(size)
            raise
        if on_delivery is not None:
            future.add_done_callback(_delivery_callback(on_delivery))
        if index == 0:
            if txn is not None:
                txn.records_appended((batch.tp,))
            # A batch was started, so the previous one may be full: let the sender ship
            # it even if the caller sends in a loop that never waits.
            await asyncio.sleep(0)
        return future

    async def send_encoded(self, encoded: Sequence[EncodedBatch]) -> list[ProducerBatch]:
        """Queue record batches encoded elsewhere (the Spark sink's), each after the
        batches of its partition already queued, for the sender to stamp with the
        producer id and sequence and send like any other batch. Waits (up to
        max.block.ms) for buffer space as `send` does, handing over what has room first;
        returns the batches, whose `settled` and `error` say how each ended."""
        self._check_open()
        if self._txn is not None:
            self._txn.check_send()
        pool = self.admission.pool
        accumulator = self._accumulator
        batches: list[ProducerBatch] = []
        ready: list[ProducerBatch] = []
        for item in encoded:
            if not pool.try_reserve(item.size):
                if ready:
                    accumulator.append_encoded(ready)
                    ready = []
                await pool.reserve(item.size, self._max_block)
                self._check_open()
            batch = ProducerBatch.from_encoded(item)
            batches.append(batch)
            ready.append(batch)
        if ready:
            accumulator.append_encoded(ready)
        if self._txn is not None:
            self._txn.records_appended(b.tp for b in batches)
        return batches

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement (sends it without lingering)."""
        future = await self.send(topic, value, key, partition, timestamp, headers)
        await self._expedite_all()
        return await future

    async def send_batch(
        self,
        records: Iterable[ProducerRecord] | None = None,
        *,
        topic: str | None = None,
        values: Iterable[Any] | None = None,
        keys: Iterable[Any] | None = None,
        partition: int | None = None,
        timestamps: Iterable[int] | None = None,
    ) -> list[RecordMetadata]:
        """Send many records and wait until all are acknowledged; their RecordMetadata
        in the order given. Raises the first error any of their batches met (the others
        may have been written). The fast path for callers holding many records: no
        future per record, and the batches go as soon as they are complete.

        The records are `ProducerRecord`s, or, in columnar form, `topic=` and a list of
        `values=` (and optionally `keys=`, one per value) for records of one topic, which
        spares the caller making a ProducerRecord per record::

            await producer.send_batch(topic="events", values=[b"a", b"b"], keys=[b"k", None])

        The columnar form may also give the one `partition=` for all and `timestamps=`,
        one per value (as `send_many`).
        """
        return await (
            await self.send_many(
                records,
                topic=topic,
                values=values,
                keys=keys,
                partition=partition,
                timestamps=timestamps,
            )
        )

    async def send_many(
        self,
        records: Iterable[ProducerRecord] | None = None,
        *,
        topic: str | None = None,
        values: Iterable[Any] | None = None,
        keys: Iterable[Any] | None = None,
        partition: int | None = None,
        timestamps: Iterable[int] | None = None,
        metadata: bool = True,
    ) -> asyncio.Future[list[RecordMetadata]]:
        """Buffer many records (waiting only for metadata and buffer space, like `send`)
        and return one future of all their RecordMetadata, in order, which fails with
        the first error any of their batches met. `send_batch` is this, awaited (and
        takes the same two forms: records, or `topic=`, `values=` and `keys=`); callers
        streaming records use it to keep several groups in flight. With `metadata=False`
        the future's result is an empty list once every record is acknowledged: the
        RecordMetadata list is not built (for small records it costs about a quarter of
        the producer's time; `logbus perf produce` only needs to know when). The
        columnar form may also name the one `partition` every record goes to, and give
        each record's timestamp (`timestamps=`, one per value): a mirror's copy keeps
        both.

        Records of one topic without partition, timestamp or headers, whose values (and
        keys, unless all None) are `bytes`, take the bulk path (`bulk.py`): encoded a
        batch at a time, each batch handed to the sender as soon as it is full. So do
        columns whose values (and keys, unless all None) serialize to `bytes`, with or
        without a partition and timestamps."""
        sender = self._check_open()
        if self._txn is not None:
            self._txn.check_send()
        given = batch_input(records, topic, values, keys, partition, timestamps)
        runs: list[Run] = []
        batches: dict[int, ProducerBatch] = {}
        order: list[int] | None = None
        plain: PlainRecords | Columns | None
        admission = self.admission
        if isinstance(given, Columns):
            plain = plain_columns(
                given,
                admission.key_serializer,
                admission.value_serializer,
                admission.raw_keys,
                admission.raw_values,
            )
        else:
            plain = plain_records(given, admission.raw_keys, admission.raw_values)
        if isinstance(plain, PlainRecords):
            count = await self.partition_count(plain.topic)
            order = await append_plain(
                BulkAppender(
                    self.router,
                    admission,
                    self._accumulator,
                    sender,
                    self._check_open,
                    *(() if self._txn is None else (self._txn.partition_buffered,)),
                ),
                plain,
                count,
                runs,
                batches,
            )
        elif isinstance(plain, Columns):
            # Serialized columns with null values, or null keys mixed with others.
            column = repeat(None) if plain.keys is None else plain.keys
            stamps = repeat(None) if plain.timestamps is None else plain.timestamps
            records = [
                ProducerRecord(plain.topic, v, k, plain.partition, t)
                for v, k, t in zip(plain.values, column, stamps, strict=False)
            ]
            await self._append_each(sender, records, runs, batches, serialized=True)
        else:
            assert not isinstance(given, Columns)
            await self._append_each(sender, given, runs, batches)
        if self._txn is not None:
            self._txn.records_appended(b.tp for b in batches.values())
        sender.expedite.update(b.tp for b in batches.values())
        sender.wakeup()
        result: asyncio.Future[list[RecordMetadata]] = asyncio.get_running_loop().create_future()

        def settle(_: object = None) -> None:
            if result.done():
                return
            for batch in batches.values():
                if batch.error is not None:
                    result.set_exception(batch.error)
                    return
            if not metadata:
                result.set_result([])
                return
            out = metadata_of(runs)
            result.set_result(out if order is None else unsort(out, order))

        waiters = [b.waiter() for b in batches.values() if not b.settled]
        if waiters:
            asyncio.gather(*waiters).add_done_callback(settle)
        else:
            settle()
        return result

    async def _wait_for_memory(
        self, sender: Sender, batches: dict[int, ProducerBatch], size: int
    ) -> int:
        """Reserve `size` bytes of buffer.memory, waiting (up to max.block.ms) while the
        batches filled so far are sent at once to free it; returns `size`."""
        sender.expedite.update(b.tp for b in batches.values())
        sender.wakeup()
        await self.admission.pool.reserve(size, self._max_block)
        self._check_open()
        return size

    async def _append_each(
        self,
        sender: Sender,
        records: Sequence[ProducerRecord],
        runs: list[Run],
        batches: dict[int, ProducerBatch],
        serialized: bool = False,
    ) -> None:
        """The general path: record by record, as `send` does (`serialized`: keys and
        values are bytes or None already, and go as they are)."""
        admission = self.admission
        pool = admission.pool
        router = self.router
        serialize = admission.serialize
        raw_keys, raw_values = admission.raw_keys, admission.raw_values
        max_request_size = admission.max_request_size
        accumulator = self._accumulator
        lock = accumulator.lock
        last: ProducerBatch | None = None
        run: Run | None = None
        now = now_ms()
        credit = 0  # buffer space reserved ahead, so that most records take no lock
        try:
            for record in records:
                topic, value, key, partition, timestamp, headers = record
                if not (
                    serialized
                    or (
                        raw_keys
                        and raw_values
                        and (key is None or type(key) is bytes)
                        and (value is None or type(value) is bytes)
                    )
                ):
                    key, value = serialize(key, value)
                count = router.count(topic)
                if count is None:
                    count = await self.partition_count(topic)
                    now = now_ms()
                if partition is not None and not 0 <= partition < count:
                    router.check_partition(topic, partition, count)
                if headers:
                    size = record_size(key, value, headers)
                else:
                    size = RECORD_OVERHEAD
                    if key is not None:
                        size += len(key)
                    if value is not None:
                        size += len(value)
                if size > max_request_size:
                    admission.check_size(size)
                if size > credit:
                    ahead = max(size, _RESERVE_AHEAD)
                    if not pool.try_reserve(ahead):
                        ahead = await self._wait_for_memory(sender, batches, size)
                        now = now_ms()
                    credit += ahead
                credit -= size
                with lock:
                    tp = router.route(topic, partition, key, count, size)
                    if headers:
                        batch, index = accumulator.append(
                            tp,
                            key,
                            value,
                            headers,
                            now if timestamp is None else valid_timestamp(timestamp),
                            None,
                            size,
                        )
                    else:
                        batch = accumulator.append_plain(
                            tp,
                            key,
                            value,
                            now if timestamp is None else valid_timestamp(timestamp),
                            size,
                        )
                        index = batch.count - 1
                if run is not None and run.batch is batch and run.first + run.count == index:
                    run.count += 1
                else:
                    run = Run(batch, index, 1)
                    runs.append(run)
                if batch is not last:
                    batches[id(batch)] = last = batch
                    # A batch was started, so one may be full: let the sender ship it
                    # while the rest are encoded.
                    await asyncio.sleep(0)
        finally:
            if credit:
                pool.release(credit)

    async def _expedite_all(self) -> None:
        sender = self._check_open()
        with self._accumulator.lock:
            sender.expedite.update(tp for tp, q in self._accumulator.batches.items() if q)
        sender.wakeup()

    async def flush(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Send everything buffered now and wait until it is acknowledged or has failed
        (failures are reported through the records' futures, not raised here).
        KafkaTimeoutError after `timeout` seconds."""
        self._check_open()
        try:
            async with asyncio.timeout(timeout):
                await self._flush_all()
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout:g}s") from None

    async def _flush_all(self, *, first: bool = False) -> None:
        """Send everything buffered and wait until it has settled. `first`: wake the
        moment the last batch settles, ahead of the callbacks chained on the batches
        (`commit_transaction`'s EndTxn goes before a `send_many`'s RecordMetadata list
        is built; that list is done before EndTxn's answer comes back). Without it,
        every `send_many` future of the flushed records is done when this returns."""
        sender = self._sender
        if sender is None:
            return
        sender.flushing += 1
        sender.wakeup()
        try:
            batches = sender.pending_batches()
            if first:
                await all_settled(batches)
            else:
                waiters = [b.waiter() for b in batches]
                if waiters:
                    await asyncio.gather(*waiters)
        finally:
            sender.flushing -= 1


def _delivery_callback(
    on_delivery: DeliveryCallback,
) -> Callable[[asyncio.Future[RecordMetadata]], None]:
    def done(future: asyncio.Future[RecordMetadata]) -> None:
        if future.cancelled():
            on_delivery(None, asyncio.CancelledError())
            return
        error = future.exception()
        on_delivery(None if error is not None else future.result(), error)

    return done
