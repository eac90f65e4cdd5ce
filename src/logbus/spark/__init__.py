"""The `logbus` PySpark data source (Python Data Source API, PySpark 4.x).

The entry point is `register(spark)`, which registers `LogbusDataSource` under the format
name `logbus` (through `worker_guard.GUARDED_DATA_SOURCE`, so that a Python worker without
logbus names the fix); rows and options are those of Spark's Kafka source, so a job written for
`format("kafka")` runs with `format("logbus")`. Needs the `spark` extra:
`pip install 'logbus[spark]'`. See docs/spark.md.

Through Spark Connect, `register` takes the client's session
(`SparkSession.builder.remote(...)`): the data source class is sent to the Connect server,
whose session plans with it, and whose executors' Python must import logbus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, overload

from pyspark.sql import SparkSession

from logbus.spark.options import LogbusSparkError
from logbus.spark.source import LogbusDataSource
from logbus.spark.worker_guard import GUARDED_DATA_SOURCE

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

__all__ = ["LogbusDataSource", "LogbusSparkError", "register"]

Session = TypeVar("Session", SparkSession, "ConnectSession")


@overload
def register(spark: None = None) -> SparkSession: ...


@overload
def register(spark: Session) -> Session: ...


def register(spark: SparkSession | ConnectSession | None = None) -> SparkSession | ConnectSession:
    """Register the `logbus` format with `spark` (default: the active session), a classic
    session or a Spark Connect client's."""
    session = spark if spark is not None else SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("no active SparkSession: pass one to logbus.spark.register()")
    # LogbusDataSource behind a guard: where logbus cannot be imported, the error names the fix
    session.dataSource.register(GUARDED_DATA_SOURCE)
    return session
