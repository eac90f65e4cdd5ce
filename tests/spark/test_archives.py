"""docs/spark.md's `spark.archives` recipe on a standalone Spark cluster whose machines'
Python has logbus's dependencies but not logbus: the Master and two Workers are started
with that Python as PYSPARK_PYTHON, and so is the driver (cluster_job.py, a process of its
own) for the Python workers it starts. logbus travels with the job as `logbus.tar.gz` (the
files of the package directory, its compiled helper too), packed as the recipe packs it;
Spark unpacks it as `logbus/` into each executor's working directory and into the
driver's, both on its Python workers' path. A batch read, a batch write through the sink
and a streaming read into Parquet run (the streaming planner on the driver finds logbus in
the session's job files: logbus.spark.worker_guard); confluent-kafka writes the input and
reads the sink's output back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from spark_support import (
    CLUSTER_CONF,
    StandaloneCluster,
    consume_all,
    create_topic,
    logbus_archive,
    produce,
    python_without_logbus,
    run_cluster_job,
)

# A hang catcher: a Master, two Workers, a driver and two executors on a loaded machine.
pytestmark = pytest.mark.timeout(900)

RECORDS = 900


@pytest.fixture
def workers_python(tmp_path: Path) -> Path:
    return python_without_logbus(tmp_path)


@pytest.fixture
def standalone(tmp_path: Path, workers_python: Path) -> Iterator[StandaloneCluster]:
    home = tmp_path / "spark"
    home.mkdir()
    with StandaloneCluster(home, env={"PYSPARK_PYTHON": str(workers_python)}) as made:
        yield made


def test_logbus_shipped_with_spark_archives(
    standalone: StandaloneCluster, workers_python: Path, broker: Any, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "source", 2)
    values = [b'{"i":%d,"pad":"%s"}' % (i, b"z" * (i % 250)) for i in range(RECORDS)]
    produce(broker.bootstrap, "source", values)
    conf = CLUSTER_CONF | {"spark.archives": f"{logbus_archive(tmp_path)}#logbus"}
    report = run_cluster_job(
        tmp_path,
        ["--master", standalone.url,
         *(arg for name, value in conf.items() for arg in ("--conf", f"{name}={value}"))],
        "--bootstrap", broker.bootstrap, "--source", "source", "--prefix", "copy",
        "--out", str(tmp_path), "--stream-to", "parquet", "--max-offsets", "500",
        env={"PYSPARK_PYTHON": str(workers_python)},
    )
    assert report["batch_count"] == RECORDS
    records = consume_all(broker.bootstrap, "copy-batch", 1, RECORDS)
    assert sorted(m.value() for m in records) == sorted(values)
    # The streaming read (two micro-batches, planned on the driver): each record once.
    table = pq.read_table(tmp_path / "stream").to_pydict()
    assert sorted(table["value"]) == sorted(values)
    # Both Workers ran an executor, each with logbus unpacked from the archive.
    executor_logs = standalone.executor_logs(report["app_id"])
    assert len(executor_logs) == 2, standalone.log_tails()
    for log in executor_logs:
        assert "Unpacking an archive" in log.read_text(errors="replace")
        assert (log.parent / "logbus" / "spark" / "source.py").exists()
