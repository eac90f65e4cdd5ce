"""Offline load: copy a topic's new records into Parquet, partitioned by date.

Each run is one *load*: it reads the offsets the last committed load stopped at, fixes the
end at the partitions' current latest offsets, writes records [start, end) under
`<out>/date=YYYY-MM-DD/load=N/`, and then commits by writing `<out>/_offsets/N.json`
(the end offsets, beside the data; Spark's readers skip `_`-prefixed paths). A load that
crashed before its commit left files under `load=N` that no committed load owns: the next
run deletes them and loads the same range again, so the lake never holds a record twice
and never misses one. `read_lake()` reads only committed loads.

    python -m examples.spark.offline_load --bootstrap-server 127.0.0.1:9092 \
        --topic pageviews --out /tmp/lake
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from logbus.spark.offset_reader import OffsetReader
from logbus.spark.options import ClientSettings, parse_read_options

OFFSETS_DIR = "_offsets"


def committed(out: Path) -> tuple[int, dict[str, dict[str, int]]]:
    """The last committed load number and its end offsets (0 and {} before the first)."""
    loads = sorted(
        (int(p.stem), p) for p in (out / OFFSETS_DIR).glob("*.json") if p.stem.isdigit()
    )
    if not loads:
        return 0, {}
    number, path = loads[-1]
    return number, json.loads(path.read_text())


def _remove_uncommitted(out: Path, load: int) -> None:
    for stale in out.glob(f"date=*/load={load}"):
        shutil.rmtree(stale)


def load_once(
    spark: SparkSession, bootstrap: str, topic: str, out: Path, *, commit: bool = True
) -> dict[str, Any]:
    """Run one load; returns what it did. `commit=False` stops before the commit, as a
    crash at the worst moment would."""
    out.mkdir(parents=True, exist_ok=True)
    last, start = committed(out)
    load = last + 1
    _remove_uncommitted(out, load)

    planner = OffsetReader(ClientSettings(bootstrap))
    try:
        options = parse_read_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False
        )
        tps = planner.topic_partitions(options)
        end = planner.latest(tps)
    finally:
        planner.close()
    done = start.get(topic, {})
    starting = {topic: {str(p): done.get(str(p), -2) for _, p in tps}}
    ending = {topic: {str(p): end[(topic, p)] for _, p in tps}}

    df = (
        spark.read.format("logbus")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
        .withColumn("date", F.to_date("timestamp"))
        .withColumn("load", F.lit(load))
    )
    rows = df.count()
    if rows:
        df.write.mode("append").partitionBy("date", "load").parquet(str(out))
    if not commit:
        return {"load": load, "rows": rows, "committed": False}
    offsets_dir = out / OFFSETS_DIR
    offsets_dir.mkdir(exist_ok=True)
    tmp = offsets_dir / f".{load}.json.tmp"
    tmp.write_text(json.dumps({**start, **ending}, sort_keys=True))
    os.replace(tmp, offsets_dir / f"{load}.json")  # the commit
    return {"load": load, "rows": rows, "committed": True, "offsets": ending}


def read_lake(spark: SparkSession, out: Path) -> DataFrame:
    """Every committed record of the lake."""
    last, _ = committed(out)
    return spark.read.parquet(str(out)).where(F.col("load") <= last)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="pageviews")
    parser.add_argument("--out", type=Path, default=Path("lake"))
    args = parser.parse_args(argv)
    from examples.spark.common import spark_session

    spark = spark_session("logbus-offline-load")
    try:
        result = load_once(spark, args.bootstrap_server, args.topic, args.out)
        print(json.dumps(result, sort_keys=True))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
