"""`Connection` against a scripted peer on 127.0.0.1: version negotiation (KIP-511),
pipelining, acks=0, timeouts, and closing from either side.

The peer speaks the wire protocol through logbus.protocol.codec and answers as each test
scripts it; the tests of the real broker are in test_cli.py.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from logbus.client.connection import Connection
from logbus.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from logbus.protocol import ApiKey, ErrorCode, codec, schema
from logbus.protocol.codec import RequestHeader

Reply = tuple[int, dict[str, Any]] | None  # (response version, body), or no answer
Handler = Callable[[RequestHeader, dict[str, Any]], Awaitable[Reply]]
CLOSE = (-1, {})  # a reply that closes the connection instead


def all_api_versions(**overrides: tuple[int, int]) -> list[dict[str, int]]:
    ranges = {key: schema.request(key).valid_versions for key in schema.known_api_keys()}
    ranges.update({int(ApiKey[name]): r for name, r in overrides.items()})
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in ranges.items()]


async def default_handler(header: RequestHeader, body: dict[str, Any]) -> Reply:
    if header.api_key == ApiKey.API_VERSIONS:
        return header.api_version, {"error_code": 0, "api_keys": all_api_versions()}
    if header.api_key == ApiKey.METADATA:
        return header.api_version, {"brokers": [], "cluster_id": "c", "topics": []}
    if header.api_key == ApiKey.PRODUCE:
        return header.api_version, {"responses": []}
    raise AssertionError(f"unexpected request {header}")


class ScriptedPeer:
    """A TCP server that decodes requests and answers through `handler`."""

    def __init__(self, handler: Handler = default_handler) -> None:
        self.handler = handler
        self.requests: list[tuple[RequestHeader, dict[str, Any]]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self._arrived = asyncio.Condition()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ScriptedPeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def connect(self, **options: Any) -> Connection:
        return await Connection.connect("127.0.0.1", self.port, **options)

    async def received(self, count: int) -> None:
        """Wait until `count` requests have arrived."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header, body = codec.decode_request(await reader.readexactly(size))
                self.requests.append((header, body))
                async with self._arrived:
                    self._arrived.notify_all()
                reply = await self.handler(header, body)
                if reply is CLOSE:
                    break
                if reply is not None:
                    version, response = reply
                    chunks = codec.encode_response(
                        header.api_key, version, header.correlation_id, response
                    )
                    writer.write(b"".join(chunks))
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))


def test_connect_negotiates_versions() -> None:
    async def main() -> None:
        async with ScriptedPeer() as peer, await peer.connect() as conn:
            header, body = peer.requests[0]
            assert (header.api_key, header.api_version) == (ApiKey.API_VERSIONS, 3)
            assert body["client_software_name"] == "logbus"
            assert conn.choose_version(ApiKey.METADATA) == schema.request(3).valid_versions[1]
            assert conn.choose_version(ApiKey.METADATA, max_version=9) == 9
            await conn.request(ApiKey.METADATA, {"topics": None})
            assert peer.requests[-1][0].api_version == conn.choose_version(ApiKey.METADATA)

    run(main())


