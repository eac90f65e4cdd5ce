"""What every request module shares: choosing a version with a floor, and per-key results
(a value or a `KafkaError`) that never leave out a key that was asked for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar, cast

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.apis import Api
from logbus.types import TopicPartition

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Q = TypeVar("Q", bound=Mapping[str, object])  # a request's TypedDict
R = TypeVar("R")  # a response's TypedDict
# An item of a response carrying an error code: per_key reads that code (and the message)
# by a field name its caller gives, which differs between APIs, so the values are Any here;
# each caller's items are its response's TypedDict.
E = TypeVar("E", bound=Mapping[str, Any])
DEFAULT_TIMEOUT_MS = 30_000


def require_version(
    conn: Connection, api_key: ApiKey, minimum: int, max_version: int | None = None
) -> int:
    """The newest version of `api_key` both sides support, at least `minimum`."""
    version = conn.choose_version(api_key, max_version)
    if version < minimum:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"broker {conn.address} supports {api_key.name} only up to v{version}; "
            f"v{minimum} or later is needed",
        )
    return version


def send(
    conn: Connection,
    api: Api[Q, R],
    body: Q,
    version: int,
    *,
    response_timeout: float | None = None,
) -> Awaitable[R]:
    """`conn.request` for `api` (a constant of `logbus.protocol.messages.apis`, which pairs
    an API key with its request's and its response's TypedDicts): mypy checks the body
    against the request's type, and the answer is typed as the response's. The codec
    decodes by the key's schema, which mypy cannot follow: this cast is where the two
    meet (free at run time; the string keeps the generic alias from being built on every
    call)."""
    return cast(
        "Awaitable[R]",
        conn.request(api.key, body, version, response_timeout=response_timeout),
    )


async def exchange(
    conn: Connection,
    api: Api[Q, R],
    build: Callable[[int], Q],
    read: Callable[[R, int], T],
    max_version: int | None = None,
) -> T:
    """One request and its answer: the newest version of `api` both sides support (at
    most `max_version`), the body `build` makes for that version, and what `read` makes of
    the response (given the version too)."""
    version = conn.choose_version(api.key, max_version)
    return read(await send(conn, api, build(version), version), version)


def value(result: T | KafkaError) -> T:
    """The value of a per-key result, or raise its error."""
    if isinstance(result, KafkaError):
        raise result
    return result


def by_topic(entries: Iterable[tuple[TopicPartition, V]]) -> dict[str, list[V]]:
    """Per-partition request entries grouped under their topic, in first-seen order."""
    topics: dict[str, list[V]] = {}
    for (topic, _), entry in entries:
        topics.setdefault(topic, []).append(entry)
    return topics


def fill_missing(out: dict[K, T | KafkaError], asked: Iterable[K], api: str) -> None:
    """An UNKNOWN_SERVER_ERROR for every key asked for that the response left out."""
    for key in asked:
        if key not in out:
            shown = f"{key[0]}-{key[1]}" if isinstance(key, tuple) else key
            out[key] = KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response left out {shown}"
            )


def per_key(
    entries: Iterable[tuple[K, E]],
    asked: Iterable[K],
    api: str,
    read: Callable[[E], T],
    message: Callable[[K, E], str | None],
    error: str = "error_code",
) -> dict[K, T | KafkaError]:
    """A response's per-item results, from (key, item) pairs: each item read, or its
    error code (field `error`) as a `KafkaError` with `message`; none of those asked for
    left out."""
    out: dict[K, T | KafkaError] = {}
    for key, entry in entries:
        code = entry[error]
        out[key] = read(entry) if code == ErrorCode.NONE else KafkaError(code, message(key, entry))
    fill_missing(out, asked, api)
    return out


def per_partition(
    entries: Iterable[tuple[TopicPartition, E]],
    asked: Iterable[TopicPartition],
    api: str,
    read: Callable[[E], T],
    *,
    error: str = "error_code",
    message: Callable[[TopicPartition, E], str | None] | None = None,
) -> dict[TopicPartition, T | KafkaError]:
    """`per_key` over a response's partitions, given as (partition, item) pairs (the
    caller names the fields, so mypy checks them); by default an error names its
    partition, or is the item's `error_message`."""

    def named(key: TopicPartition, entry: E) -> str:
        return entry.get("error_message") or f"{api} {key[0]}-{key[1]}"

    return per_key(entries, asked, api, read, message or named, error)
