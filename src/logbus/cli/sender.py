"""Sending the console producer's batches: built per partition, grouped by leader into one
Produce request per broker, several requests in flight, retriable errors retried after a
metadata refresh (as the Java producer does, without idempotence)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from types import TracebackType

from logbus.client import admin_ops
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.metadata import NO_LEADER, TopicInfo
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType

TopicPartition = tuple[str, int]

# How long a topic that was just created may take to get leaders for its partitions.
TOPIC_READY_TIMEOUT = 10.0
_UNKNOWN_TOPIC_GRACE = 1.0
_RETRY_BACKOFF = 0.1


async def wait_for_topic(cluster: Cluster, topic: str, *, auto_create: bool) -> TopicInfo:
    """The topic's metadata once every partition has a leader. With `auto_create` the
    broker may create it (if its auto.create.topics.enable allows)."""
    start = time.monotonic()
    while True:
        md = await cluster.refresh([topic], allow_auto_topic_creation=auto_create)
        info = md.topics.get(topic)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else info.error_code
        waited = time.monotonic() - start
        if code == ErrorCode.NONE and info is not None and info.partitions:
            if all(p.leader != NO_LEADER for p in info.partitions.values()):
                return info
            code = ErrorCode.LEADER_NOT_AVAILABLE
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if not auto_create or waited >= _UNKNOWN_TOPIC_GRACE:
                return md.topic(topic)  # raises "Topic 'x' does not exist"
        elif code != ErrorCode.LEADER_NOT_AVAILABLE:
            return md.topic(topic)  # raises the topic's error
        if waited >= TOPIC_READY_TIMEOUT:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"Topic '{topic}' has partitions without a leader after "
                f"{TOPIC_READY_TIMEOUT:g}s",
            )
        await asyncio.sleep(_RETRY_BACKOFF)


def first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (what to report on one line)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class Sender:
    """Delivers batches for a console producer. Owns the tasks of its requests in flight;
    use it as `async with`, which waits for every delivery and raises the first failure.
    Not shared between tasks."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        acks: int,
        compression: CompressionType,
        timeout_ms: int,
        max_in_flight: int = 5,
        retries: int = 5,
    ) -> None:
        self.cluster = cluster
        self.acks = acks
        self.compression = compression
        self.timeout_ms = timeout_ms
        self.retries = retries
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: asyncio.TaskGroup | None = None

    async def __aenter__(self) -> Sender:
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tasks is not None
        try:
            await self._tasks.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise first_error(group) from None

    async def send(self, records: Mapping[TopicPartition, list[NewRecord]]) -> None:
        """Build a batch per partition and start sending them, one request per leader.
        Waits while `max_in_flight` requests are outstanding."""
        assert self._tasks is not None, "use Sender as `async with`"
        batches = {
            tp: build_batch(recs, compression=self.compression)
            for tp, recs in records.items()
            if recs
        }
        for group in self._by_leader(batches).values():
            await self._slots.acquire()
            self._tasks.create_task(self._deliver(group))

    def _by_leader(
        self, batches: Mapping[TopicPartition, bytes]
    ) -> dict[int, dict[TopicPartition, bytes]]:
        md = self.cluster.metadata
        if md is None:
            return {NO_LEADER: dict(batches)}
        groups: dict[int, dict[TopicPartition, bytes]] = {}
        for tp, batch in batches.items():
            try:
                leader = md.leader(*tp)
            except KafkaError:
                leader = NO_LEADER  # found out, and retried, in _deliver
            groups.setdefault(leader, {})[tp] = batch
        return groups

    async def _deliver(self, batches: dict[TopicPartition, bytes]) -> None:
        try:
            remaining = batches
            for attempt in range(self.retries + 1):
                errors = await self._attempt(remaining)
                if not errors:
                    return
                fatal = [e for e in errors.values() if not e.retriable]
                if fatal or attempt == self.retries:
                    raise (fatal or list(errors.values()))[0]
                remaining = {tp: batches[tp] for tp in errors}
                await asyncio.sleep(_RETRY_BACKOFF * (attempt + 1))
                await self.cluster.refresh(sorted({topic for topic, _ in remaining}))
        finally:
            self._slots.release()

    async def _attempt(
        self, batches: dict[TopicPartition, bytes]
    ) -> dict[TopicPartition, KafkaError]:
        errors: dict[TopicPartition, KafkaError] = {}
        for leader, group in self._by_leader(batches).items():
            if leader == NO_LEADER:
                for topic, partition in group:
                    errors[(topic, partition)] = KafkaError(
                        ErrorCode.LEADER_NOT_AVAILABLE, f"no leader for {topic}-{partition}"
                    )
                continue
            try:
                conn = await self.cluster.node(leader)
                results = await admin_ops.produce_many(
                    conn, group, self.acks, timeout_ms=self.timeout_ms
                )
            except KafkaConnectionError as exc:
                errors.update(dict.fromkeys(group, exc))
                continue
            for tp, result in (results or {}).items():
                if isinstance(result, KafkaError):
                    errors[tp] = result
        return errors

