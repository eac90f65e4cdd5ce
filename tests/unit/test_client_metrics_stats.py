"""The clients' windowed statistics (Kafka's SampledStat, Rate, Avg, Max) and the perf
producer's window and total lines, with explicit clocks."""

from __future__ import annotations

import math

import pytest

from logbus.cli.perf import ProduceStats
from logbus.client.metrics import Metrics, Sensor


def test_rate_divides_by_at_least_samples_minus_one_windows() -> None:
    sensor = Sensor(30_000, 2, now=0.0)
    sensor.record(300, now=1_000.0)
    # 3 s in, Kafka's Rate still divides by one full 30 s window plus the time elapsed.
    assert sensor.rate(now=3_000.0) == pytest.approx(300 / 33)
    assert sensor.rate_of_count(now=3_000.0) == pytest.approx(1 / 33)
    assert sensor.cumulative == 300 and sensor.total_count == 1


def test_samples_roll_and_expire() -> None:
    sensor = Sensor(1_000, 2, now=0.0)
    sensor.record(10, now=100.0)
    sensor.record(2, now=1_500.0)  # a second sample
    assert sensor.avg(now=1_600.0) == 6
    assert sensor.max(now=1_600.0) == 10
    # The first sample is older than 2 windows at 2.1 s: only the second one counts.
    assert sensor.avg(now=2_100.0) == 2
    assert sensor.max(now=2_100.0) == 2
    # Both gone: no value, NaN as in Kafka; the all-time total stays.
    assert math.isnan(sensor.avg(now=10_000.0))
    assert math.isnan(sensor.max(now=10_000.0))
    assert sensor.cumulative == 12


def test_metrics_snapshot_reads_every_registered_name() -> None:
    metrics = Metrics(30_000, 2)
    sensor = metrics.sensor()
    metrics.add("x-total", lambda: sensor.cumulative)
    sensor.record(5)
    assert metrics.snapshot() == {"x-total": 5.0}


def test_produce_stats_window_and_total_lines() -> None:
    stats = ProduceStats(start=0.0, interval=5.0)
    assert stats.record(10.0, 100, 100 * 1024, now=1.0) is None
    line = stats.record(30.0, 100, 100 * 1024, now=5.0)
    assert line == (
        "200 records sent, 40.0 records/sec (0.04 MB/sec), 20.0 ms avg latency, "
        "30.0 ms max latency."
    )
    stats.record(2.0, 800, 800 * 1024, now=6.0)
    # 1000 records, 800 at 2 ms, 100 at 10 ms, 100 at 30 ms.
    assert stats.percentiles(0.5, 0.85, 0.95, 0.999) == [2, 10, 30, 30]
    assert stats.total_line(10.0) == (
        "1000 records sent, 100.000000 records/sec (0.10 MB/sec), 5.60 ms avg latency, "
        "30.00 ms max latency, 2 ms 50th, 30 ms 95th, 30 ms 99th, 30 ms 99.9th."
    )
