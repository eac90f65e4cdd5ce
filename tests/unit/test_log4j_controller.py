"""log4j's level names over Python's levels (server/log4j_controller.py)."""

from __future__ import annotations

import logging

import pytest

from logbus.server import log4j_controller as lc


@pytest.mark.parametrize(
    ("level", "name"),
    [
        (logging.NOTSET, "ALL"),
        (1, "TRACE"),
        (5, "TRACE"),
        (logging.DEBUG, "DEBUG"),
        (15, "INFO"),
        (logging.INFO, "INFO"),
        (logging.WARNING, "WARN"),
        (logging.ERROR, "ERROR"),
        (logging.CRITICAL, "FATAL"),
        (logging.CRITICAL + 10, "OFF"),
        (1000, "OFF"),
    ],
)
def test_log4j_names(level: int, name: str) -> None:
    assert lc.log4j_level(level) == name


def test_every_settable_level_round_trips() -> None:
    for name in lc.SETTABLE_LEVELS:
        assert lc.log4j_level(lc.LEVELS[name]) == name
    assert logging.getLevelName(5) == "TRACE"


def test_only_the_brokers_loggers_exist() -> None:
    logging.getLogger("somebody.else")
    logging.getLogger("logbusy")
    names = lc.logger_names()
    assert names[0] == "root"
    assert lc.REQUEST_LOGGER in names
    assert "somebody.else" not in names and "logbusy" not in names
    assert not lc.logger_exists("somebody.else")
    assert not lc.logger_exists("logbusy")
    assert lc.logger_exists("root") and lc.logger_exists(lc.REQUEST_LOGGER)
