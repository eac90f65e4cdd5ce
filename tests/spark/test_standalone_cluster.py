"""The source and sink on a Spark cluster: Spark's standalone cluster manager from the
installed PySpark (one Master, two Workers, on loopback), with executors in JVMs of their
own started by the Workers and Python workers of their own, and a driver in another
process (cluster_job.py) that only plans. A classic driver and a Spark Connect server
whose driver is on the same cluster each run a batch read and a batch write through the
sink; the first adds an AvailableNow streaming read into Parquet, the second a streaming
copy through the sink. Nothing is shared with the drivers but the options: the Workers'
environment has no PYTHONPATH, only PYSPARK_PYTHON (the same virtualenv on "every
machine", docs/spark.md). confluent-kafka writes the input and reads the sink's output back.

The tests start Spark in processes of their own (the shared `spark` session cannot share a
Python process with a Spark Connect client), so they run beside the other Spark tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from spark_support import (
    CLUSTER_CONF,
    ConnectServer,
    StandaloneCluster,
    consume_all,
    create_topic,
    produce,
    run_cluster_job,
)

# A hang catcher: each test starts a driver and two executors (and the first a Master and
# two Workers), which takes minutes on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(1200)

PARTITIONS = 3
PER_PARTITION = 1500
# (partition, offset) -> value of each record of the input topic
Expected = dict[tuple[int, int], bytes]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster


def fill_source(bootstrap: str) -> Expected:
    """The input topic, written by confluent-kafka: JSON values of 10-210 bytes."""
    create_topic(bootstrap, "source", PARTITIONS)
    expected: Expected = {}
    for p in range(PARTITIONS):
        values = [b'{"p":%d,"i":%d,"pad":"%s"}' % (p, i, b"x" * (i % 200))
                  for i in range(PER_PARTITION)]
        keys: list[bytes | None] = [b"k%d" % i for i in range(PER_PARTITION)]
        produce(bootstrap, "source", values, partition=p, keys=keys)
        expected |= {(p, i): value for i, value in enumerate(values)}
    return expected


def check_batch_outputs(report: Any, bootstrap: str, expected: Expected) -> None:
    """The batch read counted every record, and the sink copied each once (to a topic of
    one partition, auto-created)."""
    assert report["batch_count"] == len(expected)
    records = consume_all(bootstrap, "copy-batch", 1, len(expected))
    assert sorted(m.value() for m in records) == sorted(expected.values())


def test_pipelines_on_a_standalone_cluster(
    standalone: StandaloneCluster, broker: Any, tmp_path: Path
) -> None:
    expected = fill_source(broker.bootstrap)
    conf = [arg for name, value in CLUSTER_CONF.items() for arg in ("--conf", f"{name}={value}")]
    report = run_cluster_job(
        tmp_path, ["--master", standalone.url, *conf], "--bootstrap", broker.bootstrap,
        "--source", "source", "--prefix", "copy", "--out", str(tmp_path),
        "--stream-to", "parquet",
    )
    check_batch_outputs(report, broker.bootstrap, expected)
    # The streaming read, in two micro-batches: each offset once, with its value.
    table = pq.read_table(tmp_path / "stream").to_pydict()
    rows = list(zip(table["partition"], table["offset"], table["value"], strict=True))
    assert len(rows) == len(expected)
    assert {(p, o): v for p, o, v in rows} == expected
    # Both Workers ran executors for the job: the tasks were not in the driver's process.
    assert len(standalone.executor_logs(report["app_id"])) == 2, standalone.log_tails()


def test_pipelines_through_spark_connect(
    standalone: StandaloneCluster, broker: Any, tmp_path: Path
) -> None:
    expected = fill_source(broker.bootstrap)
    with ConnectServer(tmp_path, standalone.url) as server:
        report = run_cluster_job(
            tmp_path, ["--remote", server.url], "--bootstrap", broker.bootstrap,
            "--source", "source", "--prefix", "copy", "--out", str(tmp_path),
            "--stream-to", "logbus",
        )
    check_batch_outputs(report, broker.bootstrap, expected)
    # The streaming read and write: every record copied once.
    records = consume_all(broker.bootstrap, "copy-stream", 1, len(expected))
    assert sorted(m.value() for m in records) == sorted(expected.values())
    # The Connect server's driver ran its tasks in executors on both Workers.
    assert len(standalone.executor_logs(report["app_id"])) == 2, standalone.log_tails()
