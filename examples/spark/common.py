"""What the example pipelines share: a local SparkSession with the `logbus` format, and
topic creation through logbus's own client."""

from __future__ import annotations

import asyncio
import os
import sys

from pyspark.sql import SparkSession

import logbus.spark
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaError
from logbus.client.requests.topics import create_topics
from logbus.protocol import ErrorCode


def spark_session(app: str, master: str = "local[2]") -> SparkSession:
    """A local session (UI off, few shuffle partitions) with `format("logbus")`."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        # Python workers start slowly on a busy machine; the default wait is 15 s.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    return logbus.spark.register(session)


def ensure_topic(
    bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    """Create `name` unless it exists already."""

    async def create() -> None:
        async with await Cluster.connect(bootstrap) as cluster:
            try:
                await create_topics(
                    await cluster.controller(), name, partitions, 1, configs or {}
                )
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise

    asyncio.run(create())
