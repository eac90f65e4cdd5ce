"""TLS contexts from Kafka's `ssl.*` settings (Kafka's `SslFactory`), PEM only.

A keystore is `ssl.keystore.location` (a PEM file holding the private key and its
certificate chain) or `ssl.keystore.key` + `ssl.keystore.certificate.chain` inline; an
encrypted key's password is `ssl.key.password` (else `ssl.keystore.password`). Trusted
certificates are `ssl.truststore.location` or `ssl.truststore.certificates`.
`ssl.enabled.protocols`, `ssl.cipher.suites` and, on a server, `ssl.client.auth` set what
the context accepts. Every problem is a `ConfigError` naming the setting.

`SslSettings` is a plain mapping of setting name to value, so the same code builds the
broker's listener contexts (from `BrokerConfig.listener_setting`) and the client's.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from logbus.common.config_def import ConfigError, Password

SslSettings = Mapping[str, object]
"""Setting name (`ssl.keystore.location`, ...) to value (str, list, Password or None)."""

SSL_SETTINGS = (
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
)

_VERSIONS = {
    "TLSV1": ssl.TLSVersion.TLSv1,
    "TLSV1.1": ssl.TLSVersion.TLSv1_1,
    "TLSV1.2": ssl.TLSVersion.TLSv1_2,
    "TLSV1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def settings_from(get: Callable[[str], object]) -> dict[str, object]:
    """The TLS settings read through `get` (a config's getter)."""
    return {name: get(name) for name in SSL_SETTINGS}


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """A listener's context: its key and certificate, the trusted CAs for client
    certificates and `ssl.client.auth`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, settings)
    _ciphers(context, settings)
    if not _load_keystore(context, settings):
        raise ConfigError(
            "ssl.keystore.location",
            "A TLS listener needs ssl.keystore.location, or ssl.keystore.key with "
            "ssl.keystore.certificate.chain",
        )
    auth = str(settings.get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError("ssl.client.auth", "Must be none, requested or required", auth)
    context.verify_mode = _CLIENT_AUTH[auth]
    trusted = _load_truststore(context, settings)  # a bad truststore is an error either way
    if context.verify_mode != ssl.CERT_NONE and not trusted:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """A client's context (the logbus client, a broker connecting to another): the
    trusted CAs (the system's when none are given), a key and certificate when given
    (mTLS), and host name checking unless `ssl.endpoint.identification.algorithm` is
    empty."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, settings)
    _ciphers(context, settings)
    identification = settings.get("ssl.endpoint.identification.algorithm")
    context.check_hostname = str(identification if identification is not None else "https") != ""
    if not _load_truststore(context, settings):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_keystore(context, settings)
    return context


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, Password):
        return value.value
    return str(value) or None


def _versions(context: ssl.SSLContext, settings: SslSettings) -> None:
    raw = settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    names = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",")]
    versions = []
    for name in filter(None, (str(n).strip() for n in names)):
        version = _VERSIONS.get(name.upper())
        if version is None:
            raise ConfigError(
                "ssl.enabled.protocols", f"Unknown TLS protocol {name!r}", ",".join(names)
            )
        versions.append(version)
    if not versions:
        raise ConfigError("ssl.enabled.protocols", "At least one protocol is needed")
    # ssl.protocol names the newest version the context speaks (Java's SSLContext
    # protocol): TLSv1.2 keeps a broker on TLS 1.2 even with TLSv1.3 enabled.
    protocol = str(settings.get("ssl.protocol") or "TLS").upper()
    ceiling = _VERSIONS.get(protocol)
    if ceiling is None and protocol not in ("TLS", "SSL"):
        raise ConfigError("ssl.protocol", "Expected TLS, TLSv1.2 or TLSv1.3", protocol)
    allowed = [v for v in versions if ceiling is None or v <= ceiling]
    if not allowed:
        raise ConfigError(
            "ssl.enabled.protocols", f"No enabled protocol is allowed by ssl.protocol={protocol}"
        )
    context.minimum_version = min(allowed)
    context.maximum_version = max(allowed)


def _ciphers(context: ssl.SSLContext, settings: SslSettings) -> None:
    raw = settings.get("ssl.cipher.suites") or []
    suites = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",")]
    suites = [str(s) for s in suites if str(s)]
    if not suites:
        return
    try:
        context.set_ciphers(":".join(suites))
    except ssl.SSLError:
        raise ConfigError(
            "ssl.cipher.suites", "None of these cipher suites is known to OpenSSL", ",".join(suites)
        ) from None


def _key_password(settings: SslSettings) -> str | None:
    return _text(settings.get("ssl.key.password")) or _text(settings.get("ssl.keystore.password"))


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> bool:
    """Load the key and chain if any is configured; False when none is."""
    password = _key_password(settings)
    location = _text(settings.get("ssl.keystore.location"))
    key = _text(settings.get("ssl.keystore.key"))
    chain = _text(settings.get("ssl.keystore.certificate.chain"))
    try:
        if location is not None:
            if not Path(location).is_file():
                raise ConfigError("ssl.keystore.location", "No such file", location)
            context.load_cert_chain(location, password=password)
            return True
        if key is None and chain is None:
            return False
        if key is None or chain is None:
            raise ConfigError(
                "ssl.keystore.key",
                "ssl.keystore.key and ssl.keystore.certificate.chain go together",
            )
        with _private_files(chain, key) as (chain_file, key_file):
            context.load_cert_chain(chain_file, key_file, password=password)
        return True
    except ssl.SSLError as exc:
        raise ConfigError(
            "ssl.keystore.location" if location else "ssl.keystore.key",
            f"Cannot load the key and certificate chain ({exc.reason or exc}); check the PEM "
            "and ssl.key.password",
        ) from None


def _load_truststore(context: ssl.SSLContext, settings: SslSettings) -> bool:
    location = _text(settings.get("ssl.truststore.location"))
    inline = _text(settings.get("ssl.truststore.certificates"))
    try:
        if location is not None:
            if not Path(location).is_file():
                raise ConfigError("ssl.truststore.location", "No such file", location)
            context.load_verify_locations(cafile=location)
            return True
        if inline is not None:
            context.load_verify_locations(cadata=inline)
            return True
    except ssl.SSLError as exc:
        raise ConfigError(
            "ssl.truststore.location" if location else "ssl.truststore.certificates",
            f"Cannot load the trusted certificates ({exc.reason or exc})",
        ) from None
    return False


@contextlib.contextmanager
def _private_files(*texts: str) -> Iterator[list[str]]:
    """Inline PEM written to files only this user can read (Python's ssl loads keys
    from files), removed as soon as they are loaded."""
    with tempfile.TemporaryDirectory(prefix="logbus-ssl-") as directory:
        paths = []
        for index, text in enumerate(texts):
            path = os.path.join(directory, f"{index}.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            paths.append(path)
        yield paths
