"""TLS listeners: every client over SSL (produce, consume in a group, an admin call), mTLS
principals through ssl.principal.mapping.rules, refusals (plaintext on a TLS port,
untrusted, expired or missing client certificates) that leave the broker serving, and
certificates reloaded on a dynamic config change."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
import uuid
from typing import Any

import pytest
from client_round_trips import (
    TIMEOUT,
    aiokafka_round_trip,
    kafka_python_round_trip,
    produce_consume_confluent,
    values,
)
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from security_support import (
    Pki,
    address,
    client_context,
    confluent_ssl,
    listener,
    ssl_broker,
)

from logbus.protocol import ApiKey

pytest_plugins = ["secure_fixtures"]









def test_confluent_kafka_over_ssl(secure_broker: Any, pki: Pki) -> None:
    running = ssl_broker(secure_broker, pki)
    config = confluent_ssl(pki, address(running, "SSL"))
    produce_consume_confluent(config, f"tls-{uuid.uuid4().hex[:6]}")
    metadata = AdminClient(config).list_topics(timeout=TIMEOUT)
    assert metadata.brokers


def test_kafka_python_over_ssl(secure_broker: Any, pki: Pki) -> None:
    running = ssl_broker(secure_broker, pki)
    common = {
        "bootstrap_servers": address(running, "SSL"),
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca.cert_file),
    }
    topic = f"tls-kp-{uuid.uuid4().hex[:6]}"
    assert kafka_python_round_trip(common, topic, 10) == values(10)


def test_aiokafka_over_ssl(secure_broker: Any, pki: Pki) -> None:
    running = ssl_broker(secure_broker, pki)
    topic = f"tls-aio-{uuid.uuid4().hex[:6]}"

    async def scenario() -> list[bytes]:
        common = {
            "bootstrap_servers": address(running, "SSL"),
            "security_protocol": "SSL",
            "ssl_context": client_context(pki),
        }
        return await aiokafka_round_trip(common, topic, 10)

    assert asyncio.run(scenario()) == values(10)


def test_kcat_over_ssl(secure_broker: Any, pki: Pki, tmp_path: Any) -> None:
    running = ssl_broker(secure_broker, pki, **{"auto.create.topics.enable": "true"})
    topic = f"tls-kcat-{uuid.uuid4().hex[:6]}"
    common = [
        "kcat", "-b", address(running, "SSL"), "-X", "security.protocol=SSL",
        "-X", f"ssl.ca.location={pki.ca.cert_file}",
    ]  # fmt: skip
    subprocess.run(
        [*common, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=TIMEOUT
    )
    out = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"],
        check=True, capture_output=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert out.stdout.split() == [b"one", b"two"]


def mtls_broker(secure_broker: Any, pki: Pki) -> Any:
    return ssl_broker(
        secure_broker,
        pki,
        **{
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,.*$/$1/U,DEFAULT",
        },
    )


def test_mtls_principal_from_mapping_rule(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = mtls_broker(secure_broker, pki)
    conn = raw(address(running, "SSL"), client_context(pki, pki.alice))
    assert conn.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    principals = {str(c.principal) for c in listener(running, "SSL")._connections}
    assert principals == {"User:ALICE"}
    # confluent-kafka with its certificate works end to end
    config = confluent_ssl(
        pki,
        address(running, "SSL"),
        **{
            "ssl.certificate.location": str(pki.alice.cert_file),
            "ssl.key.location": str(pki.alice.key_file),
        },
    )
    produce_consume_confluent(config, f"mtls-{uuid.uuid4().hex[:6]}", count=3)


@pytest.mark.parametrize("which", ["missing", "untrusted", "expired"])
def test_mtls_refuses_bad_client_certificates(
    secure_broker: Any, pki: Pki, raw: Any, which: str
) -> None:
    running = mtls_broker(secure_broker, pki)
    cert = {"missing": None, "untrusted": pki.stranger, "expired": pki.expired}[which]
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn = raw(address(running, "SSL"), client_context(pki, cert))
        # TLS 1.3: the client learns of the refusal at its first read
        conn.request(ApiKey.API_VERSIONS, 0, {})
    good = raw(address(running, "SSL"), client_context(pki, pki.alice))
    assert good.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_untrusted_broker_certificate_is_refused_by_the_client(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = ssl_broker(secure_broker, pki)
    with pytest.raises(ssl.SSLCertVerificationError):
        raw(address(running, "SSL"), client_context(pki, ca=pki.stranger_ca))


def test_plaintext_client_on_a_tls_port_is_closed(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = ssl_broker(secure_broker, pki)
    plain = raw(address(running, "SSL"))
    plain.send(ApiKey.API_VERSIONS, 0, {})
    assert plain.closed_by_broker()
    good = raw(address(running, "SSL"), client_context(pki))
    assert good.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_stalled_tls_handshake_is_closed(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = ssl_broker(secure_broker, pki)
    listener(running, "SSL").ssl_handshake_timeout = 0.5
    silent = raw(address(running, "SSL"))  # connects, never starts the handshake
    silent.sock.settimeout(20)
    assert silent.closed_by_broker()


def test_certificates_reload_on_a_dynamic_config_change(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = ssl_broker(secure_broker, pki)
    # a new broker certificate from the stranger CA, set for the SSL listener
    renewed = pki.stranger_ca.issue("renewed-broker", "localhost", server=True)
    admin = AdminClient({"bootstrap.servers": address(running, "PLAINTEXT")})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

    resource = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry(
                "listener.name.ssl.ssl.keystore.location",
                str(renewed.keystore),
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "listener.name.ssl.ssl.keystore.type",
                "PEM",
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    # a keystore that does not load is refused, and nothing changes
    broken = ConfigResource(
        "BROKER",
        "0",
        incremental_configs=[
            ConfigEntry(
                "listener.name.ssl.ssl.keystore.location",
                str(pki.ca.cert_file),  # a certificate without its key
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    with pytest.raises(KafkaException, match=r"INVALID_CONFIG|[Kk]ey"):
        admin.incremental_alter_configs([broken])[broken].result(TIMEOUT)
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    described = admin.describe_configs([ConfigResource("BROKER", "0")])
    entries = next(iter(described.values())).result(TIMEOUT)
    entry = entries["listener.name.ssl.ssl.keystore.location"]
    assert entry.value == str(renewed.keystore)
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            conn = raw(address(running, "SSL"), client_context(pki, ca=pki.stranger_ca))
            break
        except ssl.SSLError:
            assert time.monotonic() < deadline, "the new certificate was never served"
            time.sleep(0.2)
    assert conn.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    with pytest.raises(ssl.SSLCertVerificationError):
        raw(address(running, "SSL"), client_context(pki))
    # the same path set again after the file was replaced: reloaded too (as Kafka)
    again = pki.ca.issue("again", "localhost", server=True)
    renewed.keystore.write_bytes(again.keystore.read_bytes())
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            conn = raw(address(running, "SSL"), client_context(pki))
            break
        except ssl.SSLError:
            assert time.monotonic() < deadline, "the replaced file was never loaded"
            time.sleep(0.2)