@pytest.mark.parametrize(("advertised", "expected"), [((0, 2), [3, 2]), (None, [3, 0])])
def test_kip_511_fallback(advertised: tuple[int, int] | None, expected: list[int]) -> None:
    """A broker without ApiVersions v3 answers in v0 with UNSUPPORTED_VERSION and (perhaps)
    its own range; the client retries with that version, or v0."""

    async def old_broker(header: RequestHeader, body: dict[str, Any]) -> Reply:
        if header.api_key == ApiKey.API_VERSIONS and header.api_version > 2:
            keys = (
                []
                if advertised is None
                else [{"api_key": 18, "min_version": advertised[0], "max_version": advertised[1]}]
            )
            return 0, {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": keys}
        if header.api_key == ApiKey.API_VERSIONS:
            keys = all_api_versions(API_VERSIONS=(0, 2), METADATA=(0, 8))
            return header.api_version, {"error_code": 0, "api_keys": keys}
        return await default_handler(header, body)

    async def main() -> None:
        async with ScriptedPeer(old_broker) as peer, await peer.connect() as conn:
            assert [h.api_version for h, _ in peer.requests] == expected
            assert conn.api_versions[ApiKey.METADATA] == (0, 8)
            assert conn.choose_version(ApiKey.METADATA) == 8

    run(main())


def test_requests_are_pipelined() -> None:
    """Three requests are all written before the first answer comes back (a client that
    waited for each answer would deadlock here), and answers out of order (which no
    broker sends, but which must not be mismatched) find their requests by correlation
    id."""

    async def hold_three(header: RequestHeader, body: dict[str, Any]) -> Reply:
        if header.api_key != ApiKey.METADATA:
            return await default_handler(header, body)
        return None  # answered below, all at once

    async def main() -> None:
        async with ScriptedPeer(hold_three) as peer, await peer.connect() as conn:
            tasks = [
                asyncio.create_task(conn.request(ApiKey.METADATA, {"topics": [{"name": n}]}))
                for n in ("a", "b", "c")
            ]
            await peer.received(4)
            assert not any(t.done() for t in tasks)
            # answer the metadata requests in reverse order, each naming its topic
            writer = peer.writers[0]
            for header, body in reversed(peer.requests[1:]):
                response = {"brokers": [], "topics": [{"name": body["topics"][0]["name"]}]}
                chunks = codec.encode_response(
                    header.api_key, header.api_version, header.correlation_id, response
                )
                writer.write(b"".join(chunks))
            results = await asyncio.gather(*tasks)
            assert [r["topics"][0]["name"] for r in results] == ["a", "b", "c"]

    run(main())


def test_produce_with_acks_0_expects_no_answer() -> None:
    async def main() -> None:
        async with ScriptedPeer() as peer, await peer.connect() as conn:
            peer.handler = _no_answer_to_produce
            assert await conn.request(ApiKey.PRODUCE, {"acks": 0, "topic_data": []}) == {}
            metadata = await conn.request(ApiKey.METADATA, {"topics": None})
            assert metadata["cluster_id"] == "c"
            assert [h.api_key for h, _ in peer.requests] == [18, 0, 3]

    run(main())


async def _no_answer_to_produce(header: RequestHeader, body: dict[str, Any]) -> Reply:
    if header.api_key == ApiKey.PRODUCE:
        assert body["acks"] == 0
        return None
    return await default_handler(header, body)


async def _silent_metadata(header: RequestHeader, body: dict[str, Any]) -> Reply:
    if header.api_key == ApiKey.METADATA:
        return None
    return await default_handler(header, body)


def test_close_fails_pending_requests() -> None:
    async def main() -> None:
        async with ScriptedPeer(_silent_metadata) as peer:
            conn = await peer.connect()
            pending = asyncio.create_task(conn.request(ApiKey.METADATA, {"topics": None}))
            await peer.received(2)
            await conn.close()
            with pytest.raises(KafkaConnectionError, match="was closed"):
                await pending
            assert conn.closed
            with pytest.raises(KafkaConnectionError):
                await conn.request(ApiKey.METADATA, {"topics": None})
            await conn.close()  # closing twice is harmless

    run(main())


def test_broker_closing_fails_pending_requests() -> None:
    async def hang_up(header: RequestHeader, body: dict[str, Any]) -> Reply:
        if header.api_key == ApiKey.METADATA:
            return CLOSE
        return await default_handler(header, body)

    async def main() -> None:
        async with ScriptedPeer(hang_up) as peer, await peer.connect() as conn:
            with pytest.raises(KafkaConnectionError, match="closed by the broker"):
                await conn.request(ApiKey.METADATA, {"topics": None})
            assert conn.closed

    run(main())


def test_request_timeout_closes_the_connection() -> None:
    async def main() -> None:
        async with ScriptedPeer(_silent_metadata) as peer, await peer.connect() as conn:
            with pytest.raises(KafkaTimeoutError, match=r"METADATA request .* timed out"):
                await conn.request(ApiKey.METADATA, {"topics": None}, response_timeout=0.2)
            assert conn.closed

    run(main())


def test_connect_timeout_when_the_peer_never_answers() -> None:
    async def mute(header: RequestHeader, body: dict[str, Any]) -> Reply:
        return None

    async def main() -> None:
        async with ScriptedPeer(mute) as peer:
            with pytest.raises(KafkaConnectionError, match="no ApiVersions response"):
                await peer.connect(connect_timeout=0.3)

    run(main())


def test_no_common_version() -> None:
    async def picky(header: RequestHeader, body: dict[str, Any]) -> Reply:
        if header.api_key == ApiKey.API_VERSIONS:
            keys = [k for k in all_api_versions(METADATA=(50, 60)) if k["api_key"] != 19]
            return header.api_version, {"error_code": 0, "api_keys": keys}
        return await default_handler(header, body)

    async def main() -> None:
        async with ScriptedPeer(picky) as peer, await peer.connect() as conn:
            with pytest.raises(KafkaError, match="no common version of METADATA") as info:
                await conn.request(ApiKey.METADATA, {"topics": None})
            assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
            with pytest.raises(KafkaError, match="does not support CREATE_TOPICS"):
                conn.choose_version(ApiKey.CREATE_TOPICS)
            assert not conn.closed

    run(main())
