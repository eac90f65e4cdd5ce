"""Spark throughput: the `logbus` data source against Parquet on local disk.

    python -m bench.spark_bench [--rows N] [--partitions P] [--runs R] [--out DIR]

Starts a `logbus server start` subprocess on loopback with its data in a temp directory
and a local SparkSession (`local[2]`), then times, for N records of 100-byte values:

- batch write: `df.write.format("logbus")` and `df.write.parquet(...)`, both compressed
  with snappy (Parquet's default codec; `kafka.compression.type=snappy` for logbus), then
  both uncompressed (`compression=none`; the topic the reads read). The logbus writes set
  `kafka.batch.size` to 1 MiB, as one tunes Kafka's producer for a bulk load; one more
  write with the producer's default settings (16 KiB batches, no compression) shows what
  the tuning buys;
- batch read into a count: `spark.read.format("logbus").load().count()` and
  `spark.read.parquet(...).count()` (Parquet answers from its footers), and a full scan
  (`sum(length(value))`) of each, which makes Parquet read the values too;
- stream write: a streaming query (`Trigger.AvailableNow`, micro-batches of a quarter of
  the rows) copying the uncompressed topic to a new one through the logbus sink, at
  least once (system `logbus`) and with `exactlyOnce=true` (system `logbus-eos`).

Each operation is timed `--runs` times (3), round after round, and the median kept;
each write and read is warmed up with a whole run before anything is timed (the first
large job of a session pays for the JVM compiling its code paths, and a data source's
first job for its Python workers' imports), so the figures compare steady states.

The same operations through `bench.spark_ceiling` (a Python data source that yields Arrow
batches already built, and a sink that drops what it is handed) give the most any Python
data source can reach in the same run: Spark's own cost of moving rows between the JVM
and its Python workers.

Writes `bench/results/spark-<date>-<commit>.json` and a Markdown table beside it (`.md`)
(`--out` writes them elsewhere).
Targets (issue 7): logbus read >= 50% of the Parquet read rate, write >= 50% of Parquet's;
(issue 15) the exactly-once stream write >= 70% of the at-least-once one's rows/s.
Figures move with the machine's load; the ratios within one run are what count.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_BYTES = 100
# The logbus write's kafka.batch.size: as large as a Produce request may be by default.
BULK_BATCH_SIZE = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_broker(data: Path, port: int) -> subprocess.Popen[bytes]:
    log = open(data.parent / "broker.log", "ab")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(
        [sys.executable, "-m", "logbus.cli.main", "server", "start",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={data}",
         "--override", "num.partitions=1"],
        stdout=log, stderr=log,
    )
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the broker did not start")


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from logbus.client.cluster import Cluster
    from logbus.client.requests.topics import create_topics

    async def create() -> None:
        async with await Cluster.connect(bootstrap) as cluster:
            await create_topics(await cluster.controller(), name, partitions, 1)

    asyncio.run(create())


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# (name, system, note, run(round) -> result, expected result or None)
_Operation = tuple[str, str, str, Callable[[int], Any], Any]


def run(rows: int, partitions: int, runs: int) -> dict[str, Any]:
    bench = _SparkBench(rows, partitions, runs)
    try:
        parquet = bench.time_writes()
        bench.time_reads(parquet)
        bench.time_stream_writes()
    finally:
        bench.close()
    return {
        "scenario": "spark",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "rows": rows,
        "value_bytes": VALUE_BYTES,
        "partitions": partitions,
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_1m": os.getloadavg()[0]},
        "results": bench.results,
    }


class _SparkBench:
    """One run: a broker and a local SparkSession, the rows recorded so far, and the three
    phases (batch writes, batch reads, streaming writes), each timed round after round."""

    def __init__(self, rows: int, partitions: int, runs: int) -> None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        from pyspark.sql import SparkSession

        import logbus.spark
        from bench.spark_ceiling import CeilingDataSource

        self.rows, self.partitions, self.runs = rows, partitions, runs
        self.work = Path(tempfile.mkdtemp(prefix="logbus-spark-bench-"))
        (self.work / "data").mkdir()
        port = _free_port()
        self.broker = _start_broker(self.work / "data", port)
        self.bootstrap = f"127.0.0.1:{port}"
        self.spark = (
            SparkSession.builder.master("local[2]").appName("logbus-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            # Python workers start slowly on a busy machine; the default wait is 15 s.
            .config("spark.python.authenticate.socketTimeout", "120s")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        logbus.spark.register(self.spark)
        self.spark.dataSource.register(CeilingDataSource)
        self.results: list[dict[str, Any]] = []

    def close(self) -> None:
        self.spark.stop()
        self.broker.terminate()
        self.broker.wait(30)
        shutil.rmtree(self.work, ignore_errors=True)

    def record(self, name: str, system: str, times: list[float], note: str = "") -> None:
        rows = self.rows
        seconds = statistics.median(times)
        self.results.append({"name": name, "system": system, "rows": rows, "seconds": seconds,
                             "rows_per_s": rows / seconds, "runs_s": times, "note": note})
        print(f"{name:<24} {system:<13} {rows / seconds:,.0f} rows/s (median of "
              f"{', '.join(f'{t:.1f}' for t in times)} s) {note}", flush=True)

    def timed_rounds(self, operations: list[_Operation]) -> None:
        """Each operation `runs` times, round after round (so a change in the machine's
        state falls on every row alike); the median is recorded."""
        times: list[list[float]] = [[] for _ in operations]
        for round_ in range(self.runs):
            for (name, system, _, operation, expected), spent in zip(
                operations, times, strict=True
            ):
                seconds, got = _timed(functools.partial(operation, round_))
                assert expected is None or got == expected, (name, system, got)
                spent.append(seconds)
        for (name, system, note, _, _), spent in zip(operations, times, strict=True):
            self.record(name, system, spent, note)

    def time_writes(self) -> str:
        """Batch writes: Parquet and logbus, snappy and uncompressed; returns the Parquet
        directory the reads read."""
        from pyspark.sql import functions as F

        spark = self.spark
        bootstrap = self.bootstrap
        work = self.work
        rows = self.rows
        partitions = self.partitions
        runs = self.runs
        record = self.record
        timed_rounds = self.timed_rounds
        source = spark.range(0, rows, numPartitions=partitions).select(
            F.rpad(F.col("id").cast("string"), VALUE_BYTES, "x").cast("binary").alias("value")
        ).cache()
        source.count()  # materialize so both writes start from the same rows in memory
        parquet = str(work / "parquet")

        def write(topic: str, **settings: str) -> None:
            writer = (source.write.format("logbus")
                      .option("kafka.bootstrap.servers", bootstrap).option("topic", topic))
            for name, value in settings.items():
                writer = writer.option(name, value)
            writer.mode("append").save()

        def parquet_write(path: str, compression: str) -> None:
            source.write.mode("overwrite").option("compression", compression).parquet(path)

        # Warm up every write before timing any, as the reads are warmed up below: the
        # first large job of a session pays for the JVM compiling its row-to-Arrow
        # transfer to Python workers (which the ceiling and the logbus sink share) and its
        # Parquet writer, and the first job of a data source pays for its workers' imports.
        source.write.format("ceiling").mode("append").save()
        source.write.mode("overwrite").parquet(str(work / "parquet-warm-up"))
        _create_topic(bootstrap, "warm-up", partitions)
        spark.range(0, 20_000, numPartitions=partitions).select(
            F.col("id").cast("string").cast("binary").alias("value")
        ).write.format("logbus").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", "warm-up"
        ).option("kafka.compression.type", "snappy").mode("append").save()

        # Parquet compresses with snappy unless told otherwise; so does the first logbus
        # write. The second pair writes both uncompressed (the topic the reads read). Each
        # logbus run writes a topic of its own.
        bulk = {"kafka.batch.size": str(BULK_BATCH_SIZE)}
        snappy = {**bulk, "kafka.compression.type": "snappy"}
        for round_ in range(runs):
            _create_topic(bootstrap, f"bench-snappy-{round_}", partitions)
            _create_topic(bootstrap, f"bench-{round_}", partitions)
        timed_rounds([
            ("batch write", "parquet", "snappy (Spark's default)",
             lambda _: parquet_write(parquet, "snappy"), None),
            ("batch write", "logbus",
             f"kafka.batch.size={BULK_BATCH_SIZE}, kafka.compression.type=snappy",
             lambda r: write(f"bench-snappy-{r}", **snappy), None),
            ("batch write, uncompressed", "parquet", "compression=none",
             lambda _: parquet_write(str(work / "parquet-none"), "none"), None),
            ("batch write, uncompressed", "logbus", f"kafka.batch.size={BULK_BATCH_SIZE}",
             lambda r: write(f"bench-{r}", **bulk), None),
            ("batch write", "ceiling", "",
             lambda _: source.write.format("ceiling").mode("append").save(), None),
        ])
        # Slow (its figure is bound by round trips): timed once.
        _create_topic(bootstrap, "bench-defaults", partitions)
        seconds, _ = _timed(lambda: write("bench-defaults"))
        record("batch write, default producer settings", "logbus", [seconds], "one run")
        source.unpersist()
        return parquet


    def time_reads(self, parquet: str) -> None:
        """Batch reads of bench-0 and of Parquet: a count and a full scan."""
        from pyspark.sql import functions as F

        spark = self.spark
        bootstrap = self.bootstrap
        rows = self.rows
        partitions = self.partitions
        timed_rounds = self.timed_rounds
        def logbus_df() -> Any:
            return (
                spark.read.format("logbus").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "bench-0").option("minPartitions", str(partitions))
                .option("kafka.max.partition.fetch.bytes", str(8 * 1024 * 1024))
                .load()
            )

        def ceiling_df(schema: str = "kafka") -> Any:
            return (spark.read.format("ceiling").option("rows", str(rows))
                    .option("partitions", str(partitions)).option("schema", schema)
                    .option("valueBytes", str(VALUE_BYTES)).load())

        def scan(df: Any) -> int:
            return int(df.agg(F.sum(F.length("value"))).collect()[0][0])

        # Warm up each source with a whole read before timing any: a few rows start the
        # Python workers, but the first large read of a source still runs at half speed
        # or less (the JVM compiling its Arrow-to-row path), as the first write did.
        for df in (logbus_df(), spark.read.parquet(parquet), ceiling_df(), ceiling_df("value")):
            scan(df)

        def count(df: Any) -> int:
            return int(df.count())

        total = rows * VALUE_BYTES
        timed_rounds([
            (f"batch read: {what}", system, "", lambda _, f=f, d=d: f(d()), expected)
            for what, f, expected in (("count", count, rows), ("full scan", scan, total))
            for system, d in (("parquet", lambda: spark.read.parquet(parquet)),
                              ("logbus", logbus_df), ("ceiling", ceiling_df),
                              ("ceiling-value", lambda: ceiling_df("value")))
        ])


    def time_stream_writes(self) -> None:
        """bench-0 copied by streaming queries, at-least-once and exactly-once."""
        spark = self.spark
        bootstrap = self.bootstrap
        work = self.work
        rows = self.rows
        partitions = self.partitions
        timed_rounds = self.timed_rounds
        def stream_write(name: str, **settings: str) -> int:
            """bench-0 copied to topic `name` by a streaming query; the rows it wrote."""
            _create_topic(bootstrap, name, partitions)
            writer = (
                spark.readStream.format("logbus").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "bench-0").option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(max(rows // 4, 1))).load()
                .select("key", "value")
                .writeStream.format("logbus").option("kafka.bootstrap.servers", bootstrap)
                .option("topic", name).option("kafka.batch.size", str(BULK_BATCH_SIZE))
                .option("checkpointLocation", str(work / "checkpoints" / name))
                .trigger(availableNow=True)
            )
            for option, value in settings.items():
                writer = writer.option(option, value)
            query = writer.start()
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"stream write {name}: {query.exception()}")
            return sum(p["numInputRows"] for p in query.recentProgress)

        eos = {"exactlyOnce": "true"}
        stream_write("warm-up-stream")
        stream_write("warm-up-stream-eos", transactionalIdPrefix="warm-up-eos", **eos)
        timed_rounds([
            ("stream write", "logbus", "at-least-once",
             lambda r: stream_write(f"stream-{r}"), rows),
            ("stream write", "logbus-eos", "exactlyOnce=true",
             lambda r: stream_write(f"stream-eos-{r}", transactionalIdPrefix=f"eos-{r}",
                                    **eos), rows),
        ])


_ROWS = (
    # (row, Parquet's row to compare with, target)
    ("batch write", "batch write", ">= 50%"),
    ("batch write, uncompressed", "batch write, uncompressed", "-"),
    ("batch write, default producer settings", "batch write", "-"),
    ("batch read: count", "batch read: count", ">= 50%"),
    ("batch read: full scan", "batch read: full scan", "-"),
)


def _rate(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def _ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.0%}" if top and bottom else "-"


def markdown(report: dict[str, Any]) -> str:
    rate = {(r["name"], r["system"]): r["rows_per_s"] for r in report["results"]}
    notes = {(r["name"], r["system"]): r["note"] for r in report["results"]}
    lines = [
        f"Spark, {report['rows']:,} records of {report['value_bytes']} bytes, "
        f"{report['partitions']} partitions, local[2] (commit {report['commit']}, "
        f"load average {report['machine']['load_avg_1m']:.1f})",
        "",
        "| operation | logbus rows/s | Parquet rows/s | logbus / Parquet | target "
        "| Python source ceiling rows/s | ceiling / Parquet | logbus / ceiling |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, parquet_name, target in _ROWS:
        ours = rate.get((name, "logbus"))
        theirs = rate.get((parquet_name, "parquet"))
        ceiling = rate.get((name.split(",")[0], "ceiling"))
        lines.append(
            f"| {name} | {_rate(ours) if ours else 'not run'} | {_rate(theirs)} | "
            f"{_ratio(ours, theirs)} | {target} | {_rate(ceiling)} | "
            f"{_ratio(ceiling, theirs)} | {_ratio(ours, ceiling)} |"
        )
    lines += ["", "Settings:"]
    for (name, system), note in notes.items():
        if note:
            lines.append(f"- {name}, {system}: {note}")
    lines += [
        "",
        "The ceiling is a Python data source that yields Arrow batches already built (reads:",
        "the rows of Kafka's schema, as the logbus source yields them) or drops the batches",
        "it is handed (writes): Spark's own cost of moving rows between the JVM and its",
        "Python workers, the most any Python data source can reach here.",
    ]
    at_least_once = rate.get(("stream write", "logbus"))
    exactly_once = rate.get(("stream write", "logbus-eos"))
    if at_least_once or exactly_once:
        lines += [
            "",
            "| stream write | rows/s | / at-least-once | target |",
            "| --- | ---: | ---: | ---: |",
            f"| at-least-once | {_rate(at_least_once)} | 100% | - |",
            f"| exactlyOnce=true | {_rate(exactly_once)} | "
            f"{_ratio(exactly_once, at_least_once)} | >= 70% |",
        ]
    for name in ("batch read: count", "batch read: full scan"):
        value_only = rate.get((name, "ceiling-value"))
        if value_only:
            lines.append(
                f"The same with a `value` column only ({name}): {_rate(value_only)} rows/s, "
                f"{_ratio(value_only, rate.get((name, 'parquet')))} of Parquet."
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3,
                        help="times each operation is timed; the median is recorded")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="directory for the results (default: bench/results)")
    args = parser.parse_args(argv)
    report = run(args.rows, args.partitions, args.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"spark-{report['date'][:10]}-{report['commit']}"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (args.out / f"{stem}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
