"""A latency histogram with log-linear buckets, read as quantiles at scrape time.

Kafka's timers (Yammer histograms) report quantiles of a recent sample. Here a value
costs one `bisect` into a fixed table of bucket bounds and one increment: no allocation
per value. Quantiles are read from the current and the previous window (each
`WINDOW_S` long), so they follow what happened in the last half minute to minute; the
count is cumulative, as a Prometheus summary's is.
"""

from __future__ import annotations

import time
from bisect import bisect_left

QUANTILES = (0.50, 0.75, 0.95, 0.98, 0.99, 0.999)
# the `quantile` labels a JMX exporter gives Kafka's 50thPercentile ... 999thPercentile
QUANTILE_LABELS = ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
WINDOW_S = 30.0


def _bounds() -> tuple[float, ...]:
    """Upper bounds in milliseconds: 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8 per decade from
    1 µs to 1,000 s (about 3% to 12% relative error)."""
    steps = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
    return tuple(step * 10.0**exp for exp in range(-3, 6) for step in steps)


BOUNDS = _bounds()


class Histogram:
    """Values in milliseconds. Not thread-safe beyond what the GIL gives (an increment
    may be lost to a concurrent rotation; never a crash)."""

    __slots__ = ("_current", "_previous", "_window_end", "count", "total")

    def __init__(self) -> None:
        self._current = [0] * (len(BOUNDS) + 1)
        self._previous = [0] * (len(BOUNDS) + 1)
        self._window_end = time.monotonic() + WINDOW_S
        self.count = 0
        self.total = 0.0

    def record(self, ms: float, now: float) -> None:
        """`now` is `time.monotonic()` (the caller has it already)."""
        if now >= self._window_end:
            self._rotate(now)
        self._current[bisect_left(BOUNDS, ms)] += 1
        self.count += 1
        self.total += ms

    def _rotate(self, now: float) -> None:
        stale = now >= self._window_end + WINDOW_S  # nothing recorded for a whole window
        self._previous = [0] * len(self._current) if stale else self._current
        self._current = [0] * len(self._previous)
        self._window_end = now + WINDOW_S

    def quantiles(self, now: float | None = None) -> list[tuple[float, float]]:
        """(quantile, value in ms) for each of QUANTILES, over the recent windows; each
        value is the upper bound of the bucket the quantile falls in (0 when empty)."""
        if now is None:
            now = time.monotonic()
        if now >= self._window_end:
            self._rotate(now)
        counts = [a + b for a, b in zip(self._current, self._previous, strict=True)]
        n = sum(counts)
        out = []
        for q in QUANTILES:
            if n == 0:
                out.append((q, 0.0))
                continue
            rank = q * n
            seen = 0
            value = BOUNDS[-1]
            for i, c in enumerate(counts):
                seen += c
                if seen >= rank and c:
                    value = BOUNDS[i] if i < len(BOUNDS) else BOUNDS[-1]
                    break
            out.append((q, value))
        return out
