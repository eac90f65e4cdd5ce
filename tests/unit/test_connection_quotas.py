"""ConnectionQuotas and max.connections.per.ip.overrides, driven with plain values."""

from __future__ import annotations

import pytest

from logbus.server.network.connection_quotas import (
    ConnectionLimits,
    ConnectionQuotas,
    parse_per_ip_overrides,
)

UNLIMITED = 2**31 - 1


def test_overrides_parse_as_kafka_does() -> None:
    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides(" hostName:100 , 127.0.0.1:200,") == {
        "hostName": 100,
        "127.0.0.1": 200,
    }
    # the count follows the last colon, so IPv6 addresses need no brackets
    assert parse_per_ip_overrides("::1:5,[fe80::1]:6") == {"::1": 5, "fe80::1": 6}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("host", "Expected host:count"),
        (":5", "Expected host:count"),
        ("host:many", "not a number"),
        ("host:-1", "must not be negative"),
    ],
)
def test_bad_overrides_are_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_per_ip_overrides(value)


def test_the_broker_wide_and_per_address_limits() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(3, 2, {"10.0.0.9": 0}))
    assert quotas.admit("10.0.0.1") is None
    assert quotas.admit("10.0.0.1") is None
    assert "max.connections.per.ip" in (quotas.admit("10.0.0.1") or "")
    assert "0 connections" in (quotas.admit("10.0.0.9") or "")
    assert quotas.admit("10.0.0.2") is None
    assert "max.connections=3" in (quotas.admit("10.0.0.3") or "")
    quotas.release("10.0.0.1")
    assert quotas.total == 2 and quotas.count("10.0.0.1") == 1
    assert quotas.admit("10.0.0.3") is None


def test_new_limits_count_the_connections_already_open() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(UNLIMITED, UNLIMITED))
    for _ in range(3):
        assert quotas.admit("10.0.0.1") is None
    quotas.reconfigure(ConnectionLimits(UNLIMITED, 3))
    assert quotas.admit("10.0.0.1") is not None


def test_the_creation_rate_is_a_bucket_of_one_second() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(UNLIMITED, UNLIMITED, max_creation_rate=2))

    def accept(now: float) -> float:
        delay = quotas.accept_delay(now)
        if delay == 0:
            quotas.created()
        return delay

    assert accept(100.0) == 0
    assert quotas.accept_delay(100.0) == 0  # asking takes nothing
    assert accept(100.0) == 0
    assert accept(100.0) == pytest.approx(0.5)
    assert accept(100.5) == 0  # half a second later, one more
    assert accept(100.5) > 0
    assert accept(110.0) == 0  # an idle spell saves at most one second's worth
    assert accept(110.0) == 0
    assert accept(110.0) > 0


def test_no_creation_rate_limit_by_default() -> None:
    quotas = ConnectionQuotas(ConnectionLimits(UNLIMITED, UNLIMITED))
    for _ in range(1000):
        assert quotas.accept_delay(0.0) == 0
        quotas.created()
