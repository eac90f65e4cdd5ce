"""The producer's memory budget (`buffer.memory`): bytes of records held until they are
acknowledged or fail. `send()` takes room before buffering a record and waits up to
`max.block.ms` when there is none (Kafka's BufferPool, counting bytes, not pages)."""

from __future__ import annotations

import asyncio
import threading
import time

from logbus.client.errors import ClientClosedError, KafkaTimeoutError


class BufferPool:
    """Counts bytes reserved against a limit.

    Reserved from the event loop (`reserve`, which awaits) or from a caller's thread
    (`reserve_blocking`, for the blocking API); released from either. Safe to share
    between those threads. A record larger than the whole budget is let through alone
    when nothing else is held, so it fails on its own merits rather than waiting forever.
    `close()` (the producer closing) wakes whoever waits, with ClientClosedError.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = False

    def _fits(self, size: int) -> bool:
        return self.used + size <= self.limit or self.used == 0

    def close(self) -> None:
        """Refuse every reservation from now on, failing those waiting for room (as
        Kafka's BufferPool does when its producer closes)."""
        with self._freed:
            self.closed = True
            self._freed.notify_all()
        self._wake_all()

    def try_reserve(self, size: int) -> bool:
        with self._lock:
            if self._fits(size):
                self.used += size
                return True
            return False

    async def reserve(self, size: int, max_block: float) -> None:
        """Take `size` bytes, waiting up to `max_block` seconds for room."""
        if self.try_reserve(size):
            return
        deadline = time.monotonic() + max_block
        while True:
            if self.closed:
                raise _closed()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _exhausted(size, self.limit, max_block)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(remaining):
                    await waiter
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            if self.try_reserve(size):
                return

    def reserve_blocking(self, size: int, max_block: float) -> None:
        """Take `size` bytes from a thread other than the loop's, blocking for room."""
        deadline = time.monotonic() + max_block
        with self._freed:
            while not self._fits(size):
                if self.closed:
                    raise _closed()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _exhausted(size, self.limit, max_block)
                self._freed.wait(remaining)
            self.used += size

    def release(self, size: int) -> None:
        """Give back `size` bytes (from any thread) and wake whoever waits for room."""
        with self._freed:
            self.used -= size
            self._freed.notify_all()
        self._wake_all()

    def _wake_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            loop = waiter.get_loop()
            if loop.is_closed():
                continue
            loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _closed() -> ClientClosedError:
    return ClientClosedError("the producer was closed while send() waited for buffer.memory")


def _exhausted(size: int, limit: int, max_block: float) -> KafkaTimeoutError:
    return KafkaTimeoutError(
        f"no room for a record of about {size} bytes in buffer.memory={limit} "
        f"within max.block.ms={max_block * 1000:g}"
    )
