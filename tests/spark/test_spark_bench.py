"""The Spark benchmark (bench/spark_bench.py) end to end on a few thousand rows, so it
cannot rot unnoticed: every write and read it times must run and land in its JSON and
Markdown. It starts its own broker and SparkSession, so it runs in a child process (the
shared test session stays up). No speed is asserted here (speed is bench/'s business)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_small_run_times_every_operation_and_writes_json_and_markdown(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    result = subprocess.run(
        [sys.executable, "-m", "bench.spark_bench", "--rows", "20000", "--partitions", "2",
         "--runs", "2", "--out", str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [json_path] = tmp_path.glob("spark-*.json")
    report = json.loads(json_path.read_text())
    assert report["rows"] == 20000 and report["partitions"] == 2
    timed = {(r["name"], r["system"]): r for r in report["results"]}
    assert set(timed) == {
        ("batch write", "parquet"), ("batch write", "logbus"),
        ("batch write, uncompressed", "parquet"), ("batch write, uncompressed", "logbus"),
        ("batch write, default producer settings", "logbus"), ("batch write", "ceiling"),
        ("stream write", "logbus"), ("stream write", "logbus-eos"),
        *((read, system) for read in ("batch read: count", "batch read: full scan")
          for system in ("parquet", "logbus", "ceiling", "ceiling-value")),
    }
    assert all(r["rows"] == 20000 and r["rows_per_s"] > 0 for r in report["results"])
    # Timed twice each (the median of two is their mean), the slow default write once.
    for (name, _), r in timed.items():
        assert len(r["runs_s"]) == (1 if "default" in name else 2)
        assert r["seconds"] == sum(r["runs_s"]) / len(r["runs_s"])
    assert "snappy" in timed[("batch write", "logbus")]["note"]
    table = (tmp_path / f"{json_path.stem}.md").read_text()
    for row in ("batch write", "batch write, uncompressed", "batch read: count",
                "batch read: full scan"):
        assert f"| {row} | " in table
    assert "not run" not in table
    assert "| exactlyOnce=true | " in table
