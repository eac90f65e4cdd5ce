"""Reading form and query values: whole numbers, times, header lines; a bad value is a
ConsoleError naming the field."""

from __future__ import annotations

from datetime import UTC, datetime

from logbus.console.errors import ConsoleError


def whole_number(
    text: str | None, field: str, *, minimum: int = 0, default: int | None = None
) -> int:
    """A form field as an int of at least `minimum` (`default` when empty)."""
    raw = (text or "").strip()
    if not raw:
        if default is None:
            raise ConsoleError(f"{field}: a whole number is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConsoleError(f"{field}: expected a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConsoleError(f"{field}: must be at least {minimum}, got {value}")
    return value


def optional_number(text: str | None, field: str, *, minimum: int = 0) -> int | None:
    """A form field as an int, or None when it is empty."""
    if not (text or "").strip():
        return None
    return whole_number(text, field, minimum=minimum)


def timestamp_ms(text: str | None, field: str) -> int:
    """A time as milliseconds since the epoch: an ISO date and time (UTC unless it names
    its zone, as a browser's datetime input sends it) or a number of milliseconds."""
    raw = (text or "").strip()
    if not raw:
        raise ConsoleError(f"{field}: a date and time is required")
    if raw.isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ConsoleError(
            f"{field}: expected a date and time such as 2026-11-26T09:30:00 (UTC) or "
            f"milliseconds since 1970, got {raw!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def iso_utc(ms: int) -> str:
    """Milliseconds since the epoch as an ISO time in UTC (what the pages print)."""
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def header_lines(text: str | None) -> list[tuple[str, bytes]]:
    """Record headers from lines of `key=value` (empty lines skipped)."""
    headers: list[tuple[str, bytes]] = []
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConsoleError(f"headers, line {number}: expected key=value, got {line!r}")
        headers.append((key.strip(), value.encode()))
    return headers
