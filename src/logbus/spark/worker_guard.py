"""A clear error on a Spark worker whose Python cannot import logbus.

The entry point is `ShippedToWorkers`, a base of the readers and writers Spark pickles on
the driver and unpickles in executors' Python workers. Unpickling a logbus object there
would fail with a bare `ModuleNotFoundError: No module named 'logbus'` before any logbus
code runs; instead each is pickled as a call of a small function pickled by value (so the
worker needs only Spark's own cloudpickle to run it) that imports logbus first and, when
it cannot, raises an error naming the fixes (docs/spark.md, "Spark clusters").
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

MISSING_LOGBUS = (
    "this Spark worker's Python cannot import logbus ({error}): executors run the logbus "
    "data source's readers and writers themselves. Install logbus in the Python of every "
    "worker and point PYSPARK_PYTHON at it, or ship it with the job: "
    "spark.archives=<packed environment>#env with PYSPARK_PYTHON=./env/bin/python, or "
    "--py-files / spark.submit.pyFiles=<logbus wheel or zip> (see docs/spark.md, "
    "'Spark clusters')"
)

# Run on the worker; defined in a namespace named __main__ so that cloudpickle sends its
# code, not a reference into logbus (which the worker may lack).
_RESTORE_SOURCE = '''
def restore_logbus_object(payload, message):
    try:
        import logbus.spark
    except ImportError as error:
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


class ShippedToWorkers:
    """Pickled as `_RESTORE(pickle of (class, state), MISSING_LOGBUS)`; the state is what
    `__getstate__` gives (a subclass may leave out what must not travel)."""

    def __reduce__(self) -> tuple[Any, ...]:
        state = self.__getstate__() or {}
        return (_RESTORE, (pickle.dumps((type(self), state)), MISSING_LOGBUS))
