"""A driver process of its own for the cluster tests (test_standalone_cluster.py): the same
pipelines through a classic session on a standalone master (`--master spark://...`) or a
Spark Connect client (`--remote sc://...`), with `logbus` registered as each requires:

1. a batch read of `--source`, counted, then copied by the sink to `<prefix>-batch`
   (kafka.acks=all);
2. a streaming read of `--source` (Trigger.AvailableNow, micro-batches of at most
   `--max-offsets` records) into Parquet under `--out`/stream (partition, offset and value
   of each record) with `--stream-to parquet`, or copied by the sink to `<prefix>-stream`
   with `--stream-to logbus` (none with `--stream-to nothing`).

The executors do the reading and writing; the driver only plans. It prints one JSON line
last: the application id, the batch read's count and the seconds each step took.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import logbus.spark


def session(args: argparse.Namespace) -> Any:
    if args.remote:
        # Spark Connect: the client sends the data source class to the server's session.
        return logbus.spark.register(SparkSession.builder.remote(args.remote).getOrCreate())
    builder = SparkSession.builder.master(args.master).appName("logbus-cluster-job")
    for setting in args.conf:
        name, _, value = setting.partition("=")
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return logbus.spark.register(spark)


def read_stream(spark: Any, args: argparse.Namespace) -> Any:
    return (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
    )


# Spark waits a fixed 10 s for a Python worker it starts on the driver (the streaming
# source's planner) to connect back; on a loaded machine a query can fail that way before
# its first micro-batch. A supervisor would start it again from its checkpoint: so does
# the job, then, and only then.
WORKER_TIMEOUT = "Python worker failed to connect back"
STARTS = 3


def run_available_now(writer: Any, checkpoint: Path) -> None:
    for start in range(1, STARTS + 1):
        query = (
            writer.option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start()
        )
        try:
            query.awaitTermination()
        except Exception as error:
            if WORKER_TIMEOUT in str(error) and query.lastProgress is None and start < STARTS:
                print(f"restarting the query (start {start}): {WORKER_TIMEOUT}", flush=True)
                continue
            raise
        return


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--master")
    where.add_argument("--remote")
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stream-to", choices=("parquet", "logbus", "nothing"), required=True)
    parser.add_argument("--max-offsets", type=int, default=2500)
    return parser.parse_args()


def batch_copy(spark: Any, args: argparse.Namespace) -> int:
    """The batch read's count, and its rows copied to `<prefix>-batch`."""
    batch = (
        spark.read.format("logbus")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .load()
    )
    count: int = batch.count()
    (batch.select("key", "value").write.format("logbus")
     .option("kafka.bootstrap.servers", args.bootstrap)
     .option("topic", f"{args.prefix}-batch")
     .option("kafka.acks", "all")
     .mode("append").save())
    return count


def stream(spark: Any, args: argparse.Namespace) -> None:
    if args.stream_to == "nothing":
        return
    if args.stream_to == "parquet":
        writer = (
            read_stream(spark, args).select("partition", "offset", "value")
            .writeStream.format("parquet").option("path", str(args.out / "stream"))
        )
    elif args.stream_to == "logbus":
        writer = (
            read_stream(spark, args).select("key", "value")
            .writeStream.format("logbus")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", f"{args.prefix}-stream")
        )
    run_available_now(writer, args.out / "stream-checkpoint")


def main() -> None:
    args = parse_args()
    seconds: dict[str, float] = {}
    started = time.monotonic()
    spark = session(args)
    seconds["session"] = time.monotonic() - started
    count = batch_copy(spark, args)
    seconds["batch read and write"] = time.monotonic() - started - sum(seconds.values())
    stream(spark, args)
    seconds["stream"] = time.monotonic() - started - sum(seconds.values())
    report = {"app_id": spark.conf.get("spark.app.id"), "batch_count": count, "seconds": seconds}
    print(json.dumps(report))
    spark.stop()


if __name__ == "__main__":
    main()
