"""The Spark tests' fixtures: a local SparkSession shared by every Spark test (and, under
`make test`, run in one worker: tests/conftest.py groups them) and the exactly-once jobs a
test starts. Their helpers (topics, records, the job) are in spark_support.py.

The session runs `local[2]` on loopback with the UI off; the `logbus` format is registered
once. Spark's Python workers are separate processes: they reach the in-process test
broker over loopback like any client. Skipped (whole directory) only when PySpark or Java
is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark tests need Java (17+)", allow_module_level=True)

from spark_support import Job


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    saved = {k: os.environ.get(k) for k in ("SPARK_LOCAL_IP", "PYTHONPATH", "PYSPARK_PYTHON")}
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Executors' Python workers must import this checkout's logbus, as the driver does.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import logbus.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("logbus-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        # Python workers start slowly on a busy machine; the default wait is 15 s.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    logbus.spark.register(session)
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value








@pytest.fixture
def jobs() -> Iterator[list[Job]]:
    """eos_job.py runs a test starts (append them); each is killed when the test ends."""
    started: list[Job] = []
    yield started
    for job in started:
        job.close()


# PySpark 4.3 gives a Python worker it starts on the driver (a streaming Python data
# source's planner among them) a fixed 10 s to connect back, which no setting changes; on a
# loaded machine a query can fail to start so. Such a test runs once more, for that error
# alone: any other failure, or the same one twice, fails it.
WORKER_NOT_BACK = "Python worker failed to connect back"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark jobs are slow to start on a busy machine: allow them more than the default
    per-test limit (the first test also starts the JVM), unless a module sets its own; and
    one more run after PySpark's connect-back timeout (`WORKER_NOT_BACK`)."""
    here = os.path.dirname(__file__)
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(600))
        item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=[WORKER_NOT_BACK]))
