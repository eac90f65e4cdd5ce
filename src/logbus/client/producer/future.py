"""The blocking producer's future of one record (Kafka's FutureRecordMetadata): a view of
the record's place in its batch, settled when the batch is.

It costs one small object per record: no lock, condition or callback list of its own
(`concurrent.futures.Future` makes all three). Waiting threads wait on the condition every
batch notifies when it settles; callbacks are kept by the batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from logbus.client.producer.accumulator import BATCH_SETTLED, ProducerBatch
from logbus.client.producer.records import RecordMetadata

log = logging.getLogger(__name__)


class FutureRecordMetadata:
    """The outcome of one `logbus.Producer.send`: its RecordMetadata once the broker has
    acknowledged the record's batch, or the error the batch failed with. Offers
    `concurrent.futures.Future`'s methods (`result`, `exception`, `done`,
    `add_done_callback`; a record being buffered cannot be cancelled) and kafka-python's
    `get`. Safe to share between threads."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: ProducerBatch, index: int) -> None:
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.settled

    def running(self) -> bool:
        return not self._batch.settled

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's RecordMetadata, waiting up to `timeout` seconds (None: as long as
        it takes; then TimeoutError); raises the error its batch failed with."""
        self._wait(timeout)
        batch = self._batch
        if batch.error is not None:
            raise batch.error
        topic, partition = batch.tp
        offset = batch.result_offset + self._index if batch.result_offset >= 0 else -1
        return RecordMetadata(topic, partition, offset, batch.timestamps[self._index])

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error the record failed with, or None once it is acknowledged (waiting as
        `result` does)."""
        self._wait(timeout)
        return self._batch.error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """Call `fn(future)` once the record is settled: on the producer's thread, or at
        once on this one if it is settled already. An exception `fn` raises is logged,
        not raised (as `concurrent.futures.Future` does): it must not make a `send` that
        buffered its record look failed."""
        if not self._batch.on_settled(partial(fn, self)):
            try:
                fn(self)
            except Exception:
                log.exception("a delivery callback raised")

    def _wait(self, timeout: float | None) -> None:
        batch = self._batch
        if batch.settled:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with BATCH_SETTLED:
            while not batch.settled:
                if deadline is None:
                    BATCH_SETTLED.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"the record was not acknowledged within {timeout:g}s")
                BATCH_SETTLED.wait(remaining)

    def __repr__(self) -> str:
        topic, partition = self._batch.tp
        state = "pending" if not self._batch.settled else (
            "failed" if self._batch.error is not None else "done"
        )
        return f"<FutureRecordMetadata {topic}-{partition} {state}>"
