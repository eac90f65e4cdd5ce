"""The metrics endpoint (`metrics.listener`): Prometheus text over HTTP/1.1, served on
the broker's event loop so that a scrape reads the broker's state without racing it.

A deliberately small server: `GET` or `HEAD /metrics` (a query string is ignored) gets
the exposition; any other path 404, any other method 405 with `Allow`; a request line
and headers beyond 8 KiB get 431, garbage 400; a client that does not send its request
within `READ_TIMEOUT_S` or take the answer within `WRITE_TIMEOUT_S` is dropped; beyond
`MAX_CONNECTIONS` at once new ones get 503. Every answer closes the connection. Nothing
a client does here reaches the Kafka listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8 * 1024
READ_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 16
PATH = "/metrics"

_REASONS = {
    200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


class MetricsEndpoint:
    """Owns the HTTP server socket and its connections; `stop()` closes them all."""

    def __init__(self, host: str, port: int, collector: Collector) -> None:
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host or None, self.port, limit=MAX_HEAD_BYTES
        )
        sockets = self._server.sockets
        if sockets:
            self.port = sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self.host or '0.0.0.0'}:{self.port}{PATH}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._clients):
            task.cancel()
        for task in list(self._clients):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            if len(self._clients) > MAX_CONNECTIONS:
                await self._answer(writer, 503, b"too many connections\n")
                return
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except asyncio.LimitOverrunError:
                await self._answer(writer, 431, b"request head over 8 KiB\n")
                return
            except asyncio.IncompleteReadError as exc:
                if len(exc.partial) >= MAX_HEAD_BYTES:
                    await self._answer(writer, 431, b"request head over 8 KiB\n")
                return
            except TimeoutError:
                await self._answer(writer, 408, b"request not received in time\n")
                return
            await self._respond(writer, head)
        except (ConnectionError, TimeoutError):
            pass
        except Exception:  # never let a scrape problem reach the broker
            log.exception("metrics endpoint: request failed")
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), WRITE_TIMEOUT_S)

    async def _respond(self, writer: asyncio.StreamWriter, head: bytes) -> None:
        try:
            request_line = head.split(b"\r\n", 1)[0].decode("ascii")
            method, target, protocol = request_line.split(" ")
        except (UnicodeDecodeError, ValueError):
            await self._answer(writer, 400, b"malformed request line\n")
            return
        if not protocol.startswith("HTTP/1."):
            await self._answer(writer, 400, b"HTTP/1.x only\n")
            return
        if urlsplit(target).path != PATH:
            await self._answer(writer, 404, b"not found: the metrics are at /metrics\n")
            return
        if method not in ("GET", "HEAD"):
            await self._answer(writer, 405, b"GET or HEAD only\n", {"Allow": "GET, HEAD"})
            return
        try:
            body = generate_latest(self.registry)
        except Exception:
            log.exception("metrics endpoint: collecting the metrics failed")
            await self._answer(writer, 500, b"collecting the metrics failed\n")
            return
        await self._answer(
            writer, 200, body, {"Content-Type": CONTENT_TYPE_LATEST}, head_only=method == "HEAD"
        )

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        *,
        head_only: bool = False,
    ) -> None:
        fields = {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}
        fields["Content-Length"] = str(len(body))
        fields["Connection"] = "close"
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}"]
        lines += [f"{k}: {v}" for k, v in fields.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head_only:
            writer.write(body)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
