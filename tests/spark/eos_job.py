"""A streaming query copying one topic to another through the exactly-once logbus sink,
run as its own process (its own SparkSession and JVM) by test_exactly_once.py, so that a
test can give it task retries (`local[2,4]`) or kill it with -9 and start it again from
its checkpoint.

Each row passes a Python UDF that can fail or stall on purpose:
- `--fail-once DIR`: in the first attempt of each task (of every micro-batch), after
  `--fail-after` rows, it waits until the output topic has records (the sink's open
  transaction has sent some: read_uncommitted readers see them), then raises (a marker
  file in DIR per batch and partition says the failure happened, so the retried attempt
  goes through);
- `--stall-batch N --stall-partition P --signal DIR`: in micro-batch N the task of Spark
  partition P writes DIR/stalled and then sleeps for a long time, so the test can kill
  the driver while that micro-batch is half written.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

import logbus.spark


def _wait_for_records(bootstrap: str, topic: str) -> None:
    """Until partition 0 of `topic` has a record (read_uncommitted), for up to 60 s."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-job-probe"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            if high > 0:
                return
            time.sleep(0.2)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-offsets", type=int, default=1000)
    parser.add_argument("--fail-once")
    parser.add_argument("--fail-after", type=int, default=1)
    parser.add_argument("--stall-batch", type=int)
    parser.add_argument("--stall-partition", type=int, default=1)
    parser.add_argument("--signal")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("logbus-eos-job")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.python.worker.reuse", "true")
        # Small Arrow batches: the sink gets rows while the UDF is still at work.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    logbus.spark.register(spark)
    fail_once, fail_after = args.fail_once, args.fail_after
    stall_batch, stall_partition, signal = args.stall_batch, args.stall_partition, args.signal
    seen: dict[tuple[str, int, int], int] = {}

    def passthrough(value: bytes) -> bytes:
        context = TaskContext.get()
        assert context is not None
        batch = int(context.getLocalProperty("streaming.sql.batchId") or -1)
        part = context.partitionId()
        key = (str(batch), part, context.attemptNumber())
        seen[key] = seen.get(key, 0) + 1
        if fail_once is not None and seen[key] > fail_after:
            marker = Path(fail_once) / f"failed-{batch}-{part}"
            if not marker.exists():
                marker.touch()
                _wait_for_records(args.bootstrap, args.out)
                raise RuntimeError(f"injected failure in batch {batch} partition {part}")
        if stall_batch == batch and stall_partition == part and signal is not None:
            (Path(signal) / "stalled").touch()
            time.sleep(600)
        return value

    through = udf(passthrough, BinaryType())
    source = (
        spark.readStream.format("logbus")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
    )
    query = (
        source.select("key", through("value").alias("value"))
        .writeStream.format("logbus")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.out)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", args.prefix)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", flush=True)
        os._exit(1)


if __name__ == "__main__":
    main()
