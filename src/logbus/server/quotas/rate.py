"""A rate over sampled windows (Kafka's `Rate` over a `SampledStat`): the basis of every
client quota.

A sample covers `window_s` seconds from its first record; at most `samples` are kept, and
one older than `samples * window_s` is dropped. The rate is the sum of the kept samples
over the time they span, which is never taken as shorter than `samples - 1` whole windows,
so that a new sensor does not report a huge rate after its first record.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start: float
    value: float


class SampledRate:
    """Values per second over the last `samples` windows of `window_s` seconds."""

    def __init__(self, samples: int, window_s: float) -> None:
        if samples < 1 or window_s <= 0:
            raise ValueError("a rate needs at least one window of positive length")
        self.samples = samples
        self.window_s = window_s
        self._samples: list[_Sample] = []
        self.last_record = 0.0

    def record(self, value: float, now: float) -> None:
        """Add `value` at time `now` (seconds, monotonic); a negative value takes back an
        earlier record (Kafka's unrecord of a throttled fetch)."""
        self._purge(now)
        current = self._samples[-1] if self._samples else None
        if current is None or now - current.start >= self.window_s:
            current = _Sample(now, 0.0)
            self._samples.append(current)
            if len(self._samples) > self.samples:
                del self._samples[0]
        current.value += value
        self.last_record = now

    def window_size(self, now: float) -> float:
        """Seconds the rate is measured over at `now` (Kafka's `Rate.windowSize`)."""
        self._purge(now)
        elapsed = now - self._samples[0].start if self._samples else 0.0
        full_windows = int(elapsed // self.window_s)
        minimum = self.samples - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_s
        return max(elapsed, self.window_s)

    def total(self, now: float) -> float:
        self._purge(now)
        return sum(sample.value for sample in self._samples)

    def rate(self, now: float) -> float:
        return self.total(now) / self.window_size(now)

    def throttle(self, bound: float, now: float) -> float:
        return throttle_time_s(self, bound, now)

    def _purge(self, now: float) -> None:
        horizon = self.samples * self.window_s
        samples = self._samples
        while samples and now - samples[0].start >= horizon:
            del samples[0]


def throttle_time_s(rate: SampledRate, bound: float, now: float) -> float:
    """How long a client over `bound` must wait so that its rate falls back to it:
    (observed - bound) / bound * window (Kafka's `QuotaUtils.throttleTime`); 0 within it."""
    observed = rate.rate(now)
    if observed <= bound:
        return 0.0
    window = rate.window_size(now)
    if bound <= 0:
        return window
    return (observed - bound) / bound * window


class TokenBucket:
    """Kafka's `TokenBucket` (KIP-599, controller mutations): a burst of up to
    `bound * samples * window_s` is allowed, credits come back at `bound` per second, and
    a client in debt waits until it is paid back."""

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples = samples
        self.window_s = window_s
        self.tokens: float | None = None  # full until the first record
        self._at = 0.0
        self.last_record = 0.0

    def _refill(self, bound: float, now: float) -> float:
        burst = bound * self.samples * self.window_s
        tokens = burst if self.tokens is None else self.tokens
        tokens = min(burst, tokens + max(0.0, now - self._at) * bound)
        self.tokens, self._at = tokens, now
        return tokens

    def record_bounded(self, value: float, bound: float, now: float) -> None:
        self.tokens = self._refill(bound, now) - value
        self.last_record = now

    def throttle(self, bound: float, now: float) -> float:
        tokens = self._refill(bound, now)
        if tokens >= 0:
            return 0.0
        return -tokens / bound if bound > 0 else self.samples * self.window_s
