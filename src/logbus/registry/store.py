"""The registry's store: a compacted topic (`kafkastore.topic`, `_schemas`) of one
partition on the cluster, read from its start into a `RegistryState`, written through a
producer. As Confluent's `KafkaStore`, a change is done once the reader has read it back:
a write returns when the state has applied its record, so what a client registered is
what the next request sees, and a restart that re-reads the topic loses nothing.

Only one registry writes: the one that last called `claim_writes()`. Its producer is
transactional, with a `transactional.id` every registry of the topic shares, and each
change is one transaction; claiming initializes a new producer with that id, which bumps
its epoch and so fences the producer of the registry that wrote before (its later sends
and commits fail, its open transaction is aborted), as Kafka fences a zombie instance
of an application. A primary paused past its group session and resumed cannot write
from its stale state: its write fails with `StoreFencedError` and nothing reaches the
topic. The reader reads committed records only.

The entry point is `KafkaStore`; `start()` creates the topic when it is missing and
reads it to its end before the registry serves; `claim_writes()` before the first write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from logbus.client.admin import Admin, AdminBatchError, NewTopic
from logbus.client.consumer import Consumer
from logbus.client.errors import KafkaError, ProducerFencedError
from logbus.client.producer import Producer
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode
from logbus.registry.errors import store_error, store_fenced, store_timeout
from logbus.registry.state import Record, RegistryState, noop_record

log = logging.getLogger(__name__)

_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


def transactional_id(topic: str) -> str:
    """The transactional id of every registry writing `topic`."""
    return f"logbus-schema-registry-{topic}"


def _is_fenced(exc: KafkaError) -> bool:
    return isinstance(exc, ProducerFencedError) or exc.code in _FENCED


class KafkaStore:
    """The store topic's reader and writer, and the state it feeds. Started once and
    closed once; its methods are called from the event loop's tasks (writes are
    serialized by `lock`, which a change holds from its checks to its last record)."""

    def __init__(
        self,
        client_settings: Mapping[str, Any],
        topic: str = "_schemas",
        *,
        replication_factor: int = 3,
        timeout_ms: int = 10_000,
    ) -> None:
        self.client_settings = dict(client_settings)
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout = timeout_ms / 1000
        self.state = RegistryState()
        self.lock = asyncio.Lock()
        self._partition = TopicPartition(topic, 0)
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._reader: asyncio.Task[None] | None = None
        # the offset of the next record to read, and who waits for it to move
        self._position = 0
        self._moved = asyncio.Condition()

    async def start(self) -> None:
        await self._ensure_topic()
        self._consumer = Consumer(
            {
                **self.client_settings,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "client.id": "logbus-schema-registry-reader",
            }
        )
        await self._consumer.start()
        self._consumer.assign([self._partition])
        self._consumer.seek_to_beginning(self._partition)
        end = (await self._consumer.end_offsets([self._partition]))[self._partition]
        self._reader = asyncio.create_task(self._read(), name="schemas-reader")
        await self._wait_for(end)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._close_producer()
        if self._consumer is not None:
            await self._consumer.close()

    async def _ensure_topic(self) -> None:
        admin = Admin(self.client_settings)
        await admin.start()
        try:
            if self.topic in await admin.list_topics():
                return
            brokers = len((await admin.describe_cluster()).nodes)
            factor = min(self.replication_factor, max(brokers, 1))
            if factor < self.replication_factor:
                log.warning(
                    "creating %s with replication factor %d: the cluster has %d brokers",
                    self.topic, factor, brokers,
                )
            try:
                await admin.create_topics(
                    [NewTopic(self.topic, 1, factor, {"cleanup.policy": "compact"})]
                )
            except AdminBatchError as exc:
                # another registry created it first
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        finally:
            await admin.close()

    async def _read(self) -> None:
        assert self._consumer is not None
        while True:
            try:
                records = await self._consumer.poll(timeout_ms=1000)
            except KafkaError as exc:
                log.warning("reading %s: %s", self.topic, exc)
                await asyncio.sleep(1)
                continue
            for record in records:
                self.state.apply(record.key, record.value)
            position = await self._consumer.position(self._partition)
            if position != self._position:
                async with self._moved:
                    self._position = position
                    self._moved.notify_all()

    async def _wait_for(self, offset: int) -> None:
        """Wait until the reader has applied every record before `offset`."""
        try:
            async with asyncio.timeout(self.timeout), self._moved:
                await self._moved.wait_for(lambda: self._position >= offset)
        except TimeoutError:
            raise store_timeout(
                f"the store topic was not read to offset {offset} in {self.timeout:g} s"
            ) from None

    async def claim_writes(self) -> None:
        """Become the store's writer: a new transactional producer, whose initialization
        fences every earlier one of the topic's registries (ours included), then read the
        topic to its end (after a NOOP record of our own), so that the state has what
        the earlier writer wrote before it was fenced. Holds `lock`: no change of ours
        is under way with the producer it replaces."""
        async with self.lock:
            await self._claim_writes()

    async def _claim_writes(self) -> None:
        await self._close_producer()
        producer = Producer(
            {
                **self.client_settings,
                "acks": "all",
                "linger.ms": 0,
                "transactional.id": transactional_id(self.topic),
                "client.id": "logbus-schema-registry-producer",
            }
        )
        await producer.start()
        try:
            await producer.init_transactions(self.timeout)
        except BaseException:
            await producer.close(0)
            raise
        self._producer = producer
        await self.write([noop_record()])

    async def _close_producer(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.close(0)

    async def write(self, records: Sequence[Record]) -> None:
        """Append the records (key, value or None) in one transaction and wait until the
        state has them. StoreFencedError when another registry has claimed the writes
        since (or this one never did): nothing was written."""
        producer = self._producer
        if producer is None:
            raise store_fenced()
        last = -1
        try:
            producer.begin_transaction()
            for key, value in records:
                metadata = await producer.send_and_wait(self.topic, value, key, partition=0)
                last = metadata.offset
            await producer.commit_transaction(self.timeout)
        except KafkaError as exc:
            if _is_fenced(exc):
                log.warning("fenced: another registry writes %s now", self.topic)
                await self._close_producer()
                raise store_fenced() from None
            await self._abort(producer)
            raise store_error(str(exc)) from None
        await self._wait_for(last + 1)

    async def _abort(self, producer: Producer) -> None:
        try:
            await producer.abort_transaction(self.timeout)
        except KafkaError as exc:
            log.warning("aborting a write to %s: %s", self.topic, exc)

    async def catch_up(self) -> None:
        """Read the topic up to its end offset of now (what another registry wrote)."""
        assert self._consumer is not None
        try:
            end = (await self._consumer.end_offsets([self._partition]))[self._partition]
        except KafkaError as exc:
            raise store_error(str(exc)) from None
        await self._wait_for(end)

