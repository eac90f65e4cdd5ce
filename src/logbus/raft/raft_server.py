"""The controller listener of a voter: accepts connections, decodes each request frame
(Kafka's wire protocol) and answers ApiVersions and the quorum's APIs through
`raft_handlers.handle`. Requests on one connection are handled concurrently (a Fetch
may wait for new records) and answered in the order they came.

The entry point is `RaftServer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from logbus.protocol import ApiKey, ErrorCode, schema
from logbus.protocol import types as t
from logbus.protocol.codec import decode_request, response_header_version
from logbus.protocol.errors import ProtocolError
from logbus.raft.raft_client import RaftClient
from logbus.raft.raft_handlers import handle
from logbus.raft.raft_messages import RAFT_API_VERSIONS

__all__ = ["ControllerApi", "RaftServer", "encode_raft_response"]

logger = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
MAX_REQUEST_BYTES = 100 * 1024 * 1024


def encode_raft_response(
    api_key: int, version: int, correlation_id: int, body: dict[str, Any]
) -> bytes:
    """A response frame through the generic codec (the Fetch fast path knows none of the
    KRaft tagged fields but the diverging epoch)."""
    w = t.Writer()
    w.pack(t.INT32, correlation_id)
    if response_header_version(api_key, version) >= 1:
        w.uvarint(0)
    schema.response(api_key).writer(version)(w, body)
    payload = w.getvalue()
    return _SIZE.pack(len(payload)) + payload


class ControllerApi(NamedTuple):
    """An API the controller above the quorum serves on the same listener: its versions,
    and the coroutine that answers a request body (given its version)."""

    versions: tuple[int, int]
    handler: Callable[[dict[str, Any], int], Awaitable[dict[str, Any]]]


def _api_versions_body(versions: Mapping[int, tuple[int, int]]) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(versions.items())
        ],
        "throttle_time_ms": 0,
    }


class RaftServer:
    """Serves one RaftClient (and the controller APIs given, `apis`) on host:port.
    `start()`, then `close()`; owns its connections' tasks."""

    def __init__(
        self,
        client: RaftClient,
        host: str,
        port: int,
        *,
        sock: socket.socket | None = None,
        apis: Mapping[int, ControllerApi] | None = None,
    ) -> None:
        self.client = client
        self.apis = dict(apis or {})
        self.versions = {**RAFT_API_VERSIONS, **{k: a.versions for k, a in self.apis.items()}}
        self.host = host
        self.port = port
        self._sock = sock
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        if self._sock is not None:
            self._server = await asyncio.start_server(self._serve, sock=self._sock)
        else:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the sockets ends each connection's task (cancelling a task that
        # start_server made would be logged as an error).
        for writer in list(self._writers):
            writer.close()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=10)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        answers: asyncio.Queue[asyncio.Task[bytes] | None] = asyncio.Queue(maxsize=64)
        sender = asyncio.get_running_loop().create_task(self._send_in_order(answers, writer))
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if not 0 < size <= MAX_REQUEST_BYTES:
                    raise ProtocolError(f"bad request size {size}")
                frame = await reader.readexactly(size)
                await answers.put(asyncio.get_running_loop().create_task(self._answer(frame)))
        except (asyncio.IncompleteReadError, ConnectionError, ProtocolError) as exc:
            logger.debug("raft connection closed: %s", exc)
        finally:
            with contextlib.suppress(asyncio.QueueFull):
                answers.put_nowait(None)
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            writer.close()
            self._writers.discard(writer)
            self._connections.discard(task)

    async def _send_in_order(
        self, answers: asyncio.Queue[asyncio.Task[bytes] | None], writer: asyncio.StreamWriter
    ) -> None:
        try:
            while (pending := await answers.get()) is not None:
                try:
                    response = await pending
                except (ProtocolError, ValueError, KeyError, TypeError) as exc:
                    # A request we cannot answer: the stream is out of step, close it.
                    logger.warning("closing a controller connection: bad request: %s", exc)
                    writer.close()
                    return
                writer.write(response)
                await writer.drain()
        finally:
            while not answers.empty():
                leftover = answers.get_nowait()
                if leftover is not None:
                    leftover.cancel()

    async def _answer(self, frame: bytes) -> bytes:
        header, body = decode_request(frame)
        key, version = header.api_key, header.api_version
        low, high = self.versions.get(key, (0, -1))
        if key == ApiKey.API_VERSIONS:
            versions = _api_versions_body(self.versions)
            if not low <= version <= high:
                reply = versions | {"error_code": int(ErrorCode.UNSUPPORTED_VERSION)}
                return encode_raft_response(key, 0, header.correlation_id, reply)
            return encode_raft_response(key, version, header.correlation_id, versions)
        if not low <= version <= high:
            raise ProtocolError(
                f"unsupported {ApiKey(key).name} v{version} on the controller listener"
            )
        api = self.apis.get(key)
        if api is not None:
            reply = await api.handler(body, version)
        else:
            reply = await handle(self.client, key, body)
        return encode_raft_response(key, version, header.correlation_id, reply)
