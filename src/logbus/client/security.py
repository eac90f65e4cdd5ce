"""How the client secures its connections: librdkafka's and Kafka's settings
(`security.protocol`, `ssl.*`, `sasl.mechanism`, `sasl.username` / `sasl.password`) made
into one `ClientSecurity` value that `Connection.connect` applies: TLS around the socket,
then, for SASL_*, SaslHandshake v1 and SaslAuthenticate with PLAIN or SCRAM-SHA-256/512
once ApiVersions has answered.

The TLS contexts and the SCRAM client are the broker's own code
(`logbus.common.security.ssl_factory`, `.scram`): they import nothing of the broker.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbus.client.config import SECURITY_SETTINGS
from logbus.common.config_def import ConfigError
from logbus.common.security.jaas import parse_jaas
from logbus.common.security.scram import MECHANISMS as SCRAM_MECHANISMS
from logbus.common.security.ssl_factory import client_context

PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
__all__ = ["SECURITY_SETTINGS", "ClientSecurity", "security_from_config"]
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")



@dataclass(frozen=True)
class ClientSecurity:
    """What `Connection.connect` needs: a TLS context (SSL, SASL_SSL) and SASL
    credentials (SASL_*)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


PLAINTEXT = ClientSecurity()


def security_from_config(config: Mapping[str, Any]) -> ClientSecurity:
    """A client's parsed settings (its schema includes SECURITY_SETTINGS) as a
    ClientSecurity; ConfigError for an incomplete or inconsistent combination."""
    protocol = str(config.get("security.protocol") or "plaintext").upper()
    if protocol not in {p.upper() for p in PROTOCOLS}:
        raise ConfigError(f"security.protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = _ssl_context(config)
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context)
    mechanism = str(config.get("sasl.mechanisms") or config.get("sasl.mechanism") or "PLAIN")
    mechanism = mechanism.upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism={mechanism!r}: logbus speaks {', '.join(SASL_MECHANISMS)}"
        )
    username, password = config.get("sasl.username"), config.get("sasl.password")
    jaas_text = config.get("sasl.jaas.config")
    if jaas_text and (not username or password is None):
        try:
            options = parse_jaas(str(jaas_text)).options
        except ValueError as exc:
            raise ConfigError(f"sasl.jaas.config: {exc}") from None
        username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ConfigError(f"security.protocol={protocol} needs sasl.username and sasl.password")
    return ClientSecurity(protocol, context, mechanism, str(username), str(password))


def _ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    def get(name: str) -> Any:
        return config.get(name)

    identification = get("ssl.endpoint.identification.algorithm")
    if identification is not None and str(identification).lower() == "none":
        identification = ""
    keystore = get("ssl.keystore.location")
    certificate, key = get("ssl.certificate.location"), get("ssl.key.location")
    settings: dict[str, Any] = {
        "ssl.truststore.location": get("ssl.ca.location") or get("ssl.truststore.location"),
        "ssl.truststore.certificates": get("ssl.truststore.certificates"),
        "ssl.endpoint.identification.algorithm": identification,
        "ssl.key.password": get("ssl.key.password") or get("ssl.keystore.password"),
        "ssl.keystore.location": keystore,
    }
    try:
        if keystore is None and (certificate or key):
            if not (certificate and key):
                raise ConfigError("ssl.certificate.location and ssl.key.location go together")
            with open(certificate) as cert_file, open(key) as key_file:
                settings["ssl.keystore.certificate.chain"] = cert_file.read()
                settings["ssl.keystore.key"] = key_file.read()
        context = client_context(settings)
    except OSError as exc:
        raise ConfigError(f"cannot read the client certificate or key: {exc}") from None
    if get("enable.ssl.certificate.verification") is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def is_scram(mechanism: str) -> bool:
    return mechanism in SCRAM_MECHANISMS
