"""For the TLS and SASL tests: a CA with broker and client certificates (made
with `cryptography`), brokers with secured listeners, and a raw protocol connection for
the tests that must see every byte of an exchange: the helpers. The fixtures are in
`secure_fixtures.py`, which test modules load with `pytest_plugins`."""

from __future__ import annotations

import importlib.util
import socket
import ssl
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certs import CertificateAuthority, Issued

from logbus.protocol import codec
from logbus.server.network.listener import Listener


def root_conftest() -> Any:
    """tests/conftest.py (RunningBroker, collect_leaks). Imported as `conftest` unless
    another directory's conftest.py holds that name (tests/spark), then loaded by path."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    module = sys.modules.get("conftest")
    if module is not None and Path(getattr(module, "__file__", "")).resolve() == path:
        return module
    module = sys.modules.get("logbus_tests_conftest")
    if module is None:
        spec = importlib.util.spec_from_file_location("logbus_tests_conftest", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["logbus_tests_conftest"] = module
        spec.loader.exec_module(module)
    return module


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
