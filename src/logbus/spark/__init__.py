"""The `logbus` PySpark data source (Python Data Source API, PySpark 4.x).

The entry point is `register(spark)`, which registers `LogbusDataSource` under the format
name `logbus`; rows and options are those of Spark's Kafka source, so a job written for
`format("kafka")` runs with `format("logbus")`. Needs the `spark` extra:
`pip install 'logbus[spark]'`. See docs/spark.md.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from logbus.spark.options import LogbusSparkError
from logbus.spark.source import LogbusDataSource

__all__ = ["LogbusDataSource", "LogbusSparkError", "register"]


def register(spark: SparkSession | None = None) -> SparkSession:
    """Register the `logbus` format with `spark` (default: the active session)."""
    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("no active SparkSession: pass one to logbus.spark.register()")
    session.dataSource.register(LogbusDataSource)
    return session
