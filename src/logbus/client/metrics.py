"""The clients' metrics, named and measured as Kafka's clients measure them.

A `Metrics` registry holds `Sensor`s; the producer's sender and the consumer's fetcher
record into them once per batch or per request (never per record), and `metrics()` on
the clients reads every metric by Kafka's name (`record-send-rate`, `fetch-latency-avg`,
...) into a plain dict of floats.

Windowed statistics follow Kafka's `SampledStat`: `metrics.num.samples` samples of
`metrics.sample.window.ms` each (30 s and 2 by default); a sample older than their
product no longer counts. A rate divides the sum of the live samples by the time they
cover, but by no less than `(samples - 1) * window` (Kafka's `Rate.windowSize`): a
client that has run for 3 s reports its records over 30 s, as Kafka's does. An average
or maximum of no recording is NaN.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from logbus.client.config import Setting

METRICS_SETTINGS = (
    Setting("metrics.sample.window.ms", int, 30000,
            "length of one sample of the clients' windowed metrics", at_least=1),
    Setting("metrics.num.samples", int, 2,
            "samples kept for the clients' windowed metrics", at_least=1),
)

NAN = float("nan")


def _now_ms() -> float:
    return time.monotonic() * 1000


@dataclass(slots=True)
class _Sample:
    start: float = 0.0
    count: int = 0
    total: float = 0.0
    max: float = -math.inf


class Sensor:
    """One recorded quantity and the statistics read from it: the windowed sum (for
    rates), count, total and maximum, and the all-time sum. Thread-safe."""

    __slots__ = (
        "_current",
        "_lock",
        "_samples",
        "_samples_n",
        "_window",
        "cumulative",
        "total_count",
    )

    def __init__(self, window_ms: int, samples: int, now: float) -> None:
        self._window = float(window_ms)
        self._samples_n = samples
        self._samples = [_Sample(start=now)]
        self._current = 0
        self._lock = threading.Lock()
        self.cumulative = 0.0
        self.total_count = 0

    def record(self, value: float = 1.0, now: float | None = None) -> None:
        if now is None:
            now = _now_ms()
        with self._lock:
            self.cumulative += value
            self.total_count += 1
            sample = self._samples[self._current]
            if now - sample.start >= self._window:
                self._current = (self._current + 1) % self._samples_n
                if self._current >= len(self._samples):
                    self._samples.append(_Sample(start=now))
                else:
                    self._samples[self._current] = _Sample(start=now)
                sample = self._samples[self._current]
            sample.count += 1
            sample.total += value
            if value > sample.max:
                sample.max = value

    def _live(self, now: float) -> list[_Sample]:
        """The samples still inside the window; expired ones are reset (Kafka's purge)."""
        expire = self._window * self._samples_n
        for i, sample in enumerate(self._samples):
            if now - sample.start >= expire:
                self._samples[i] = _Sample(start=now)
        return self._samples

    def rate(self, now: float | None = None) -> float:
        """The windowed sum per second."""
        return self._per_second(now, count=False)

    def rate_of_count(self, now: float | None = None) -> float:
        """Recordings per second in the window (Kafka's Rate of a WindowedCount)."""
        return self._per_second(now, count=True)

    def _per_second(self, now: float | None, *, count: bool) -> float:
        if now is None:
            now = _now_ms()
        with self._lock:
            samples = self._live(now)
            total = sum(s.count if count else s.total for s in samples)
            elapsed = now - min(s.start for s in samples)
        full = int(elapsed // self._window)
        least = self._samples_n - 1
        if full < least:
            elapsed += (least - full) * self._window
        return total / (elapsed / 1000) if elapsed > 0 else 0.0

    def avg(self, now: float | None = None) -> float:
        with self._lock:
            samples = self._live(_now_ms() if now is None else now)
            count = sum(s.count for s in samples)
            return sum(s.total for s in samples) / count if count else NAN

    def max(self, now: float | None = None) -> float:
        with self._lock:
            samples = self._live(_now_ms() if now is None else now)
            if not any(s.count for s in samples):
                return NAN
            return max(s.max for s in samples if s.count)


class Metrics:
    """A client's sensors and the names its `metrics()` reports them under."""

    def __init__(self, window_ms: int = 30000, samples: int = 2) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._metrics: dict[str, Callable[[], float]] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Metrics:
        """From a parsed client configuration (its metrics.* settings)."""
        return cls(int(config["metrics.sample.window.ms"]), int(config["metrics.num.samples"]))

    def sensor(self) -> Sensor:
        return Sensor(self.window_ms, self.samples, _now_ms())

    def add(self, name: str, read: Callable[[], float]) -> None:
        self._metrics[name] = read

    def snapshot(self) -> dict[str, float]:
        """Every metric by name, read now."""
        return {name: float(read()) for name, read in self._metrics.items()}


class ProducerMetrics:
    """The producer's sensors (Kafka's producer-metrics group), recorded by the sender."""

    __slots__ = (
        "batch_size",
        "compression_rate",
        "metrics",
        "outgoing_bytes",
        "record_errors",
        "record_retries",
        "records_per_request",
        "records_sent",
        "request_latency",
    )

    def __init__(self, metrics: Metrics, available_bytes: Callable[[], float]) -> None:
        self.metrics = metrics
        s = metrics.sensor
        self.records_sent = s()
        self.request_latency = s()
        self.batch_size = s()
        self.records_per_request = s()
        self.record_errors = s()
        self.record_retries = s()
        self.outgoing_bytes = s()
        self.compression_rate = s()
        add = metrics.add
        add("record-send-rate", self.records_sent.rate)
        add("record-send-total", lambda: self.records_sent.cumulative)
        add("request-latency-avg", self.request_latency.avg)
        add("request-latency-max", self.request_latency.max)
        add("request-rate", self.request_latency.rate_of_count)
        add("batch-size-avg", self.batch_size.avg)
        add("batch-size-max", self.batch_size.max)
        add("records-per-request-avg", self.records_per_request.avg)
        add("record-error-rate", self.record_errors.rate)
        add("record-error-total", lambda: self.record_errors.cumulative)
        add("record-retry-rate", self.record_retries.rate)
        add("record-retry-total", lambda: self.record_retries.cumulative)
        add("outgoing-byte-rate", self.outgoing_bytes.rate)
        add("outgoing-byte-total", lambda: self.outgoing_bytes.cumulative)
        add("buffer-available-bytes", available_bytes)
        add("compression-rate-avg", self.compression_rate.avg)


class ConsumerMetrics:
    """The consumer's sensors (Kafka's consumer-fetch-manager-metrics and
    consumer-coordinator-metrics groups), recorded by the fetcher and the coordinator."""

    __slots__ = (
        "bytes_consumed",
        "commit_latency",
        "fetch_latency",
        "fetch_size",
        "metrics",
        "records_consumed",
        "records_lag",
    )

    def __init__(self, metrics: Metrics, assigned: Callable[[], float]) -> None:
        self.metrics = metrics
        s = metrics.sensor
        self.records_consumed = s()
        self.bytes_consumed = s()
        self.records_lag = s()
        self.fetch_latency = s()
        self.fetch_size = s()
        self.commit_latency = s()
        add = metrics.add
        add("records-lag-max", self.records_lag.max)
        add("records-consumed-rate", self.records_consumed.rate)
        add("records-consumed-total", lambda: self.records_consumed.cumulative)
        add("bytes-consumed-rate", self.bytes_consumed.rate)
        add("bytes-consumed-total", lambda: self.bytes_consumed.cumulative)
        add("fetch-rate", self.fetch_latency.rate_of_count)
        add("fetch-total", lambda: self.fetch_latency.total_count)
        add("fetch-latency-avg", self.fetch_latency.avg)
        add("fetch-latency-max", self.fetch_latency.max)
        add("fetch-size-avg", self.fetch_size.avg)
        add("fetch-size-max", self.fetch_size.max)
        add("commit-latency-avg", self.commit_latency.avg)
        add("commit-latency-max", self.commit_latency.max)
        add("commit-rate", self.commit_latency.rate_of_count)
        add("assigned-partitions", assigned)
