"""A clear error on a Spark worker whose Python cannot import logbus.

The entry point is `ShippedToWorkers`, a base of the readers and writers Spark pickles on
the driver and unpickles in executors' Python workers. Unpickling a logbus object there
would fail with a bare `ModuleNotFoundError: No module named 'logbus'` before any logbus
code runs; instead each is pickled as a call of a small function pickled by value (so the
worker needs only Spark's own cloudpickle to run it) that imports logbus first and, when
it cannot, raises an error naming the fixes (docs/spark.md, "Spark clusters").

The data source class itself travels too: `register` sends it to the Python workers that
plan on the driver (or on a Spark Connect server), and a class importable on the sending
side is pickled by name. `GUARDED_DATA_SOURCE` is the class `register` gives Spark instead:
defined the same way (pickled by value), it imports logbus when Spark makes it and hands
every call to `logbus.spark.source.LogbusDataSource`.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

MISSING_LOGBUS = (
    "this Spark worker's Python cannot import logbus ({error}): executors run the logbus "
    "data source's readers and writers themselves. Install logbus in the Python of every "
    "worker and point PYSPARK_PYTHON at it, or ship it with the job: "
    "spark.archives=logbus.tar.gz#logbus (the files of the logbus package directory), or "
    "--py-files / spark.submit.pyFiles=<logbus wheel or zip> (see docs/spark.md, "
    "'Spark clusters')"
)

# Run on the worker, before the error: logbus shipped with the job where PySpark leaves it
# off the path. PySpark 4.3 gives the Python worker that plans a streaming query on the
# driver a job-files directory of its own (`<session files>/streaming_job`) that holds
# none of the session's files, so logbus shipped with `spark.archives=...#logbus` or
# `--py-files` is not on its path: it is looked for in the session's directory (and its
# .zip/.egg/.whl files), as Spark's other Python workers see it.
_SHIPPED_SOURCE = '''
def import_shipped_logbus():
    import os
    import sys
    try:
        from pyspark.core.files import SparkFiles
    except ImportError:
        return False
    root = SparkFiles._root_directory
    if not root:
        return False
    session = os.path.dirname(os.path.abspath(root))
    if not os.path.isdir(session):
        return False
    entries = [session] + [
        os.path.join(session, name) for name in sorted(os.listdir(session))
        if name.endswith((".zip", ".egg", ".whl"))
    ]
    added = [entry for entry in entries if entry not in sys.path]
    sys.path[1:1] = added
    try:
        import logbus.spark  # noqa: F401
    except ImportError:
        for entry in added:
            sys.path.remove(entry)
        return False
    return True
'''

# Run on the worker; defined in a namespace named __main__ so that cloudpickle sends its
# code, not a reference into logbus (which the worker may lack).
_RESTORE_SOURCE = _SHIPPED_SOURCE + '''
def restore_logbus_object(payload, message):
    try:
        import logbus.spark
    except ImportError as error:
        if not import_shipped_logbus():
            raise ModuleNotFoundError(message.format(error=error)) from None
    import pickle
    cls, state = pickle.loads(payload)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj
'''


def _restore_function() -> Callable[[bytes, str], Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    # the fixed source above, compiled once
    exec(compile(_RESTORE_SOURCE, "<logbus.spark.worker_guard>", "exec"), namespace)
    restore: Callable[[bytes, str], Any] = namespace["restore_logbus_object"]
    return restore


_RESTORE = _restore_function()

_GUARDED_SOURCE = _SHIPPED_SOURCE + '''
from pyspark.sql.datasource import DataSource


def load_logbus_data_source(message):
    try:
        from logbus.spark.source import LogbusDataSource
    except ImportError as error:
        if not import_shipped_logbus():
            raise ModuleNotFoundError(message.format(error=error)) from None
        from logbus.spark.source import LogbusDataSource
    return LogbusDataSource


class LogbusDataSource(DataSource):
    """logbus.spark.source.LogbusDataSource, loaded where Spark makes the data source and
    again wherever Spark sends it (its state is the options only)."""

    @classmethod
    def name(cls):
        return "logbus"

    def __init__(self, options):
        super().__init__(options)
        load_logbus_data_source(MISSING_LOGBUS)

    @property
    def source(self):
        return load_logbus_data_source(MISSING_LOGBUS)(self.options)

    def schema(self):
        return self.source.schema()

    def reader(self, schema):
        return self.source.reader(schema)

    def streamReader(self, schema):
        return self.source.streamReader(schema)

    def writer(self, schema, overwrite):
        return self.source.writer(schema, overwrite)

    def streamWriter(self, schema, overwrite):
        return self.source.streamWriter(schema, overwrite)
'''


def _guarded_data_source() -> type[Any]:
    namespace: dict[str, Any] = {"__name__": "__main__", "MISSING_LOGBUS": MISSING_LOGBUS}
    # the fixed source above, compiled once
    exec(compile(_GUARDED_SOURCE, "<logbus.spark.worker_guard>", "exec"), namespace)
    guarded: type[Any] = namespace["LogbusDataSource"]
    return guarded


GUARDED_DATA_SOURCE = _guarded_data_source()


class ShippedToWorkers:
    """Pickled as `_RESTORE(pickle of (class, state), MISSING_LOGBUS)`; the state is what
    `__getstate__` gives (a subclass may leave out what must not travel)."""

    def __reduce__(self) -> tuple[Any, ...]:
        state = self.__getstate__() or {}
        return (_RESTORE, (pickle.dumps((type(self), state)), MISSING_LOGBUS))
