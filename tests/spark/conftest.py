"""A local SparkSession shared by every Spark test, and helpers to make and fill topics.

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

from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient, NewTopic


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


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
    )
    futures[name].result(30)


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int | None = None,
    keys: list[bytes | None] | None = None,
    headers: list[Any] | None = None,
    timestamps: list[int] | None = None,
    **config: Any,
) -> None:
    """Write records with confluent-kafka and wait until every one is acknowledged."""
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5}
        | {k.replace("_", "."): v for k, v in config.items()}
    )
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i, value in enumerate(values):
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if keys is not None:
            extra["key"] = keys[i]
        if headers is not None:
            extra["headers"] = headers[i]
        if timestamps is not None:
            extra["timestamp"] = timestamps[i]
        producer.produce(topic, value, on_delivery=report, **extra)
    assert producer.flush(30) == 0
    assert not errors, errors


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    """`spark.read.format("logbus")` with the bootstrap servers and `options` set."""
    builder = spark.read.format("logbus").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spark jobs are slow to start on a busy machine: allow them more than the default
    per-test limit (the first test also starts the JVM)."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.timeout(600))
