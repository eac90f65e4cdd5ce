"""The request log: Kafka's `kafka.request.logger`, one line per completed request at
DEBUG (off by default: the logger's level is WARNING unless set).

`request.log.file` sends the logger to a rotating file of its own (Kafka's
`kafka-request.log`); its level can also be changed at run time like any broker logger
(KIP-412, BROKER_LOGGER), since it is the plain `logging.getLogger("kafka.request.logger")`.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

REQUEST_LOGGER = logging.getLogger("kafka.request.logger")
REQUEST_LOG_FILE = "kafka-request.log"
MAX_BYTES = 100 * 1024 * 1024
BACKUPS = 10

# Nothing is logged unless someone asks for it (Kafka's log4j.properties sets WARN).
if REQUEST_LOGGER.level == logging.NOTSET:
    REQUEST_LOGGER.setLevel(logging.WARNING)


def open_request_log(setting: str, log_dir: str) -> logging.Handler:
    """Attach a rotating file handler for `request.log.file`: a directory (the file is
    `kafka-request.log` in it), a file path, or "true" (in the broker's first log dir);
    the logger is set to DEBUG. Returns the handler, for `close_request_log`."""
    path = Path(log_dir) / REQUEST_LOG_FILE if setting.lower() == "true" else Path(setting)
    if path.is_dir():
        path = path / REQUEST_LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s"))
    REQUEST_LOGGER.addHandler(handler)
    REQUEST_LOGGER.setLevel(logging.DEBUG)
    # only in its own file, as Kafka's log4j.properties (additivity false)
    REQUEST_LOGGER.propagate = False
    return handler


def close_request_log(handler: logging.Handler) -> None:
    REQUEST_LOGGER.removeHandler(handler)
    handler.close()
    if not REQUEST_LOGGER.handlers:
        REQUEST_LOGGER.propagate = True
