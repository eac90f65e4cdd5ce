"""The console's clients: one asyncio Admin and one Producer per console process, started
when first needed (the cluster may be down when the console starts) and started afresh
after the cluster could not be reached, so a broker restart is survived."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from logbus.client.admin import Admin
from logbus.client.producer import Producer

# A page must answer while a person waits: calls give up after these many milliseconds
# instead of the clients' defaults of a minute or two.
API_TIMEOUT_MS = 5000
_ADMIN_SETTINGS = {
    "default.api.timeout.ms": API_TIMEOUT_MS,
    "request.timeout.ms": API_TIMEOUT_MS,
}
_PRODUCER_SETTINGS = {
    "request.timeout.ms": API_TIMEOUT_MS,
    "delivery.timeout.ms": 2 * API_TIMEOUT_MS,
    "max.block.ms": API_TIMEOUT_MS,
    "linger.ms": 0,
    "client.id": "logbus-console",
}


class ConsoleClients:
    """The Admin and Producer the console's pages share. `settings` are client settings
    (`bootstrap.servers` and the security ones of --command-config)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self._admin: Admin | None = None
        self._producer: Producer | None = None
        # Clients replaced by the last reset: pages that were using them finish first;
        # they are closed at the next reset or at shutdown.
        self._retired: list[Admin | Producer] = []
        self._lock = asyncio.Lock()

    async def admin(self) -> Admin:
        """The started Admin (KafkaConnectionError when no bootstrap server answers)."""
        async with self._lock:
            if self._admin is None:
                admin = Admin({**self.settings, **_ADMIN_SETTINGS, "client.id": "logbus-console"})
                try:
                    await admin.start()
                except BaseException:
                    await admin.close()
                    raise
                self._admin = admin
            return self._admin

    async def producer(self) -> Producer:
        """The started Producer (KafkaConnectionError when no bootstrap server answers)."""
        async with self._lock:
            if self._producer is None:
                producer = Producer({**self.settings, **_PRODUCER_SETTINGS})
                try:
                    await producer.start()
                except BaseException:
                    await producer.close()
                    raise
                self._producer = producer
            return self._producer

    async def reset(self) -> None:
        """Replace the clients after the cluster could not be reached: the next page starts
        new ones, with fresh connections and metadata. The replaced ones are closed at the
        next reset, so pages still using them end with the cluster's error, not with a
        client closed under them."""
        async with self._lock:
            old, self._retired = self._retired, [
                c for c in (self._admin, self._producer) if c is not None
            ]
            self._admin = None
            self._producer = None
        await _close(old)

    async def close(self) -> None:
        """Close every client (at shutdown)."""
        async with self._lock:
            clients = [c for c in (self._admin, self._producer) if c is not None]
            clients += self._retired
            self._admin, self._producer, self._retired = None, None, []
        await _close(clients)


async def _close(clients: list[Admin | Producer]) -> None:
    for client in clients:
        if isinstance(client, Producer):
            await client.close(0)
        else:
            await client.close()
