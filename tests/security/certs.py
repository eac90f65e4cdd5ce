"""A test CA and certificates made with `cryptography`: PEM files for brokers and clients."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str, ou: str = "", org: str = "logbus-tests") -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    if ou:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attributes)


@dataclass
class Issued:
    """A key and certificate in PEM: `key_file`, `cert_file` and `keystore` (key then
    chain, what ssl.keystore.location takes)."""

    key_pem: bytes
    cert_pem: bytes
    key_file: Path
    cert_file: Path
    keystore: Path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "logbus test CA") -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)
        self.cert_file = directory / f"{name.replace(' ', '-')}.pem"
        self.cert_file.write_bytes(self.cert_pem)

    def issue(
        self,
        file_stem: str,
        cn: str,
        *,
        ou: str = "",
        server: bool = False,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start = now - datetime.timedelta(days=10 if expired else 1)
        end = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=30)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_file = self.directory / f"{file_stem}.key"
        cert_file = self.directory / f"{file_stem}.crt"
        keystore = self.directory / f"{file_stem}.keystore.pem"
        key_file.write_bytes(key_pem)
        cert_file.write_bytes(cert_pem)
        keystore.write_bytes(key_pem + cert_pem)
        return Issued(key_pem, cert_pem, key_file, cert_file, keystore)
