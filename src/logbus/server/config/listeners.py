"""Listeners: Kafka's `listeners` / `advertised.listeners` endpoints and the
`listener.security.protocol.map` that gives each listener name its security protocol.

Pure code: no I/O. `BrokerConfig` applies the broker-level rules on top (supported
protocols, what may be advertised).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from logbus.common.config_def import ConfigError

__all__ = [
    "KNOWN_SECURITY_PROTOCOLS",
    "SUPPORTED_SECURITY_PROTOCOLS",
    "Listener",
    "parse_listeners",
    "parse_security_protocol_map",
    "split_listener_setting",
]

KNOWN_SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS: Final = frozenset(KNOWN_SECURITY_PROTOCOLS)
"""The security protocols logbus listeners can serve today."""


@dataclass(frozen=True)
class Listener:
    """One endpoint: `name` (upper case), `host` ("" = every interface), `port` (0 =
    ephemeral) and the security protocol its name maps to."""

    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


# Kafka's endpoint syntax: NAME://host:port, IPv6 hosts in brackets.
_ENDPOINT = re.compile(r"([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:([0-9]+)")


def parse_security_protocol_map(value: str, setting: str) -> dict[str, str]:
    """Parse "NAME:PROTOCOL,..." into {NAME: PROTOCOL}, names and protocols upper-cased."""
    mapping: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        parts = [part.strip() for part in entry.split(":")]
        if len(parts) != 2 or not parts[0]:
            raise ConfigError(setting, f"Expected NAME:PROTOCOL, found {entry!r}", value)
        name, protocol = parts[0].upper(), parts[1].upper()
        if protocol not in KNOWN_SECURITY_PROTOCOLS:
            raise ConfigError(
                setting,
                f"Unknown security protocol {parts[1]!r} for listener {name}; expected one of "
                + ", ".join(KNOWN_SECURITY_PROTOCOLS),
                value,
            )
        mapping[name] = protocol
    return mapping


def parse_listeners(
    value: str,
    setting: str,
    protocol_map: Mapping[str, str],
    *,
    distinct_ports: bool = True,
) -> list[Listener]:
    """Parse a listeners value ("NAME://host:port,...") with Kafka's rules: each name has a
    security protocol in `protocol_map`, names are unique and, with `distinct_ports`, so are
    ports other than 0."""
    listeners: list[Listener] = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = _ENDPOINT.fullmatch(item)
        if match is None:
            raise ConfigError(setting, f"Cannot parse {item!r} as NAME://host:port", value)
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if port > 65535:
            raise ConfigError(setting, f"Port {port} of listener {name} is out of range", value)
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                setting,
                f"No security protocol defined for listener {name} "
                "in listener.security.protocol.map",
                value,
            )
        if any(existing.name == name for existing in listeners):
            raise ConfigError(setting, f"Listener name {name} is used twice", value)
        if distinct_ports and port != 0 and any(existing.port == port for existing in listeners):
            raise ConfigError(setting, f"Port {port} is used by two listeners", value)
        listeners.append(Listener(name, host, port, protocol))
    return listeners


LISTENER_PREFIX: Final = "listener.name."
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms logbus serves."""
# Settings a listener may override (Kafka's listener-prefixed configs).
_PER_LISTENER = re.compile(r"(ssl\.|sasl\.)[a-z.]+|connections\.max\.reauth\.ms")
_PER_MECHANISM = re.compile(r"([a-z0-9-]+)\.(sasl\.jaas\.config|connections\.max\.reauth\.ms)")


def split_listener_setting(name: str) -> tuple[str, str, str] | None:
    """("LISTENER", "mechanism" or "", base setting) for a listener-prefixed setting
    (`listener.name.sasl_ssl.ssl.keystore.location`,
    `listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`); None for any other name or
    a prefixed name logbus does not know."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, dot, rest = name[len(LISTENER_PREFIX) :].partition(".")
    if not dot or not listener:
        return None
    per_mechanism = _PER_MECHANISM.fullmatch(rest)
    if per_mechanism is not None and per_mechanism.group(1).upper() in SASL_MECHANISMS:
        return listener.upper(), per_mechanism.group(1).upper(), per_mechanism.group(2)
    if _PER_LISTENER.fullmatch(rest):
        return listener.upper(), "", rest
    return None
