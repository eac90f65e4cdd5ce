"""The blocking share consumer: `logbus.ShareConsumer`, a thin wrapper over the asyncio
one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from logbus.client.blocking import BlockingClient
from logbus.client.errors import KafkaError
from logbus.client.share.consumer import ShareConsumer as AsyncShareConsumer
from logbus.client.share.records import AcknowledgeType, ShareConsumerRecord
from logbus.client.share.share_fetcher import AckCallback, AckResults
from logbus.client.types import TopicPartition

T = TypeVar("T")


class ShareConsumer(BlockingClient[AsyncShareConsumer]):
    """A blocking share consumer: the same configuration and methods as
    `logbus.aio.ShareConsumer`, each call run on a background event loop thread.
    Connects when made; `close()` (or leaving `with`) sends the last acknowledgements,
    leaves the group and stops the thread.

        with ShareConsumer({"bootstrap.servers": "host:9092", "group.id": "jobs"}) as consumer:
            consumer.subscribe(["tasks"])
            for record in consumer:
                ...   # implicit mode: accepted by the next poll

    Use from one thread at a time, as Kafka's KafkaShareConsumer. The acknowledgement
    commit callback runs in the thread calling poll(), commit_sync() or close().
    """

    _noun = "share consumer"

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._callback: AckCallback | None = None
        self._outcomes: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = []
        self._outcomes_lock = threading.Lock()
        aio = AsyncShareConsumer(config, **kwargs)
        aio.set_acknowledgement_commit_callback(self._heard)
        super().__init__(aio, "logbus-share-consumer")

    def _heard(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        with self._outcomes_lock:
            self._outcomes.append((offsets, error))

    def _tell(self) -> None:
        """Run the callback, here, for the outcomes heard on the loop."""
        with self._outcomes_lock:
            outcomes, self._outcomes = self._outcomes, []
        if self._callback is not None:
            for offsets, error in outcomes:
                self._callback(offsets, error)

    def _call(self, fn: Any, *args: Any) -> Any:
        async def call() -> Any:
            return fn(*args)

        return self._run(call())

    # --- lifecycle --------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Send the last acknowledgements, close the share sessions, leave the group and
        stop the background thread (`timeout` seconds at most for the first three)."""
        super().close(timeout)
        self._tell()

    def _shutdown(self, timeout: float | None) -> None:
        self._run(self._aio.close(timeout))

    # --- subscribing ------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """As `logbus.aio.ShareConsumer.subscribe`."""
        self._call(self._aio.subscribe, topics if isinstance(topics, str) else list(topics))

    def unsubscribe(self) -> None:
        self._run(self._aio.unsubscribe())
        self._tell()

    def subscription(self) -> set[str]:
        return self._call(self._aio.subscription)  # type: ignore[no-any-return]

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._aio.assignment)  # type: ignore[no-any-return]

    # --- polling and acknowledging ----------------------------------------------------

    def poll(self, timeout: float = 1.0) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to `timeout` seconds for the first
        (see `logbus.aio.ShareConsumer.poll`)."""
        try:
            return self._run(self._aio.poll(timeout * 1000))
        finally:
            self._tell()

    def __iter__(self) -> Iterator[ShareConsumerRecord]:
        """Every record, polling as needed, until the consumer is closed."""
        while not self._thread.closed:
            yield from self.poll(1.0)

    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge one record of the last poll (explicit mode only)."""
        self._call(self._aio.acknowledge, record, type)

    def commit_sync(self, timeout: float | None = None) -> AckResults:
        """Send the acknowledgements waiting and wait for the answers (each partition's
        outcome: None, or the KafkaError the broker answered)."""
        try:
            return self._run(
                self._aio.commit_sync(None if timeout is None else timeout * 1000)
            )
        finally:
            self._tell()

    def commit_async(self) -> Future[AckResults]:
        """Start sending the acknowledgements waiting; the outcome reaches the callback in
        a later poll or commit (the returned future completes with it too)."""

        async def start() -> asyncio.Task[AckResults]:
            return self._aio.commit_async()

        task = self._run(start())

        async def wait() -> AckResults:
            return await task

        return self._thread.submit(wait())

    def set_acknowledgement_commit_callback(self, callback: AckCallback | None) -> None:
        """`callback(offsets, error)` hears the outcome of acknowledgements, in the thread
        that calls poll(), commit_sync() or close()."""
        self._callback = callback

    @property
    def member_id(self) -> str | None:
        return self._aio.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._aio.acquisition_lock_timeout_ms
