"""The broker's metric state: plain counters and histograms, kept on the event loop by
the parts where things happen, turned into Prometheus families only when scraped
(`collector.py`).

Recording costs a few integer additions: `BrokerTopicStats` is updated once per
partition of a Produce or Fetch (the record count of a batch is known from its
validation), `RequestMetrics` once per request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from logbus.protocol import ApiKey
from logbus.server.metrics.histogram import Histogram

# Indexes into a topic's counter list (BrokerTopicStats.topics[topic]).
MESSAGES_IN, BYTES_IN, BYTES_OUT, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH = (
    range(7)
)
TOPIC_COUNTERS = (
    ("messagesin", "Records appended to the topic's partitions led here, from clients."),
    ("bytesin", "Bytes of record batches appended to the topic from clients."),
    ("bytesout", "Bytes of record batches sent to consumers (not followers) of the topic."),
    ("failedproducerequests", "Produce partitions of the topic answered with an error."),
    ("failedfetchrequests", "Consumer fetch partitions of the topic answered with an error."),
    ("totalproducerequests", "Produce partitions of the topic handled."),
    ("totalfetchrequests", "Consumer fetch partitions of the topic handled."),
)


class BrokerTopicStats:
    """Kafka's BrokerTopicMetrics, per topic; the all-topics figures are the sums."""

    __slots__ = ("_retired", "topics")

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}
        # what deleted topics counted: the all-topics counters never go back
        self._retired = [0] * len(TOPIC_COUNTERS)

    def counters(self, topic: str) -> list[int]:
        found = self.topics.get(topic)
        if found is None:
            found = self.topics[topic] = [0] * len(TOPIC_COUNTERS)
        return found

    def appended(self, topic: str, records: int, size: int) -> None:
        c = self.counters(topic)
        c[TOTAL_PRODUCE] += 1
        c[MESSAGES_IN] += records
        c[BYTES_IN] += size

    def produce_failed(self, topic: str) -> None:
        c = self.counters(topic)
        c[TOTAL_PRODUCE] += 1
        c[FAILED_PRODUCE] += 1

    def fetched(self, topic: str, size: int, failed: bool) -> None:
        c = self.counters(topic)
        c[TOTAL_FETCH] += 1
        c[BYTES_OUT] += size
        if failed:
            c[FAILED_FETCH] += 1

    def remove(self, topic: str) -> None:
        values = self.topics.pop(topic, None)
        if values is not None:
            for i, v in enumerate(values):
                self._retired[i] += v

    def all_topics(self) -> list[int]:
        totals = list(self._retired)
        for values in self.topics.values():
            for i, v in enumerate(values):
                totals[i] += v
        return totals


TIMES = (
    ("totaltimems", "From the request's arrival to the end of sending its response."),
    ("requestqueuetimems", "From the request's last bytes read to its handling starting."),
    ("localtimems", "Time the handler ran on the event loop (encoding included)."),
    ("remotetimems", "Time the handler waited: the purgatory (acks=all, long polls), "
     "the controller, other brokers."),
    ("responsequeuetimems", "From the response encoded to its sending starting."),
    ("responsesendtimems", "Time writing the response to the socket took."),
)


@dataclass(slots=True)
class RequestTypeMetrics:
    """One API's counts by version and its six timers."""

    by_version: dict[int, int] = field(default_factory=dict)
    times: tuple[Histogram, ...] = field(
        default_factory=lambda: tuple(Histogram() for _ in TIMES)
    )


class RequestMetrics:
    """Kafka's RequestMetrics, per API."""

    __slots__ = ("apis",)

    def __init__(self) -> None:
        self.apis: dict[int, RequestTypeMetrics] = {}

    def record(
        self,
        api_key: int,
        version: int,
        times_ms: tuple[float, float, float, float, float, float],
        now: float,
    ) -> None:
        m = self.apis.get(api_key)
        if m is None:
            m = self.apis[api_key] = RequestTypeMetrics()
        m.by_version[version] = m.by_version.get(version, 0) + 1
        for histogram, value in zip(m.times, times_ms, strict=True):
            histogram.record(value, now)


def api_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics: the API's name in camel case (`Produce`,
    `OffsetCommit`, `LeaderAndIsr`)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return str(api_key)
    return "".join(part.capitalize() for part in name.split("_"))


class BusyRatio:
    """The share of wall time a busy-seconds counter was not growing, over the time
    between two reads (the scrape interval); 1.0 before the first interval.

    The broker reads the event loop thread's CPU time (`time.thread_time()` on the loop)
    as its busy seconds: the loop uses no CPU while it waits in epoll, so what is left of
    the wall time is the time it waited for work (Kafka's idle ratios of its handler and
    network threads; logbus's one loop does both jobs)."""

    __slots__ = ("_last_busy", "_last_time")

    def __init__(self) -> None:
        self._last_busy = time.thread_time()
        self._last_time = time.monotonic()

    def idle(self, busy_s: float, now: float) -> float:
        elapsed = now - self._last_time
        if elapsed <= 0:
            return 1.0
        share = (busy_s - self._last_busy) / elapsed
        self._last_busy, self._last_time = busy_s, now
        return min(1.0, max(0.0, 1.0 - share))


class BrokerMetrics:
    """Everything the broker records for its metrics endpoint; one per broker, created
    when `metrics.listener` is set (otherwise nothing is recorded)."""

    def __init__(self) -> None:
        self.topics = BrokerTopicStats()
        self.requests = RequestMetrics()
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.delayed_produce = 0  # acks=all produces parked in the purgatory
        self.delayed_fetch = 0  # fetches parked in the purgatory
        self.loop_idle = BusyRatio()  # created on the event loop (Broker.start)
        # Kafka's LogFlushStats.LogFlushRateAndTimeMs: every log flush of this broker, as
        # its `LogManager`'s logs report them (from the threads that flush).
        self.log_flush = Histogram()

    def record_flush(self, ms: float) -> None:
        self.log_flush.record(ms, time.monotonic())
