"""The logbus client with librdkafka's security settings: over SSL, SASL_SSL with
SCRAM-SHA-512 and SASL_PLAINTEXT with PLAIN it produces, consumes in a group and
administers; wrong credentials and an untrusted broker certificate fail with a clear
error."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from security_support import Pki, address, sasl_broker

import logbus
from logbus import Admin, KafkaError, NewTopic
from logbus.common.config_def import ConfigError
from logbus.protocol import ErrorCode

pytest_plugins = ["secure_fixtures"]

TIMEOUT = 30


def round_trip(config: dict[str, Any], topic: str) -> None:
    with Admin(config) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=1)])
        assert topic in admin.list_topics()
    with logbus.Producer(config) as producer:
        for i in range(5):
            producer.send(topic, f"v{i}".encode())
        producer.flush(TIMEOUT)
    consumer_config = {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    with logbus.Consumer(consumer_config) as consumer:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(values) < 5 and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(0.5)]
        consumer.commit()
    assert values == [f"v{i}".encode() for i in range(5)]


def test_logbus_client_over_ssl_sasl_ssl_and_sasl_plaintext(
    secure_broker: Any, pki: Pki
) -> None:
    running = sasl_broker(
        secure_broker,
        pki,
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0",
    )
    tls = {"ssl.ca.location": str(pki.ca.cert_file)}
    credentials = {"sasl.username": "alice", "sasl.password": "alice-secret"}
    variants = {
        "ssl": {"bootstrap.servers": address(running, "SSL"), "security.protocol": "SSL", **tls},
        "scram": {
            "bootstrap.servers": address(running, "SASL_SSL"),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            **tls,
            **credentials,
        },
        "plain": {
            "bootstrap.servers": address(running, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            **credentials,
        },
    }
    for name, config in variants.items():
        round_trip(config, f"lb-{name}-{uuid.uuid4().hex[:6]}")


def test_logbus_client_refusals(secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki)
    wrong = {
        "bootstrap.servers": address(running, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.ca.location": str(pki.ca.cert_file),
        "sasl.username": "alice",
        "sasl.password": "nope",
    }
    with pytest.raises(KafkaError) as caught, Admin(wrong) as admin:
        admin.list_topics()
    assert caught.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    untrusted = {**wrong, "ssl.ca.location": str(pki.stranger_ca.cert_file)}
    with pytest.raises(KafkaError, match="TLS handshake failed"), Admin(untrusted) as admin:
        admin.list_topics()
    clear = {"bootstrap.servers": address(running, "SASL_SSL"), "request.timeout.ms": 5000}
    with pytest.raises(KafkaError, match="a TLS listener"), Admin(clear) as admin:
        admin.list_topics()
    with pytest.raises(ConfigError, match=r"sasl\.username"):
        Admin({"bootstrap.servers": "x:1", "security.protocol": "SASL_SSL"})
