"""`metrics.listener`'s value: `http://host:port`. Pure, so the broker's config
definitions check it when the configuration is read."""

from __future__ import annotations

from urllib.parse import urlsplit

from logbus.common.config_def import ConfigError

EXPECTED = "expected http://host:port (e.g. http://127.0.0.1:9404)"


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """(host, port) of `http://host:port`; an empty host is every interface, port 0 any
    free port. ConfigError naming the setting otherwise."""
    parts = urlsplit(value.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/") or parts.query:
        raise ConfigError("metrics.listener", EXPECTED, value)
    return parts.hostname or "", port


def metrics_listener_error(value: object) -> str | None:
    """The config definition's check: None when valid (or unset), else why not."""
    if value is None or value == "":
        return None
    try:
        parse_metrics_listener(str(value))
    except ConfigError:
        return EXPECTED
    return None
