"""docs/spark.md's recipe for workers whose Python has logbus's dependencies but not
logbus: ship logbus with the job (`--py-files` / `spark.submit.pyFiles`, here a zip of the
package). The Python workers (the driver's planners and the executors') run a Python that
cannot import logbus until Spark puts the shipped file on their path; without it, the
job fails with the error that names the fix. A batch read and write, and a streaming copy
through the sink. cluster_job.py is the driver, in a process of its own, on `local[2]` (the
Python side is the same as on a cluster's executors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import (
    CLUSTER_CONF,
    consume_all,
    create_topic,
    logbus_zip,
    produce,
    python_without_logbus,
    run_cluster_job,
)

RECORDS = 600


def job_args(broker: Any, tmp: Path, stream_to: str, *conf: str) -> list[str]:
    settings = CLUSTER_CONF | dict(setting.split("=", 1) for setting in conf)
    return [
        "--master", "local[2]",
        *(arg for name, value in settings.items() for arg in ("--conf", f"{name}={value}")),
        "--bootstrap", broker.bootstrap, "--source", "source", "--prefix", "copy",
        "--out", str(tmp), "--stream-to", stream_to,
    ]


def test_logbus_shipped_with_py_files(broker: Any, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "source", 2)
    values = [b'{"i":%d,"pad":"%s"}' % (i, b"y" * (i % 300)) for i in range(RECORDS)]
    produce(broker.bootstrap, "source", values)
    workers = {"PYSPARK_PYTHON": str(python_without_logbus(tmp_path))}

    # Forgotten: the first Python worker (planning the read) names the fix.
    forgot = tmp_path / "forgot"
    forgot.mkdir()
    with pytest.raises(AssertionError) as failed:
        run_cluster_job(forgot, job_args(broker, forgot, "nothing"), env=workers)
    assert "this Spark worker's Python cannot import logbus" in str(failed.value)
    assert "--py-files" in str(failed.value)

    shipped = logbus_zip(tmp_path)
    # The streaming source's planner on the driver finds the shipped file too (PySpark 4.3
    # leaves it off that worker's path: logbus.spark.worker_guard looks for it).
    args = job_args(broker, tmp_path, "logbus", f"spark.submit.pyFiles={shipped}")
    report = run_cluster_job(tmp_path, args, env=workers)
    assert report["batch_count"] == RECORDS
    records = consume_all(broker.bootstrap, "copy-batch", 1, RECORDS)
    assert sorted(m.value() for m in records) == sorted(values)
    records = consume_all(broker.bootstrap, "copy-stream", 1, RECORDS)
    assert sorted(m.value() for m in records) == sorted(values)
