"""One socket write per HTTP answer for the services `http_service.serve` runs (the
schema registry, the REST proxy). uvicorn writes an answer's status line and headers
when the app sends `http.response.start`, then its body in a second write: two TCP
segments, two system calls and two wake-ups of the client for an answer of a few hundred
bytes (a registry id lookup). On loopback the sender's kernel also does the receiver's
half of the work, so the second write costs the server nearly as much as the first. Here
the transport keeps what is written during one turn of the event loop and writes it at
the end of the turn, as one segment.

The entry point is `CoalescingHttpToolsProtocol`, given to uvicorn as its `http` class.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """Wraps one connection's transport: `write` keeps the bytes, and one callback at
    the end of the loop's turn writes everything kept in that turn; `close` writes what
    is kept first. Everything else is the wrapped transport's. Owned by one connection's
    protocol, on the event loop's thread."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._kept:
            self._loop.call_soon(self.flush)
        self._kept.append(bytes(data))

    def flush(self) -> None:
        if self._kept:
            data = b"".join(self._kept)
            self._kept.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `CoalescingTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        wrapped: Any = CoalescingTransport(transport, self.loop)
        super().connection_made(wrapped)
