"""The broker's loggers and their levels in log4j's terms (KIP-412, Kafka's
`Log4jController`): what DescribeConfigs and IncrementalAlterConfigs show and change for
the BROKER_LOGGER resource.

The loggers are Python `logging` loggers: `root`, every logger under `logbus` (modules and
the packages above them, so `logbus.server.replica` sets a whole package) and under `kafka`
(`kafka.request.logger`, Kafka's request log). The list is read at each call, so a logger
created after start-up appears too. Levels are log4j's names over Python levels, TRACE
being 5 (registered here). Changes live in the process only: a restart forgets them, as
Kafka's do.
"""

from __future__ import annotations

import logging

ROOT_LOGGER = "root"
REQUEST_LOGGER = "kafka.request.logger"
TRACE = 5
OFF = logging.CRITICAL + 10
logging.addLevelName(TRACE, "TRACE")
# Kafka's request log is a logger every broker has, whether or not anything writes to it.
logging.getLogger(REQUEST_LOGGER)

# log4j's level names and the Python levels they stand for, most verbose first.
LEVELS = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": OFF,
}
# The levels a client may set (Kafka's LogLevelConfig.VALID_LOG_LEVELS: no OFF, no ALL;
# the names are case-sensitive).
SETTABLE_LEVELS = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_PREFIXES = ("logbus", "kafka")


def _is_broker_logger(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in _PREFIXES)


def log4j_level(level: int) -> str:
    """The log4j name of a Python level: the first log4j level at least as severe (a
    custom level 15 shows as INFO); NOTSET on the root logger, which lets everything
    through, is ALL."""
    if level <= logging.NOTSET:
        return "ALL"
    for name, value in LEVELS.items():
        if level <= value:
            return name
    return "OFF"


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def logger_names() -> list[str]:
    """Every logger of the broker, sorted, `root` first."""
    names = sorted(
        # PlaceHolders (packages with no logger of their own yet) are loggers too.
        name
        for name in list(logging.Logger.manager.loggerDict)
        if _is_broker_logger(name)
    )
    return [ROOT_LOGGER, *names]


def loggers() -> dict[str, str]:
    """Every logger of the broker and its effective level, in log4j's names."""
    return {name: log4j_level(_logger(name).getEffectiveLevel()) for name in logger_names()}


def logger_exists(name: str) -> bool:
    return name == ROOT_LOGGER or (
        _is_broker_logger(name) and name in logging.Logger.manager.loggerDict
    )


def set_level(name: str, level: str) -> None:
    """Give a logger a level of its own (a name from SETTABLE_LEVELS)."""
    _logger(name).setLevel(LEVELS[level])


def unset_level(name: str) -> None:
    """Take a logger's own level away: it inherits its nearest ancestor's level again,
    in the end the root logger's (log4j's `setLevel(null)`)."""
    _logger(name).setLevel(logging.NOTSET)
