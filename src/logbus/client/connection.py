"""One pipelined connection to one broker, with ApiVersions negotiation (KIP-35, KIP-511).

Requests are written as soon as they are made and matched to their responses by
correlation id, so many can be in flight at once (up to `max_in_flight`). One reader task,
owned by the connection, decodes every response and resolves the waiting future.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from logbus import __version__
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from logbus.client.lifecycle import AsyncCloseable
from logbus.client.requests.api_versions import build_api_versions, read_api_versions
from logbus.client.requests.sasl import build_sasl_authenticate, build_sasl_handshake
from logbus.client.security import PLAINTEXT, ClientSecurity, is_scram
from logbus.common.network.frame_stream import FrameStream, open_frame_stream
from logbus.common.security.scram import ScramClient
from logbus.protocol import ApiKey, ErrorCode, schema
from logbus.protocol.codec import RequestHeader, decode_response, encode_request_chunks
from logbus.protocol.errors import ProtocolError
from logbus.protocol.frame import Frame
from logbus.protocol.messages.api_versions_response import ApiVersionsResponse
from logbus.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from logbus.protocol.messages.sasl_handshake_response import SaslHandshakeResponse

_CORRELATION_ID = struct.Struct(">i")
_CORRELATION_AND_ERROR = struct.Struct(">ih")
# The newest ApiVersions request that every Kafka broker since 2.4 understands; brokers
# that do not answer with a v0 response naming their own range (KIP-511).
_API_VERSIONS_FIRST_TRY = 3

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_IN_FLIGHT = 100
DEFAULT_MAX_RESPONSE_SIZE = 256 * 1024 * 1024
# Responses are handled as they arrive; reading pauses only if this many bytes of them
# pile up (a consumer's callbacks hold the loop).
QUEUED_RESPONSE_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class _InFlight:
    api_key: int
    api_version: int
    future: asyncio.Future[dict[str, Any]]


def describe_os_error(exc: OSError) -> str:
    """A short reason for a socket error ("Connection refused"), without the addresses
    asyncio puts in its messages."""
    if isinstance(exc, socket.gaierror):
        return exc.strerror or str(exc)  # resolver codes are not errno values
    if exc.errno is not None:
        return os.strerror(exc.errno)
    # open_connection() tries every resolved address and joins the failures into one
    # message; when they all failed the same way, say that way once.
    codes = set(re.findall(r"\[Errno (\d+)\]", str(exc)))
    if len(codes) == 1:
        return os.strerror(int(codes.pop()))
    return str(exc) or type(exc).__name__


class Connection(AsyncCloseable):
    """A TCP connection to one broker and the requests in flight on it.

    Made by `Connection.connect` (which also negotiates API versions) and closed by
    `close()` or by leaving `async with`; closing fails every pending request with
    `KafkaConnectionError`. The connection owns its reader task. It may be shared between
    tasks of one event loop: each `request()` waits only for its own response.
    """

    def __init__(
        self,
        host: str,
        port: int,
        stream: FrameStream,
        *,
        client_id: str | None,
        request_timeout: float,
        max_in_flight: int,
        max_response_size: int,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.max_response_size = max_response_size
        # api_key -> (min_version, max_version) the broker supports
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._stream = stream
        self._slots = asyncio.Semaphore(max_in_flight)
        self._in_flight: dict[int, _InFlight] = {}
        self._next_correlation_id = 0
        self._close_reason: KafkaConnectionError | None = None
        # KIP-219: a response's throttle_time_ms holds the next request back until then
        # (the broker would not read it earlier anyway)
        self.throttled_until = 0.0
        self.last_throttle_ms = 0
        self._reader_task = asyncio.get_running_loop().create_task(
            self._read_responses(), name=f"logbus-connection-{self.address}"
        )

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str | None = "logbus",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        security: ClientSecurity = PLAINTEXT,
    ) -> Connection:
        """Open a connection (TLS with `security.ssl_context`), learn which API versions
        the broker supports and, on SASL_* listeners, authenticate."""
        address = format_address(host, port)
        try:
            async with asyncio.timeout(connect_timeout):
                stream = await open_frame_stream(
                    host,
                    port,
                    max_response_size,
                    min_frame_size=_CORRELATION_ID.size,
                    max_queued_bytes=QUEUED_RESPONSE_BYTES,
                    ssl=security.ssl_context,
                )
        except TimeoutError:
            raise KafkaConnectionError(
                f"cannot connect to {address}: timed out after {connect_timeout:g}s"
            ) from None
        except ssl.SSLError as exc:
            raise KafkaConnectionError(
                f"cannot connect to {address}: TLS handshake failed ({exc.reason or exc})"
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(
                f"cannot connect to {address}: {describe_os_error(exc)}"
            ) from exc
        conn = cls(
            host,
            port,
            stream,
            client_id=client_id,
            request_timeout=request_timeout,
            max_in_flight=max_in_flight,
            max_response_size=max_response_size,
        )
        try:
            async with asyncio.timeout(connect_timeout):
                await conn._negotiate_versions()
                if security.uses_sasl:
                    await conn._authenticate(security)
        except TimeoutError:
            await conn.close()
            raise KafkaConnectionError(
                f"cannot connect to {address}: no ApiVersions response "
                f"within {connect_timeout:g}s"
            ) from None
        except KafkaConnectionError as exc:
            await conn.close()
            if security.ssl_context is None and not conn.api_versions:
                # A TLS listener drops a client that speaks Kafka in the clear at once.
                raise KafkaConnectionError(
                    f"{exc} (a TLS listener? set security.protocol)", exc.code
                ) from exc
            raise
        except BaseException:
            await conn.close()
            raise
        return conn

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    @property
    def closed(self) -> bool:
        return self._close_reason is not None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Connection {self.address} {state}>"

    # --- versions ---------------------------------------------------------------------

    async def _negotiate_versions(self) -> None:
        version = _API_VERSIONS_FIRST_TRY
        while True:
            body = build_api_versions(version, __version__)
            # The connection's own requests are typed here (the request layer's `send`
            # imports this module): the codec decoded each by the schema of its api key.
            response = await self.request(ApiKey.API_VERSIONS, body, version)
            code, ranges = read_api_versions(cast(ApiVersionsResponse, response))
            if code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                # KIP-511: the broker answered in v0 and named its own range; retry with
                # the newest version it supports, or v0 if it named none we can use.
                supported = ranges.get(ApiKey.API_VERSIONS, (0, 0))[1]
                version = supported if 0 <= supported < version else 0
                continue
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"ApiVersions v{version} failed on {self.address}")
            self.api_versions = ranges
            return

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds of the mechanism; a refusal is
        KafkaError(UNSUPPORTED_SASL_MECHANISM / SASL_AUTHENTICATION_FAILED)."""
        mechanism = security.sasl_mechanism
        answer = cast(
            SaslHandshakeResponse,
            await self.request(ApiKey.SASL_HANDSHAKE, build_sasl_handshake(1, mechanism), 1),
        )
        if answer["error_code"] != ErrorCode.NONE:
            raise KafkaError(
                answer["error_code"],
                f"{self.address} does not offer SASL {mechanism} "
                f"(it offers {', '.join(answer.get('mechanisms') or []) or 'none'})",
            )
        if is_scram(mechanism):
            client = ScramClient(mechanism, security.username, security.password)
            first = await self._sasl_round(client.first())
            final = await self._sasl_round(client.final(first))
            try:
                client.verify(final)
            except ValueError as exc:
                raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from None
        else:
            token = f"\x00{security.username}\x00{security.password}".encode()
            await self._sasl_round(token)

    async def _sasl_round(self, token: bytes) -> bytes:
        version = self.choose_version(ApiKey.SASL_AUTHENTICATE)
        body = build_sasl_authenticate(version, token)
        answer = cast(
            SaslAuthenticateResponse,
            await self.request(ApiKey.SASL_AUTHENTICATE, body, version),
        )
        if answer["error_code"] != ErrorCode.NONE:
            raise KafkaError(
                answer["error_code"],
                f"authentication with {self.address} failed: {answer.get('error_message')}",
            )
        return bytes(answer.get("auth_bytes") or b"")

    def choose_version(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of `api_key` that both sides support (capped at
        `max_version`); raises KafkaError(UNSUPPORTED_VERSION) if there is none."""
        name = _api_name(api_key)
        ours_min, ours_max = schema.request(api_key).valid_versions
        if max_version is not None:
            ours_max = min(ours_max, max_version)
        theirs = self.api_versions.get(api_key)
        if theirs is None:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"broker {self.address} does not support {name}"
            )
        low, high = max(ours_min, theirs[0]), min(ours_max, theirs[1])
        if low > high:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"no common version of {name}: broker {self.address} supports "
                f"{theirs[0]}-{theirs[1]}, this client {ours_min}-{ours_max}",
            )
        return high

    # --- requests ---------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        body: Mapping[str, object],
        version: int | None = None,
        *,
        max_version: int | None = None,
        response_timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its decoded response body.

        The version is `version` if given, else the highest both sides support (at most
        `max_version`). `response_timeout` (seconds) overrides `request_timeout`. A Produce
        request with acks=0 gets no response from the broker: it returns `{}` once written.
        On timeout the connection is closed (and KafkaTimeoutError raised), since a late
        response could no longer be told apart from a stuck broker.
        """
        if version is None:
            version = self.choose_version(api_key, max_version)
        expects_response = not (api_key == ApiKey.PRODUCE and body.get("acks", 0) == 0)
        async with self._slots:
            self._raise_if_closed()
            if (wait := self.throttled_until - asyncio.get_running_loop().time()) > 0:
                await asyncio.sleep(wait)
                self._raise_if_closed()
            correlation_id = self._next_correlation_id
            self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
            header = RequestHeader(api_key, version, correlation_id, self.client_id)
            chunks = encode_request_chunks(header, body)
            future: asyncio.Future[dict[str, Any]] | None = None
            if expects_response:
                future = asyncio.get_running_loop().create_future()
                self._in_flight[correlation_id] = _InFlight(api_key, version, future)
            try:
                self._stream.write_chunks(chunks)
                await self._stream.drain()
            except OSError as exc:
                reason = KafkaConnectionError(
                    f"connection to {self.address} failed: {describe_os_error(exc)}"
                )
                self._shutdown(reason)
                raise reason from exc
            if future is None:
                return {}
            limit = self.request_timeout if response_timeout is None else response_timeout
            try:
                async with asyncio.timeout(limit):
                    return await future
            except TimeoutError:
                reason = KafkaTimeoutError(
                    f"{_api_name(api_key)} request to {self.address} timed out "
                    f"after {limit:g}s"
                )
                self._shutdown(reason)
                raise reason from None

    def _raise_if_closed(self) -> None:
        if self._close_reason is not None:
            raise KafkaConnectionError(str(self._close_reason), self._close_reason.code)

    # --- responses --------------------------------------------------------------------

    async def _read_responses(self) -> None:
        try:
            while (frame := await self._stream.read_frame()) is not None:
                self._dispatch(frame)
            reason = KafkaConnectionError(f"connection to {self.address} closed by the broker")
        except asyncio.IncompleteReadError:
            reason = KafkaConnectionError(f"connection to {self.address} closed by the broker")
        except OSError as exc:
            reason = KafkaConnectionError(
                f"connection to {self.address} failed: {describe_os_error(exc)}"
            )
        except ProtocolError as exc:
            reason = KafkaConnectionError(
                f"bad response from {self.address}: {exc} (is this a Kafka broker?)"
            )
        except Exception as exc:  # never leave requests waiting on a dead reader
            reason = KafkaConnectionError(f"connection to {self.address} failed: {exc!r}")
        self._shutdown(reason)

    def _dispatch(self, frame: Frame) -> None:
        if len(frame) >= _CORRELATION_AND_ERROR.size:
            correlation_id, leading_error = _CORRELATION_AND_ERROR.unpack_from(frame)
        else:  # too short to carry an error code: the decoder will say what is wrong
            (correlation_id,), leading_error = _CORRELATION_ID.unpack_from(frame), 0
        entry = self._in_flight.pop(correlation_id, None)
        if entry is None:
            raise ProtocolError(f"response with unknown correlation id {correlation_id}")
        version = entry.api_version
        if (
            entry.api_key == ApiKey.API_VERSIONS
            and leading_error == ErrorCode.UNSUPPORTED_VERSION
        ):
            version = 0  # KIP-511: the broker answers a version it lacks in v0
        try:
            _, body = decode_response(entry.api_key, version, frame)
        except Exception as exc:
            # The frame was complete, so the stream is still in step: fail this request only.
            if not entry.future.done():
                entry.future.set_exception(
                    ProtocolError(
                        f"cannot decode {_api_name(entry.api_key)} v{version} response "
                        f"from {self.address}: {exc}"
                    )
                )
            return
        throttle_ms = body.get("throttle_time_ms", 0)
        if isinstance(throttle_ms, int) and throttle_ms > 0:
            self.last_throttle_ms = throttle_ms
            until = asyncio.get_running_loop().time() + throttle_ms / 1000
            self.throttled_until = max(self.throttled_until, until)
        if not entry.future.done():  # its caller may have given up (cancelled)
            entry.future.set_result(body)

    # --- closing ----------------------------------------------------------------------

    def _shutdown(self, reason: KafkaConnectionError) -> None:
        """Mark the connection closed, fail pending requests, close the socket."""
        if self._close_reason is not None:
            return
        self._close_reason = reason
        pending, self._in_flight = self._in_flight, {}
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(
                    KafkaConnectionError(str(reason), reason.code)
                )
        self._stream.close()
        if self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()

    async def close(self) -> None:
        """Close the connection; pending requests fail with KafkaConnectionError."""
        self._shutdown(KafkaConnectionError(f"connection to {self.address} was closed"))
        if self._reader_task is not asyncio.current_task():
            try:
                await self._reader_task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
        with contextlib.suppress(OSError):
            await self._stream.wait_closed()


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """"host:port", "[v6addr]:port", a bare v6 address, or "host" -> (host, port)."""
    text = address.strip()
    port_text: str | None = None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"invalid address {address!r}")
        if rest:
            port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host = text
    if not host:
        raise ValueError(f"invalid address {address!r}: no host")
    if port_text is None:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"invalid address {address!r}: bad port {port_text!r}")
    return host, int(port_text)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """"host:port[,host:port...]" -> [(host, port), ...]."""
    addresses = [parse_address(part) for part in servers.split(",") if part.strip()]
    if not addresses:
        raise ValueError("no bootstrap servers given")
    return addresses


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
