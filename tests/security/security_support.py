"""For the TLS and SASL tests: a CA with broker and client certificates (made
with `cryptography`), brokers with secured listeners, and a raw protocol connection for
the tests that must see every byte of an exchange: the helpers. The fixtures are in
`secure_fixtures.py`, which test modules load with `pytest_plugins`."""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certs import CertificateAuthority, Issued
from client_round_trips import TIMEOUT
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from logbus.protocol import codec
from logbus.server.network.listener import Listener

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="admin" password="admin-secret";'
)


@dataclass
class Pki:
    ca: CertificateAuthority
    broker: Issued
    alice: Issued
    expired: Issued
    stranger_ca: CertificateAuthority
    stranger: Issued
    directory: Path


def tls_settings(pki: Pki, prefix: str = "") -> dict[str, str]:
    """A listener's TLS settings (broker-wide, or for one listener with `prefix`)."""
    return {
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": str(pki.broker.keystore),
        f"{prefix}ssl.key.password": "broker-key-pw",
        f"{prefix}ssl.truststore.type": "PEM",
        f"{prefix}ssl.truststore.location": str(pki.ca.cert_file),
    }


def listener(running: Any, name: str) -> Listener:
    assert running.broker is not None
    return next(item for item in running.broker.listeners if item.name == name)


def address(running: Any, name: str) -> str:
    return f"127.0.0.1:{listener(running, name).port}"


def plain(running: Any, user: str, password: str) -> dict[str, Any]:
    """librdkafka settings of `user` on the broker's SASL_PLAINTEXT listener (PLAIN)."""
    return {
        "bootstrap.servers": address(running, "SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


class RawConnection:
    """Blocking requests over a socket (TLS when `context` is given), for byte-exact
    exchanges."""

    def __init__(self, bootstrap: str, context: ssl.SSLContext | None = None) -> None:
        host, _, port = bootstrap.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock: socket.socket = (
            context.wrap_socket(sock, server_hostname="localhost") if context else sock
        )
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation_id += 1
        header = codec.RequestHeader(api_key, version, self.correlation_id, "raw")
        self.sock.sendall(codec.encode_request(header, body))

    def receive(self, api_key: int, version: int) -> dict[str, Any]:
        frame = self.read_frame()
        correlation_id, body = codec.decode_response(api_key, version, frame)
        assert correlation_id == self.correlation_id
        return body

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def closed_by_broker(self) -> bool:
        """True once the broker has closed the connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True

    def close(self) -> None:
        self.sock.close()


def sasl_broker(secure_broker: Any, pki: Pki, **extra: str) -> Any:
    """A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN with the admin
    JAAS users, SCRAM-SHA-256 and -512), alice given a SCRAM-SHA-512 credential."""
    running = secure_broker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
            "SASL_SSL://127.0.0.1:0",
            "num.partitions": "1",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
            **tls_settings(pki),
            **extra,
        }
    )
    admin = AdminClient({"bootstrap.servers": address(running, "PLAINTEXT")})
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT)
    return running


def ssl_broker(secure_broker: Any, pki: Pki, **extra: str) -> Any:
    """A broker with a PLAINTEXT and an SSL listener."""
    return secure_broker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "num.partitions": "1",
            **tls_settings(pki),
            **extra,
        }
    )


def confluent_ssl(pki: Pki, bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca.cert_file),
        **extra,
    }


def client_context(pki: Pki, cert: Any = None, ca: Any = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str((ca or pki.ca).cert_file))
    if cert is not None:
        context.load_cert_chain(str(cert.cert_file), str(cert.key_file))
    return context
