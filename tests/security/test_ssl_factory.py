"""TLS contexts from Kafka's ssl.* settings: PEM files and inline PEM, encrypted keys,
protocols and ciphers, and a readable ConfigError for each thing that can be wrong."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from certs import CertificateAuthority

from logbus.common.config_def import ConfigError, Password
from logbus.common.security.ssl_factory import client_context, server_context


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("factory-pki"))


def test_keystore_file_inline_and_encrypted(ca: CertificateAuthority) -> None:
    plain = ca.issue("plain", "localhost", server=True)
    locked = ca.issue("locked", "localhost", server=True, key_password="pw")
    assert server_context({"ssl.keystore.location": str(plain.keystore)})
    inline = {
        "ssl.keystore.key": Password(plain.key_pem.decode()),
        "ssl.keystore.certificate.chain": Password(plain.cert_pem.decode()),
        "ssl.truststore.certificates": Password(ca.cert_pem.decode()),
        "ssl.client.auth": "required",
    }
    context = server_context(inline)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert server_context(
        {"ssl.keystore.location": str(locked.keystore), "ssl.key.password": Password("pw")}
    )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        server_context(
            {"ssl.keystore.location": str(locked.keystore), "ssl.key.password": Password("no")}
        )


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.location": "/no/such.pem"}, "ssl.keystore.location"),
        ({"ssl.keystore.key": Password("x")}, "ssl.keystore.key"),
        ({"ssl.enabled.protocols": ["TLSv9"]}, "ssl.enabled.protocols"),
        ({"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": ["TLSv1.3"]},
         "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": ["NO-SUCH-CIPHER"]}, "ssl.cipher.suites"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.truststore.location": "/no/such.pem"}, "ssl.truststore.location"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_setting(
    ca: CertificateAuthority, tmp_path: Path, settings: dict[str, object], setting: str
) -> None:
    keystore = ca.issue("k", "localhost", server=True).keystore
    base: dict[str, object] = {"ssl.keystore.location": str(keystore)}
    if "ssl.keystore.location" in settings or "ssl.keystore.key" in settings or not settings:
        base = {}
    with pytest.raises(ConfigError) as caught:
        server_context({**base, **settings})
    assert caught.value.name == setting


def test_protocol_versions(ca: CertificateAuthority) -> None:
    keystore = str(ca.issue("v", "localhost", server=True).keystore)
    context = server_context({"ssl.keystore.location": keystore, "ssl.protocol": "TLSv1.2"})
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    context = server_context(
        {"ssl.keystore.location": keystore, "ssl.enabled.protocols": ["TLSv1.3"]}
    )
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    client = client_context(
        {"ssl.truststore.location": str(ca.cert_file),
         "ssl.endpoint.identification.algorithm": ""}
    )  # fmt: skip
    assert client.check_hostname is False and client.verify_mode == ssl.CERT_REQUIRED
