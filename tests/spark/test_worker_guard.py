"""A Spark worker whose Python lacks logbus: the readers and writers Spark ships to it
(pickled with Spark's cloudpickle, as its planner does), and the data source class
`register` gives Spark, raise an error naming the fixes instead of a bare `No module named
'logbus'`; where logbus is importable they arrive whole, less the planner's connections."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.types import BinaryType, StructField, StructType

from logbus.spark.options import parse_read_options, parse_write_options
from logbus.spark.sink import LogbusBatchWriter, LogbusStreamWriter
from logbus.spark.source import LogbusBatchReader, LogbusDataSource, LogbusStreamReader
from logbus.spark.worker_guard import GUARDED_DATA_SOURCE

OPTIONS = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}


def shipped(obj: Any) -> bytes:
    """`obj` inside a closure, as Spark's read and write functions carry their reader or
    writer to the executors."""
    return cloudpickle.dumps(lambda: obj)


def test_readers_and_writers_arrive_whole_where_logbus_is_installed() -> None:
    stream = LogbusStreamReader(parse_read_options(OPTIONS, streaming=True))
    stream._target = {}  # planner state: stays on the driver
    back = cloudpickle.loads(shipped(stream))()
    assert isinstance(back, LogbusStreamReader)
    assert back.options == stream.options
    assert back._target is None
    batch = LogbusBatchReader(parse_read_options(OPTIONS, streaming=False))
    assert cloudpickle.loads(shipped(batch))().options == batch.options
    schema = StructType([StructField("value", BinaryType())])
    write_options = parse_write_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    writer = LogbusBatchWriter(write_options, schema)
    back_writer = cloudpickle.loads(shipped(writer))()
    assert isinstance(back_writer, LogbusBatchWriter)


def without_logbus(payload: bytes, call: str) -> str:
    """Unpickle `payload` as `obj` and run `call` in this interpreter with PySpark on its
    path but not logbus (installed in development mode through a .pth file, which -S
    leaves unread); the stderr of the failure."""
    site_packages = sysconfig.get_paths()["purelib"]
    script = (
        "import pickle, sys; sys.path.insert(0, sys.argv[1]); import pyspark.cloudpickle; "
        f"obj = pickle.loads(sys.stdin.buffer.read()); {call}"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-S", "-c", script, site_packages],
        input=payload, capture_output=True, env=env, cwd="/", timeout=120,
    )
    assert result.returncode != 0
    return result.stderr.decode()


def assert_names_the_fix(error: str) -> None:
    assert "No module named 'logbus'" in error
    assert "PYSPARK_PYTHON" in error and "spark.archives" in error and "--py-files" in error
    assert "ModuleNotFoundError: this Spark worker's Python cannot import logbus" in error


def test_a_worker_without_logbus_is_told_the_fix() -> None:
    payload = shipped(LogbusBatchReader(parse_read_options(OPTIONS, streaming=False)))
    assert_names_the_fix(without_logbus(payload, "obj()"))


def test_a_planner_without_logbus_is_told_the_fix() -> None:
    """The class `register` gives Spark reaches the driver's (or a Connect server's)
    planning Python workers by value, and names the fix when Spark makes it there."""
    payload = cloudpickle.dumps(GUARDED_DATA_SOURCE)
    assert_names_the_fix(without_logbus(payload, "obj({'subscribe': 't'})"))


def test_the_registered_class_hands_every_call_to_the_data_source() -> None:
    source = cloudpickle.loads(cloudpickle.dumps(GUARDED_DATA_SOURCE))(dict(OPTIONS))
    assert source.name() == "logbus"
    assert isinstance(source.source, LogbusDataSource)
    assert source.__dict__.keys() == {"options"}  # what Spark sends on: the options only
    assert source.schema() == LogbusDataSource(dict(OPTIONS)).schema()
    assert isinstance(source.reader(source.schema()), LogbusBatchReader)
    assert isinstance(source.streamReader(source.schema()), LogbusStreamReader)
    schema = StructType([StructField("value", BinaryType())])
    writer_options = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
    writing = GUARDED_DATA_SOURCE(writer_options)
    assert isinstance(writing.writer(schema, False), LogbusBatchWriter)
    assert isinstance(writing.streamWriter(schema, False), LogbusStreamWriter)
