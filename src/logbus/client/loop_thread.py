"""A background event loop for the blocking API.

`logbus.Producer`, `logbus.Consumer` and `logbus.Admin` are thin wrappers over their
`logbus.aio` counterparts: each owns a `LoopThread` running an asyncio loop in a daemon
thread, and turns each call into a coroutine run there. Callbacks from the loop must not
block it.

The loop is uvloop's when uvloop is installed (a logbus dependency), as the broker's: the
producer's sender and the consumer's fetches pay the loop's cost per batch and per
response, and uvloop's is a fraction of the standard loop's. `LOGBUS_EVENT_LOOP=asyncio`
asks for the standard loop, as it does for the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when installed, unless `LOGBUS_EVENT_LOOP=asyncio`."""
    if os.environ.get("LOGBUS_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class LoopThread:
    """An event loop in a daemon thread, started on creation, stopped by `close()`."""

    def __init__(self, name: str = "logbus-client") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule `coro` on the loop; its result arrives in the returned future
        (RuntimeError once the loop is closed)."""
        if self.loop.is_closed():
            coro.close()  # it will never run: do not leave it unawaited
            raise RuntimeError(f"{self._thread.name} is closed: the client was closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (TimeoutError after `timeout`
        seconds, the coroutine then cancelled)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a blocking client call was made from its own event loop")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        if self.loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(TimeoutError, RuntimeError):
                self.submit(cancel_all()).result(timeout)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
