"""The security scenarios' broker (TLS, SCRAM): the bench's logbus broker with two more
listeners, `SSL://127.0.0.1:<port>` (a key and certificate made at start-up with
`cryptography`, signed by a CA made with them) and `SASL_PLAINTEXT://127.0.0.1:<port>`
with SCRAM-SHA-256 and SCRAM-SHA-512, next to its PLAINTEXT listener; the SCRAM users
are created over PLAINTEXT once the broker listens."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bench.systems import LogbusBroker, free_port

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096  # Kafka's minimum, and what kafka-configs uses by default
SCRAM_USER = "bench"
SCRAM_PASSWORD = "bench-secret"


def make_pki(directory: Path) -> tuple[Path, Path]:
    """A CA and a server certificate for 127.0.0.1 and localhost (EC P-256, valid for a
    day): returns the CA file (clients' truststore) and the broker's PEM keystore (its key
    then its certificate)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "logbus bench CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    keystore = directory / "broker.keystore.pem"
    keystore.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
        + cert.public_bytes(serialization.Encoding.PEM))
    keystore.chmod(0o600)
    return ca_file, keystore


class SecureBroker(LogbusBroker):
    """A logbus broker listening with PLAINTEXT (`bootstrap`), SSL (`ssl_bootstrap`) and
    SASL_PLAINTEXT with SCRAM (`sasl_bootstrap`)."""

    name = "logbus-secure"

    def __init__(self, workdir: Path, event_loop: str = "uvloop") -> None:
        super().__init__(workdir, event_loop)
        self.ssl_port = free_port()
        self.sasl_port = free_port()
        self.ca_file, self.keystore = make_pki(workdir / "pki")

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def overrides(self) -> list[str]:
        base = [o for o in super().overrides() if not o.startswith("listeners=")]
        return [
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            *base,
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.keystore}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.ca_file}",
            f"sasl.enabled.mechanisms={','.join(SCRAM_MECHANISMS)}",
        ]

    def start(self) -> None:
        super().start()
        self._create_users()

    def _create_users(self) -> None:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        upserts = [
            UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")),
                                                SCRAM_ITERATIONS), SCRAM_PASSWORD.encode())
            for m in SCRAM_MECHANISMS
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)

    def ssl_client_config(self) -> dict[str, str]:
        """librdkafka's settings for the SSL listener."""
        return {"bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca_file)}
