"""The controller event thread (Kafka's `ControllerEventManager`).

In cluster mode every piece of the controller's work runs on one dedicated thread, one
event at a time: ZooKeeper watch and session callbacks only enqueue an event, and the
broker's event loop submits its requests (topic creation and deletion, AlterPartition)
and awaits their futures. The controller's state is therefore touched by one thread only,
and neither ZooKeeper round trips nor the controller's work ever block the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

_STOP = object()


class ControllerEventManager:
    """One worker thread running submitted callables in order."""

    def __init__(self, name: str = "controller-event-thread") -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopped = False

    def start(self) -> None:
        self._thread.start()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def put(self, action: Callable[[], object], name: str = "") -> None:
        """Enqueue an event whose outcome nobody waits for (watch callbacks); a failure is
        logged."""
        if self._stopped:
            return
        self._queue.put((action, None, name or getattr(action, "__name__", "event")))

    def submit(self, action: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Enqueue `action` and return the future of its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._stopped:
            future.set_exception(RuntimeError("the controller is shut down"))
            return future
        self._queue.put((action, future, getattr(action, "__name__", "request")))
        return future

    async def call(self, action: Callable[[], T]) -> T:
        """Run `action` on the controller thread and await its result (event loop side)."""
        return await asyncio.wrap_future(self.submit(action))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            action, future, name = item
            if future is not None and not future.set_running_or_notify_cancel():
                continue
            try:
                result = action()
            except BaseException as exc:
                if future is not None:
                    future.set_exception(exc)
                else:
                    log.exception("controller event %s failed", name)
                continue
            if future is not None:
                future.set_result(result)

    def stop(self, timeout: float = 30.0) -> None:
        """Run what is queued, then end the thread; later events are dropped."""
        if self._stopped:
            return
        self._stopped = True
        self._queue.put(_STOP)
        if self._thread.is_alive() and not self.on_thread():
            self._thread.join(timeout)
        # Anything still queued gets an answer rather than a hang.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP and item[1] is not None:
                item[1].set_exception(RuntimeError("the controller is shut down"))
        if self._thread.is_alive():
            self._queue.put(_STOP)  # a worker still busy ends after its event
