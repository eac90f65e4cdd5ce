"""Client configuration: Kafka names, underscored keywords, conversion and rejection."""

from __future__ import annotations

import pytest

from logbus.client.config import COMMON, ConfigSchema, Setting, positive
from logbus.client.loop_thread import LoopThread
from logbus.common.config_def import ConfigError

SCHEMA = ConfigSchema(
    "producer",
    COMMON,
    (
        Setting("acks", str, "all", choices=("all", "0", "1", "-1")),
        Setting("linger.ms", int, 5, at_least=0),
        Setting("enable.idempotence", bool, True),
        Setting("batch.size", int, 16384, validator=positive),
        Setting("key.serializer", object, None),
    ),
)


def test_defaults_dict_and_keywords_with_keywords_winning() -> None:
    values = SCHEMA.parse({"linger.ms": "20", "client.id": "a"}, linger_ms=7)
    assert values["linger.ms"] == 7
    assert values["client.id"] == "a"
    assert values["acks"] == "all"
    assert values["bootstrap.servers"] == ["localhost:9092"]


def test_strings_are_converted_as_from_a_properties_file() -> None:
    values = SCHEMA.parse(
        {"enable.idempotence": "false", "bootstrap.servers": "a:1, b:2", "acks": "ALL"}
    )
    assert values["enable.idempotence"] is False
    assert values["bootstrap.servers"] == ["a:1", "b:2"]
    assert values["acks"] == "all"


def test_objects_are_taken_as_given() -> None:
    assert SCHEMA.parse(key_serializer=str.encode)["key.serializer"] is str.encode


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"linger.msx": 1}, "unknown producer config 'linger.msx'; did you mean 'linger.ms'?"),
        ({"linger.ms": "soon"}, "linger.ms must be a number"),
        ({"linger.ms": -1}, "linger.ms=-1 must be at least 0"),
        ({"linger.ms": 1.5}, "linger.ms must be a whole number"),
        ({"enable.idempotence": "yes"}, "enable.idempotence must be true or false"),
        ({"acks": "2"}, "acks='2' is not one of"),
        ({"batch.size": 0}, "batch.size=0: must be positive"),
        ({"security.protocol": "TLS"}, "security.protocol='TLS' is not one of"),
    ],
)
def test_bad_values_are_rejected_naming_the_setting(
    config: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        SCHEMA.parse(config)
    assert message in str(err.value)


def test_unknown_keyword_is_reported_as_written() -> None:
    with pytest.raises(ConfigError, match="unknown producer config 'lingr_ms'"):
        SCHEMA.parse(lingr_ms=1)


def test_loop_thread_runs_coroutines_and_closes() -> None:
    import asyncio

    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    thread = LoopThread()
    assert thread.run(add(2, 3)) == 5
    pending = thread.submit(asyncio.sleep(60))
    thread.close()
    assert pending.cancelled()
    assert thread.closed


def test_loop_thread_times_out_and_cancels() -> None:
    import asyncio

    thread = LoopThread()
    try:
        with pytest.raises(TimeoutError):
            thread.run(asyncio.sleep(10), timeout=0.05)
    finally:
        thread.close()
