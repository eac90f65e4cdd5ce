"""The purgatory: where produce and fetch requests wait for a condition (the high
watermark passing an offset, enough bytes to fetch) or their timeout.

Operations watch keys (topic-partitions); whoever changes a key calls `notify(key)`, which
wakes the watchers so they re-check their condition (Kafka's DelayedProduce and
DelayedFetch, in asyncio form). Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}

    def notify(self, key: Hashable) -> None:
        for fut in self._watchers.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait_until(
        self,
        done: Callable[[], bool],
        keys: Iterable[Hashable],
        timeout_ms: int,
        *,
        known_unmet: bool = False,
    ) -> bool:
        """Wait until `done()` is true (re-checked when a key is notified) or the timeout
        passes; return the last value of `done()`. With `known_unmet` the caller has just
        found the condition false, so the first (possibly costly) check is skipped."""
        keys = list(keys)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        while known_unmet or not done():
            known_unmet = False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            for key in keys:
                self._watchers.setdefault(key, set()).add(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                return done()
            finally:
                for key in keys:
                    watchers = self._watchers.get(key)
                    if watchers is not None:
                        watchers.discard(fut)
                        if not watchers:
                            del self._watchers[key]
        return True
