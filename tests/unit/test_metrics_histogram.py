"""The broker's request timers: quantiles from log-linear buckets over recent windows."""

from __future__ import annotations

import pytest

from logbus.server.metrics.broker_metrics import BrokerTopicStats, BusyRatio, api_name
from logbus.server.metrics.histogram import BOUNDS, QUANTILES, WINDOW_S, Histogram


def test_quantiles_are_within_a_bucket_of_the_true_values() -> None:
    histogram = Histogram()
    now = 1000.0
    histogram._window_end = now + WINDOW_S
    for ms in range(1, 1001):  # 1 .. 1000 ms, uniformly
        histogram.record(float(ms), now)
    found = dict(histogram.quantiles(now))
    assert list(found) == list(QUANTILES)
    for q, value in found.items():
        exact = q * 1000
        assert exact <= value <= exact * 1.26, (q, value)
    assert histogram.count == 1000
    assert histogram.total == pytest.approx(sum(range(1, 1001)))


def test_quantiles_forget_old_windows_but_the_count_stays() -> None:
    histogram = Histogram()
    now = 50.0
    histogram._window_end = now + WINDOW_S
    for _ in range(100):
        histogram.record(500.0, now)
    # the next window still sees the previous one
    assert dict(histogram.quantiles(now + WINDOW_S + 1))[0.5] >= 500
    # two windows on, nothing recent: zeros, and the cumulative count is kept
    assert dict(histogram.quantiles(now + 3 * WINDOW_S + 2))[0.99] == 0.0
    assert histogram.count == 100


def test_values_beyond_the_last_bound_land_in_the_overflow_bucket() -> None:
    histogram = Histogram()
    histogram.record(BOUNDS[-1] * 10, histogram._window_end - 1)
    assert dict(histogram.quantiles(histogram._window_end - 1))[0.5] == BOUNDS[-1]


def test_topic_stats_sum_to_the_all_topics_figures() -> None:
    stats = BrokerTopicStats()
    stats.appended("a", 10, 1000)
    stats.appended("b", 5, 300)
    stats.produce_failed("b")
    stats.fetched("a", 700, failed=False)
    stats.fetched("a", 0, failed=True)
    assert stats.all_topics() == [15, 1300, 700, 1, 1, 3, 2]
    stats.remove("a")  # deleted: its series go, the all-topics counters keep its counts
    assert list(stats.topics) == ["b"]
    assert stats.all_topics() == [15, 1300, 700, 1, 1, 3, 2]


def test_api_names_are_kafkas_request_names() -> None:
    assert api_name(0) == "Produce"
    assert api_name(4) == "LeaderAndIsr"
    assert api_name(8) == "OffsetCommit"
    assert api_name(9999) == "9999"


def test_idle_share_is_the_complement_of_busy_time_between_reads() -> None:
    ratio = BusyRatio()
    ratio._last_time, ratio._last_busy = 100.0, 0.0
    assert ratio.idle(0.25, 101.0) == pytest.approx(0.75)
    assert ratio.idle(0.25, 102.0) == pytest.approx(1.0)
    assert ratio.idle(5.0, 103.0) == 0.0  # clamped
