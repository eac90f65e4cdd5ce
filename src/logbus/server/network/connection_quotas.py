"""Kafka's ConnectionQuotas: how many connections the broker holds, in all and per client
address, and how fast it takes new ones (`max.connections`, `max.connections.per.ip`,
`max.connections.per.ip.overrides`, `max.connection.creation.rate`; KIP-402, KIP-612).

Pure code: the listener asks `accept_delay(now)` before accepting a connection and calls
`created()` after, asks `admit(address)` whether the connection may stay, and calls
`release(address)` when it closes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["ConnectionLimits", "ConnectionQuotas", "parse_per_ip_overrides"]


def parse_per_ip_overrides(value: str) -> dict[str, int]:
    """Parse `max.connections.per.ip.overrides` ("host:count,host:count", Kafka's
    parseCsvMap: the count follows the last colon, so IPv6 addresses work) into
    {host: count}. Raises ValueError with a readable message for a malformed entry."""
    overrides: dict[str, int] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        host, colon, count = entry.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not colon or not host:
            raise ValueError(f"Expected host:count, found {entry!r}")
        try:
            limit = int(count.strip())
        except ValueError:
            raise ValueError(f"The count of {host!r} is not a number: {count.strip()!r}") from None
        if limit < 0:
            raise ValueError(f"The count of {host!r} must not be negative: {limit}")
        overrides[host] = limit
    return overrides


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits in force: `per_ip_overrides` maps IP addresses (hosts resolved) to their
    own limit. A limit of INT_MAX (Kafka's default) means none."""

    max_connections: int
    max_connections_per_ip: int
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    max_creation_rate: int = 2**31 - 1

    def per_ip(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_connections_per_ip)


class ConnectionQuotas:
    """Counts the broker's open connections, per client address and in all, shared by
    every listener; owned by the broker's event loop. New limits apply to connections
    accepted from then on, counting those already open (as Kafka's dynamic update)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.total = 0
        self._per_ip: Counter[str] = Counter()
        # Connection creation rate: a token bucket holding at most one second's worth.
        self._tokens = float(limits.max_creation_rate)
        self._refilled_at: float | None = None

    def reconfigure(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._tokens = min(self._tokens, float(limits.max_creation_rate))

    def count(self, address: str) -> int:
        """Open connections from `address`."""
        return self._per_ip[address]

    def admit(self, address: str) -> str | None:
        """Count a new connection from `address`; None if it may stay, else why it must be
        closed (and it is not counted)."""
        limits = self.limits
        if self.total >= limits.max_connections:
            return f"the broker holds max.connections={limits.max_connections} connections"
        allowed = limits.per_ip(address)
        if self._per_ip[address] >= allowed:
            return f"{address} holds its limit of {allowed} connections (max.connections.per.ip)"
        self.total += 1
        self._per_ip[address] += 1
        return None

    def release(self, address: str) -> None:
        """A connection admitted from `address` is closed."""
        self.total -= 1
        self._per_ip[address] -= 1
        if self._per_ip[address] <= 0:
            del self._per_ip[address]

    def accept_delay(self, now: float) -> float:
        """Seconds to wait before accepting the next connection under
        max.connection.creation.rate (0: accept it now, then call `created`)."""
        rate = self.limits.max_creation_rate
        if rate >= 2**31 - 1:
            return 0.0
        if self._refilled_at is not None:
            self._tokens = min(float(rate), self._tokens + (now - self._refilled_at) * rate)
        self._refilled_at = now
        if self._tokens >= 1:
            return 0.0
        if rate == 0:
            return 1.0  # no new connections at all: look again in a second
        return (1 - self._tokens) / rate

    def created(self) -> None:
        """A connection was accepted: it takes its share of the creation rate."""
        if self.limits.max_creation_rate < 2**31 - 1:
            self._tokens -= 1
