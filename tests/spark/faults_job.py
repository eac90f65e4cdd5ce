"""A driver process of its own for test_standalone_cluster_faults.py: three steps on a
standalone Spark cluster, each held at a gate while the test kills a partition leader:

1. `write`: `--rows` rows (`row-000000`, ...) in six tasks written by the sink to
   `<prefix>-sunk` with kafka.acks=all; the second wave of tasks (2 and 3) waits at the
   gate, after tasks 0 and 1 have written and been acknowledged;
2. `batch`: a batch read of `--source` split into 12 tasks (`minPartitions`), its
   partition, offset and value written to Parquet under `--out`/batch; the first wave of
   tasks (0 and 1) waits at the gate, the ten others are planned and not started;
3. `stream`: a streaming read of `--source` (Trigger.AvailableNow, micro-batches of at
   most `--max-offsets` records) into Parquet under `--out`/stream; tasks 0 and 1 of
   micro-batch 1 wait at the gate, micro-batch 2 is planned after it.

A task at the gate touches `<gate>/<step>-held-<task>` and waits (at most 300 s) for
`<gate>/<step>-go`. The driver waits for both executors before the first job, so the two
tasks of a wave run at once, one per executor. It prints one JSON line last: the
application id.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from cluster_job import read_stream, run_available_now, session
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

TASKS_PER_WRITE = 6
TASKS_PER_READ = 12


def gate(gate_dir: str, step: str, tasks: frozenset[int], batch_id: str | None = None) -> Any:
    """A UDF passing values through that holds the first attempt of `tasks` (of
    micro-batch `batch_id`, when given) until `<gate_dir>/<step>-go` exists."""
    opened: list[bool] = []

    def hold(value: bytes) -> bytes:
        if opened:
            return value
        from pyspark import TaskContext

        context = TaskContext.get()
        if (
            context is None
            or context.partitionId() not in tasks
            or context.attemptNumber() > 0
            or (batch_id is not None
                and context.getLocalProperty("streaming.sql.batchId") != batch_id)
        ):
            return value
        Path(gate_dir, f"{step}-held-{context.partitionId()}").touch()
        deadline = time.monotonic() + 300
        while not Path(gate_dir, f"{step}-go").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        opened.append(True)
        return value

    return udf(hold, BinaryType(), useArrow=False)


def write(spark: Any, args: argparse.Namespace) -> None:
    held = gate(args.gate, "write", frozenset({2, 3}))
    (spark.range(0, args.rows, numPartitions=TASKS_PER_WRITE)
     .selectExpr("CAST(format_string('row-%06d', id) AS BINARY) AS value")
     .select(held("value").alias("value"))
     .write.format("logbus")
     .option("kafka.bootstrap.servers", args.bootstrap)
     .option("topic", f"{args.prefix}-sunk")
     .option("kafka.acks", "all")
     .mode("append").save())


def batch_read(spark: Any, args: argparse.Namespace) -> None:
    held = gate(args.gate, "batch", frozenset({0, 1}))
    (spark.read.format("logbus")
     .option("kafka.bootstrap.servers", args.bootstrap)
     .option("subscribe", args.source)
     .option("minPartitions", str(TASKS_PER_READ))
     .load()
     .select("partition", "offset", held("value").alias("value"))
     .write.mode("overwrite").parquet(str(args.out / "batch")))


def stream_read(spark: Any, args: argparse.Namespace) -> None:
    held = gate(args.gate, "stream", frozenset({0, 1}), batch_id="1")
    writer = (
        read_stream(spark, args)
        .select("partition", "offset", held("value").alias("value"))
        .writeStream.format("parquet").option("path", str(args.out / "stream"))
    )
    run_available_now(writer, args.out / "stream-checkpoint")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--conf", action="append", default=[])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gate", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--max-offsets", type=int, required=True)
    args = parser.parse_args()
    args.remote = None
    return args


def main() -> None:
    args = parse_args()
    spark = session(args)
    write(spark, args)
    batch_read(spark, args)
    stream_read(spark, args)
    print(json.dumps({"app_id": spark.conf.get("spark.app.id")}))
    spark.stop()


if __name__ == "__main__":
    main()
