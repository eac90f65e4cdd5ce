"""What the blocking clients (`logbus.Producer`, `logbus.Consumer`, `logbus.Admin`) share:
an asyncio client from `logbus.aio` run on a `LoopThread`, started when made and
stopped, once, by `close()` or by leaving `with`."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from logbus.client.errors import ClientClosedError
from logbus.client.loop_thread import LoopThread

T = TypeVar("T")


class AsyncClient(Protocol):
    """The part of an asyncio client its blocking wrapper relies on."""

    @property
    def config(self) -> dict[str, Any]: ...

    async def start(self) -> None: ...


A = TypeVar("A", bound=AsyncClient)


class BlockingClient(Generic[A]):
    """Owns `_aio`, an asyncio client, and `_thread`, the event loop thread it runs on.

    Made: starts the loop thread and `_aio` on it (if that fails, stops the thread and
    raises). `close()` runs the subclass's `_shutdown()` once, however many threads call
    it, then stops the thread. Subclasses run each call with `_run()`.
    """

    _noun = "client"  # as in "the client is closed"

    def __init__(self, aio: A, thread_name: str) -> None:
        self._aio = aio
        self._thread = LoopThread(thread_name)
        self._closed = False
        self._close_lock = threading.Lock()
        try:
            self._thread.run(aio.start())
        except BaseException:
            self._thread.close()
            raise

    @property
    def config(self) -> dict[str, Any]:
        return self._aio.config

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"the {self._noun} is closed")

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop thread and wait for its result (TimeoutError after
        `timeout` seconds)."""
        return self._thread.run(coro, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Shut the asyncio client down and stop the loop thread (a second call does
        nothing)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._shutdown(timeout)
        finally:
            self._thread.close()

    def _shutdown(self, timeout: float | None) -> None:
        """Close `_aio`, on the loop thread, still running."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
