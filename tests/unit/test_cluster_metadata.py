"""Brokers in the cluster metadata model: their endpoints, from Kafka's registration JSON."""

from __future__ import annotations

import pytest

from logbus.controller.cluster_metadata import BrokerInfo, EndPoint, broker_from_registration

REGISTRATION = {
    "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"},
    "endpoints": ["CLIENT://public.example:9092", "INTERNAL://[::1]:19092"],
    "rack": "rack-a",
    "jmx_port": -1,
    "host": "public.example",
    "port": 9092,
    "version": 5,
    "timestamp": "1700000000000",
}


def test_a_registration_gives_every_endpoint_and_the_rack() -> None:
    info = broker_from_registration(3, REGISTRATION)
    assert info == BrokerInfo(
        3,
        "public.example",
        9092,
        "rack-a",
        "CLIENT",
        (
            EndPoint("CLIENT", "public.example", 9092, "PLAINTEXT"),
            EndPoint("INTERNAL", "::1", 19092, "SASL_SSL"),
        ),
    )
    assert info.endpoint("INTERNAL") == EndPoint("INTERNAL", "::1", 19092, "SASL_SSL")
    # no such listener: the client-facing endpoint
    assert info.endpoint("OTHER").port == 9092
    internal = broker_from_registration(3, REGISTRATION, client_listener="INTERNAL")
    assert (internal.host, internal.port, internal.listener) == ("::1", 19092, "INTERNAL")


def test_old_registrations_and_bad_endpoints() -> None:
    old = broker_from_registration(1, {"host": "h", "port": 9093, "version": 1})
    assert old == BrokerInfo(1, "h", 9093)
    assert old.all_endpoints() == (EndPoint("PLAINTEXT", "h", 9093),)
    with pytest.raises(ValueError, match="malformed endpoint"):
        broker_from_registration(1, {"endpoints": ["no-scheme:9092"]})
