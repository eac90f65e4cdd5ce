"""The blocking consumer: `logbus.Consumer`, a thin wrapper over the asyncio one."""

from __future__ import annotations

import asyncio
import queue
import re
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from logbus.client.blocking import BlockingClient
from logbus.client.consumer.consumer import CommitCallback, OffsetAndTimestamp
from logbus.client.consumer.consumer import Consumer as AsyncConsumer
from logbus.client.consumer.records import (
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
)
from logbus.client.types import ConsumerGroupMetadata, TopicPartition

T = TypeVar("T")
_DONE = object()


class _ThreadListener(ConsumerRebalanceListener):
    """Runs a blocking consumer's listener in the thread that polls, so the listener may
    call the consumer (commit, seek, position) as it would in Kafka's Java client."""

    def __init__(self, owner: Consumer, listener: ConsumerRebalanceListener) -> None:
        self.owner = owner
        self.listener = listener

    async def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        await self.owner._in_caller(self.listener.on_partitions_revoked, revoked)

    async def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        await self.owner._in_caller(self.listener.on_partitions_assigned, assigned)

    async def on_partitions_lost(self, lost: Sequence[TopicPartition]) -> None:
        await self.owner._in_caller(self.listener.on_partitions_lost, lost)


class Consumer(BlockingClient[AsyncConsumer]):
    """A blocking Kafka consumer: the same configuration and methods as
    `logbus.aio.Consumer`, each call run on a background event loop thread (see
    `LoopThread`). Connects when made; `close()` (or leaving `with`) commits (with
    enable.auto.commit), leaves the group and stops the thread.

        with Consumer({"bootstrap.servers": "host:9092", "group.id": "g"}) as consumer:
            consumer.subscribe(["topic"])
            for record in consumer:
                ...

    Use from one thread at a time, as Kafka's KafkaConsumer. The rebalance listener runs
    in the thread calling poll() (or close()).
    """

    _noun = "consumer"

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._calls: queue.SimpleQueue[Any] | None = None
        super().__init__(AsyncConsumer(config, **kwargs), "logbus-consumer")

    # --- running calls on the loop, listener calls back here -----------------------------

    def _run_with_callbacks(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop while serving the listener calls it makes, here."""
        calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        outer, self._calls = self._calls, calls  # before the coroutine can call back
        try:
            future: Future[T] = self._thread.submit(coro)
        except BaseException:
            self._calls = outer
            raise
        future.add_done_callback(lambda _: calls.put(_DONE))
        try:
            while True:
                try:
                    item = calls.get(timeout=0.2)
                except queue.Empty:
                    continue
                if item is _DONE:
                    return future.result()
                fn, args, reply, loop = item
                try:
                    result = fn(*args)
                except BaseException as exc:
                    loop.call_soon_threadsafe(_settle, reply, None, exc)
                else:
                    loop.call_soon_threadsafe(_settle, reply, result, None)
        except BaseException:
            future.cancel()
            raise
        finally:
            self._calls = outer

    async def _in_caller(self, fn: Callable[..., Any], *args: Any) -> Any:
        calls = self._calls
        if calls is None:  # not inside a poll() or close(): run it here
            return fn(*args)
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        calls.put((fn, args, reply, loop))
        return await reply

    # --- lifecycle --------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), revoke, leave the group, close connections and
        stop the background thread; `timeout` seconds at most for the commit, listener
        and LeaveGroup (see `logbus.aio.Consumer.close`)."""
        super().close(timeout)

    def _shutdown(self, timeout: float | None) -> None:
        self._run_with_callbacks(self._aio.close(timeout))

    # --- subscribing ------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """As `logbus.aio.Consumer.subscribe`; the listener runs in the polling thread."""
        wrapped = _ThreadListener(self, listener) if listener is not None else None

        async def call() -> None:
            self._aio.subscribe(topics, pattern=pattern, listener=wrapped)

        self._run(call())

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        wanted = list(partitions)

        async def call() -> None:
            self._aio.assign(wanted)

        self._run(call())

    def unsubscribe(self) -> None:
        self._run_with_callbacks(self._aio.unsubscribe())

    def _read(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return self._run(call())

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics by Kafka's names (see docs/client.md); still readable
        after close."""
        return self._aio.metrics()

    def assignment(self) -> set[TopicPartition]:
        """The partitions held now (safe to ask from any thread)."""
        return self._read(self._aio.assignment)

    def subscription(self) -> set[str]:
        return self._read(self._aio.subscription)

    def topics(self) -> dict[str, set[int]]:
        return self._run(self._aio.topics())

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._run(self._aio.partitions_for_topic(topic))

    # --- polling ----------------------------------------------------------------------

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched since the last poll (waiting up to `timeout` seconds for the
        first), at most `max_records` (default max.poll.records)."""
        return self._run_with_callbacks(
            self._aio.poll(timeout_ms=timeout * 1000, max_records=max_records)
        )

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Every record, polling as needed, until the consumer is closed."""
        while not self._thread.closed:
            yield from self.poll(1.0)

    # --- positions --------------------------------------------------------------------

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        return self._run(self._aio.position(partition))

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        async def call() -> None:
            fn(*args)

        self._run(call())

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        self._call(self._aio.seek, partition, offset)

    def seek_to_beginning(self, *partitions: Any) -> None:
        self._call(self._aio.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: Any) -> None:
        self._call(self._aio.seek_to_end, *partitions)

    def pause(self, *partitions: Any) -> None:
        self._call(self._aio.pause, *partitions)

    def resume(self, *partitions: Any) -> None:
        self._call(self._aio.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._read(self._aio.paused)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._aio.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._aio.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._aio.end_offsets(list(partitions)))

    def highwater(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        return self._aio.highwater(partition)

    # --- commits ----------------------------------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None:
        """Commit `offsets` or every held partition's position, and wait for it."""
        self._run(self._aio.commit(offsets))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future[None]:
        """Start a commit; `callback(offsets, error_or_None)` runs on the background
        thread when it completes. The returned future completes too."""

        async def start() -> asyncio.Task[None]:
            return self._aio.commit_async(offsets, callback)

        task = self._run(start())

        async def wait() -> None:
            await task

        return self._thread.submit(wait())

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._aio.committed(list(partitions)))

    @property
    def member_id(self) -> str | None:
        return self._aio.member_id

    @property
    def generation_id(self) -> int:
        return self._aio.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Who this consumer is in its group, for `Producer.send_offsets_to_transaction`."""
        return self._aio.group_metadata()


def _settle(reply: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if reply.done():
        return
    if error is not None:
        reply.set_exception(error)
    else:
        reply.set_result(result)
