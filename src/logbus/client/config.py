"""Client configuration: Kafka's config names, checked and typed.

Each client (producer, consumer, admin) declares a `ConfigSchema` of `Setting`s named as the
Java client names them. Users pass a dict of those names, keyword arguments with the dots
written as underscores, or both (keywords win). Unknown names are rejected with the
closest known name suggested; values given as strings (as from a properties file) are
converted to the setting's type. Problems are `logbus.common.config_def.ConfigError`,
the broker's error too, in its reader's form (`ConfigError(text)`): the client's
messages name the client and suggest a close name, which Kafka's `ConfigDef` wording
does not.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from logbus.common.config_def import ConfigError

Validator = Callable[[Any], str | None]  # returns a complaint, or None when the value is fine


@dataclass(frozen=True)
class Setting:
    """One configuration setting. `kind` is int, float, bool, str, list (of str) or
    object (taken as given: serializers, callbacks)."""

    name: str
    kind: type
    default: Any
    doc: str = ""
    choices: tuple[Any, ...] | None = None
    at_least: float | None = None
    validator: Validator | None = None

    def convert(self, value: Any) -> Any:
        if value is None or self.kind is object:
            return value
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            raise ConfigError(f"{self.name} must be true or false, not {value!r}")
        if self.kind is list:
            if isinstance(value, str):
                return [part.strip() for part in value.split(",") if part.strip()]
            if isinstance(value, Iterable):
                return [str(part) for part in value]
            raise ConfigError(f"{self.name} must be a list or a comma-separated string")
        if self.kind in (int, float):
            if isinstance(value, bool):
                raise ConfigError(f"{self.name} must be a number, not {value!r}")
            try:
                number = self.kind(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{self.name} must be a number, not {value!r}") from None
            if self.kind is int and isinstance(value, float) and value != number:
                raise ConfigError(f"{self.name} must be a whole number, not {value!r}")
            return number
        if self.kind is str:
            if not isinstance(value, str):
                raise ConfigError(f"{self.name} must be a string, not {value!r}")
            return value
        return value

    def check(self, value: Any) -> Any:
        value = self.convert(value)
        if value is None:
            return value
        if self.choices is not None:
            probe = value.lower() if isinstance(value, str) else value
            if probe not in self.choices:
                allowed = ", ".join(str(c) for c in self.choices)
                raise ConfigError(f"{self.name}={value!r} is not one of: {allowed}")
            value = probe
        if self.at_least is not None and value < self.at_least:
            raise ConfigError(f"{self.name}={value!r} must be at least {self.at_least:g}")
        if self.validator is not None:
            complaint = self.validator(value)
            if complaint:
                raise ConfigError(f"{self.name}={value!r}: {complaint}")
        return value


class ConfigSchema:
    """The settings one client type accepts."""

    def __init__(self, owner: str, *groups: Iterable[Setting]) -> None:
        self.owner = owner
        self.settings: dict[str, Setting] = {}
        for group in groups:
            for setting in group:
                self.settings[setting.name] = setting

    def parse(
        self, config: Mapping[str, Any] | None = None, **overrides: Any
    ) -> dict[str, Any]:
        """Defaults, then `config` (Kafka names), then `overrides` (underscored names)."""
        given: dict[str, Any] = {}
        for name, value in (config or {}).items():
            given[self._known(name)] = value
        for name, value in overrides.items():
            given[self._known(name.replace("_", "."), shown=name)] = value
        values = {name: setting.default for name, setting in self.settings.items()}
        for name, value in given.items():
            values[name] = self.settings[name].check(value)
        return values

    def _known(self, name: str, shown: str | None = None) -> str:
        if name in self.settings:
            return name
        close = difflib.get_close_matches(name, list(self.settings), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown {self.owner} config {shown or name!r}{hint}")


def positive(value: Any) -> str | None:
    return None if value > 0 else "must be positive"


# Every client's security settings (librdkafka's names; the Java client's ssl.* too).
SECURITY_SETTINGS = (
    Setting("security.protocol", str, "plaintext",
            "plaintext, ssl, sasl_plaintext or sasl_ssl",
            choices=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")),
    Setting("sasl.mechanism", str, "PLAIN", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    Setting("sasl.mechanisms", str, None, "librdkafka's alias of sasl.mechanism"),
    Setting("sasl.username", str, None, "SASL user name"),
    Setting("sasl.password", str, None, "SASL password"),
    Setting("sasl.jaas.config", str, None,
            "the Java client's login module line; its username and password are used"),
    Setting("ssl.ca.location", str, None, "PEM file of the CAs to trust (librdkafka)"),
    Setting("ssl.truststore.location", str, None, "PEM file of the CAs to trust"),
    Setting("ssl.truststore.certificates", str, None, "trusted CA certificates in PEM"),
    Setting("ssl.certificate.location", str, None, "this client's certificate, PEM"),
    Setting("ssl.key.location", str, None, "this client's private key, PEM"),
    Setting("ssl.key.password", str, None, "password of an encrypted private key"),
    Setting("ssl.keystore.location", str, None, "PEM file with key and certificate chain"),
    Setting("ssl.keystore.password", str, None, "password of the keystore's key"),
    Setting("ssl.keystore.type", str, "PEM", "PEM only", choices=("pem",)),
    Setting("ssl.truststore.type", str, "PEM", "PEM only", choices=("pem",)),
    Setting("ssl.endpoint.identification.algorithm", str, "https",
            "https checks the broker's host name; none (or empty) does not"),
    Setting("enable.ssl.certificate.verification", bool, True,
            "false trusts any broker certificate (librdkafka; for tests only)"),
)  # fmt: skip

# Settings every client has (the Java client's CommonClientConfigs).
COMMON = (
    Setting("bootstrap.servers", list, ["localhost:9092"], "host:port pairs to start from"),
    Setting("client.id", str, "logbus", "sent with every request, shown in broker logs"),
    Setting("request.timeout.ms", int, 30000, "how long to wait for a response", at_least=1),
    Setting("metadata.max.age.ms", int, 300000, "refresh metadata at least this often",
            at_least=0),
    Setting("reconnect.backoff.ms", int, 50, "first wait before reconnecting", at_least=0),
    Setting("reconnect.backoff.max.ms", int, 1000, "longest wait before reconnecting",
            at_least=0),
    Setting("retry.backoff.ms", int, 100, "wait before retrying a failed request", at_least=0),
    Setting("retry.backoff.max.ms", int, 1000, "longest wait between retries", at_least=0),
    Setting("socket.connection.setup.timeout.ms", int, 10000, "time to connect", at_least=1),
    Setting("connections.max.idle.ms", int, 540000, "close connections idle this long",
            at_least=-1),
    Setting("client.dns.lookup", str, "use_all_dns_ips", "how bootstrap names resolve",
            choices=("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    *SECURITY_SETTINGS,
)
