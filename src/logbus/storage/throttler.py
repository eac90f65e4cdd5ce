"""A rate limiter for the log cleaner's I/O (`log.cleaner.io.max.bytes.per.second`),
shaped like Kafka's `Throttler`: bytes are counted over a check interval and, when the
rate over that interval is above the limit, the caller sleeps until it is not."""

from __future__ import annotations

import time
from collections.abc import Callable


class Throttler:
    """Counts bytes and sleeps the calling thread to keep under `rate` bytes/second.

    Owned by one cleaner (its lock-free state is not safe to share between threads).
    `sleep` may return early (a shutdown), in which case the period simply restarts.
    """

    def __init__(
        self,
        rate: float,
        *,
        check_interval_ms: int = 300,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.rate = rate
        self._interval = check_interval_ms / 1000
        self._clock = clock
        self._sleep = sleep
        self._period_start = clock()
        self._observed = 0
        self.total_sleep = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if self.rate <= 0:
            return  # Kafka would stall forever on a zero rate; treat it as no limit
        self._observed += observed
        now = self._clock()
        elapsed = now - self._period_start
        if elapsed <= self._interval or self._observed <= 0:
            return
        if self._observed / elapsed > self.rate:
            pause = self._observed / self.rate - elapsed
            if pause > 0:
                self.total_sleep += pause
                self._sleep(pause)
        self._period_start = self._clock()
        self._observed = 0
