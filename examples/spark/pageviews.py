"""Website activity tracking: page views counted per page per minute.

A generator writes page-view events (JSON, keyed by user, stamped with the time of the
view) to the `pageviews` topic. A structured streaming job reads them with the `logbus`
source, counts views per page per one-minute window of event time with a watermark, and
writes the counts twice:

- to the compacted topic `pageview-counts` (update mode): one record per page and
  minute, keyed `page|window start`, so compaction keeps the latest count of each;
- to Parquet under `<out>/counts` (append mode): each window once, when the watermark has
  passed its end and its count is final.

    python -m examples.spark.pageviews --bootstrap-server 127.0.0.1:9092 --events 5000

runs the generator and then the job until it has caught up (Trigger.AvailableNow);
`--follow` keeps the job running and counting new views as they arrive.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup")
EVENTS_TOPIC = "pageviews"
COUNTS_TOPIC = "pageview-counts"
EVENT_SCHEMA = "page STRING, user STRING, ts LONG"


def event(i: int, start_ms: int, span_ms: int, events: int) -> tuple[bytes, bytes, int]:
    """The i-th generated view: (key, JSON value, timestamp ms), deterministic."""
    ts = start_ms + i * span_ms // events
    user = f"user-{(i * 7) % 50}"
    body = {"page": PAGES[(i * 3) % len(PAGES)], "user": user, "ts": ts}
    return user.encode(), json.dumps(body).encode(), ts


def generate(bootstrap: str, events: int, start_ms: int, span_ms: int) -> None:
    """Write `events` page views spread over `span_ms` from `start_ms`, acknowledged."""
    from logbus.client.producer import ProducerRecord
    from logbus.client.producer.sync import Producer

    with Producer({"bootstrap.servers": bootstrap}, linger_ms=5) as producer:
        batch = []
        for i in range(events):
            key, value, ts = event(i, start_ms, span_ms, events)
            batch.append(ProducerRecord(EVENTS_TOPIC, value, key=key, timestamp=ts))
            if len(batch) == 1000:
                producer.send_batch(batch)
                batch = []
        if batch:
            producer.send_batch(batch)


def counts(spark: SparkSession, bootstrap: str, watermark: str = "1 minute") -> DataFrame:
    """Views per page per minute of event time, from the `pageviews` stream."""
    views = (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "2000")
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("v"))
        .select("v.page", (F.col("v.ts") / 1000).cast("timestamp").alias("event_time"))
    )
    return (
        views.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute").alias("window"), "page")
        .count()
        .select(
            "page",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "count",
        )
    )


def start_queries(
    spark: SparkSession, bootstrap: str, out: Path, *, follow: bool = False
) -> list[StreamingQuery]:
    """The two sinks of the counts: the compacted topic and Parquet."""
    df = counts(spark, bootstrap)
    trigger: dict[str, Any] = {"processingTime": "5 seconds"} if follow else {"availableNow": True}
    def publish(batch: DataFrame, batch_id: int) -> None:
        # Spark's Python data source sinks take append mode only, so the updated counts of
        # each micro-batch are written with a batch write; a replayed micro-batch rewrites
        # the same keys, which compaction collapses.
        (
            batch.select(
                F.concat_ws(
                    "|", "page", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm")
                ).alias("key"),
                F.to_json(F.struct("page", "window_start", "count")).alias("value"),
            )
            .write.format("logbus")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", COUNTS_TOPIC)
            .mode("append")
            .save()
        )

    to_topic = (
        df.writeStream.foreachBatch(publish)
        .outputMode("update")
        .option("checkpointLocation", str(out / "checkpoints" / "topic"))
        .trigger(**trigger)
        .start()
    )
    to_parquet = (
        df.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(out / "counts"))
        .option("checkpointLocation", str(out / "checkpoints" / "parquet"))
        .trigger(**trigger)
        .start()
    )
    return [to_topic, to_parquet]


def run(
    spark: SparkSession, bootstrap: str, out: Path, events: int, start_ms: int,
    span_ms: int = 5 * 60_000,
) -> None:
    from examples.spark.common import ensure_topic

    ensure_topic(bootstrap, EVENTS_TOPIC, 3)
    ensure_topic(bootstrap, COUNTS_TOPIC, 3, {"cleanup.policy": "compact"})
    if events:
        generate(bootstrap, events, start_ms, span_ms)
    for query in start_queries(spark, bootstrap, out):
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"query {query.name or query.id} failed: {query.exception()}")


def main(argv: list[str] | None = None) -> None:
    import time

    from examples.spark.common import spark_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=Path("pageviews-out"))
    parser.add_argument("--follow", action="store_true", help="keep counting new views")
    args = parser.parse_args(argv)
    spark = spark_session("logbus-pageviews")
    try:
        now_ms = int(time.time() * 1000)
        run(spark, args.bootstrap_server, args.out, args.events, now_ms - 5 * 60_000)
        if args.follow:
            for query in start_queries(spark, args.bootstrap_server, args.out, follow=True):
                print(f"running {query.id}; Ctrl-C to stop")
            spark.streams.awaitAnyTermination()
        final = spark.read.parquet(str(args.out / "counts")).orderBy("window_start", "page")
        final.show(50, truncate=False)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
