"""The example pipelines of examples/spark, end to end on small data."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from examples.spark import offline_load, pageviews
from spark_support import create_topic, produce

DAY_1 = int(datetime(2026, 1, 1, 23, 0, tzinfo=UTC).timestamp() * 1000)
DAY_2 = int(datetime(2026, 1, 2, 1, 0, tzinfo=UTC).timestamp() * 1000)


def test_offline_load_survives_a_crash(spark: Any, broker: Any, tmp_path: Path) -> None:
    b = broker.bootstrap
    create_topic(b, "events", 2)
    for p in (0, 1):
        produce(b, "events", [b"e%d" % i for i in range(15)], partition=p,
                timestamps=[DAY_1 if i < 10 else DAY_2 for i in range(15)])
    lake = tmp_path / "lake"
    first = offline_load.load_once(spark, b, "events", lake)
    assert first == {"load": 1, "rows": 30, "committed": True,
                     "offsets": {"events": {"0": 15, "1": 15}}}
    assert sorted(p.name for p in lake.glob("date=*")) == ["date=2026-01-01", "date=2026-01-02"]
    assert json.loads((lake / "_offsets" / "1.json").read_text()) == {
        "events": {"0": 15, "1": 15}
    }

    produce(b, "events", [b"late%d" % i for i in range(10)], partition=1, timestamps=[DAY_2] * 10)
    crashed = offline_load.load_once(spark, b, "events", lake, commit=False)
    assert crashed == {"load": 2, "rows": 10, "committed": False}
    assert offline_load.read_lake(spark, lake).count() == 30  # the crashed load is not visible

    rerun = offline_load.load_once(spark, b, "events", lake)
    assert rerun["load"] == 2 and rerun["rows"] == 10
    everything = spark.read.parquet(str(lake)).collect()  # every file, committed or not
    keys = Counter((r.partition, r.offset) for r in everything)
    assert set(keys.values()) == {1}  # nothing twice
    assert sorted(keys) == [(0, o) for o in range(15)] + [(1, o) for o in range(25)]

    idle = offline_load.load_once(spark, b, "events", lake)
    assert idle["rows"] == 0 and idle["offsets"] == {"events": {"0": 15, "1": 25}}
    assert offline_load.read_lake(spark, lake).count() == 40


def test_pageview_counts(spark: Any, broker: Any, tmp_path: Path) -> None:
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    b = broker.bootstrap
    start = DAY_1  # on a minute boundary
    events, span = 600, 5 * 60_000
    pageviews.run(spark, b, tmp_path, events, start, span)

    expected: Counter[tuple[str, int]] = Counter()
    for i in range(events):
        _, value, ts = pageviews.event(i, start, span, events)
        expected[(json.loads(value)["page"], ts - ts % 60_000)] += 1

    def minute(dt: datetime) -> int:
        return int(dt.replace(tzinfo=UTC).timestamp() * 1000)

    final = {
        (r.page, minute(r.window_start)): r["count"]
        for r in spark.read.parquet(str(tmp_path / "counts")).collect()
    }
    max_ts = max(ts for _, ts in expected) + 59_999
    closed = {k: v for k, v in expected.items() if k[1] + 60_000 <= max_ts - 60_000}
    assert closed and all(final[k] == v for k, v in closed.items())
    assert all(expected[k] == v for k, v in final.items())

    consumer = KafkaConsumer(
        {"bootstrap.servers": b, "group.id": "check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaTopicPartition("pageview-counts", p, 0) for p in range(3)])
        latest: dict[str, int] = {}
        misses = 0
        while misses < 3:
            msg = consumer.poll(1.0)
            if msg is None:
                misses += 1
                continue
            assert msg.error() is None
            latest[msg.key().decode()] = json.loads(msg.value())["count"]
    finally:
        consumer.close()
    by_key = {
        f"{page}|{datetime.fromtimestamp(ts / 1000, UTC):%Y-%m-%dT%H:%M}": n
        for (page, ts), n in expected.items()
    }
    assert latest == by_key
