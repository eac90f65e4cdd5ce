"""What every request module shares: choosing a version with a floor, and per-key results
(a value or a `KafkaError`) that never leave out a key that was asked for."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.types import TopicPartition

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
Entry = dict[str, Any]
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


async def exchange(
    conn: Connection,
    api_key: ApiKey,
    build: Callable[[int], Entry],
    read: Callable[[Entry, int], T],
    max_version: int | None = None,
) -> T:
    """One request and its answer: the newest version of `api_key` both sides support (at
    most `max_version`), the body `build` makes for that version, and what `read` makes of
    the response (given the version too)."""
    version = conn.choose_version(api_key, max_version)
    return read(await conn.request(api_key, build(version), version), version)


def value(result: T | KafkaError) -> T:
    """The value of a per-key result, or raise its error."""
    if isinstance(result, KafkaError):
        raise result
    return result


def by_topic(entries: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[Any]]:
    """Per-partition request entries grouped under their topic, in first-seen order."""
    topics: dict[str, list[Any]] = {}
    for (topic, _), entry in entries:
        topics.setdefault(topic, []).append(entry)
    return topics


def topic_entries(
    entries: Iterable[tuple[TopicPartition, Any]], partitions: str = "partitions"
) -> list[Entry]:
    """A request's topics from per-partition entries: `{"name": topic, partitions: [...]}`
    each, in first-seen order."""
    return [{"name": topic, partitions: ps} for topic, ps in by_topic(entries).items()]


def fill_missing(out: dict[Any, Any], asked: Iterable[Any], api: str) -> None:
    """An UNKNOWN_SERVER_ERROR for every key asked for that the response left out."""
    for key in asked:
        if key not in out:
            shown = f"{key[0]}-{key[1]}" if isinstance(key, tuple) else key
            out[key] = KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response left out {shown}"
            )


def per_key(
    entries: Iterable[tuple[K, Entry]],
    asked: Iterable[K],
    api: str,
    read: Callable[[Entry], T],
    message: Callable[[K, Entry], str | None],
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
    topics: Iterable[Entry],
    asked: Iterable[TopicPartition],
    api: str,
    read: Callable[[Entry], T],
    *,
    partitions: str = "partitions",
    index: str = "partition_index",
    error: str = "error_code",
    message: Callable[[TopicPartition, Entry], str | None] | None = None,
) -> dict[TopicPartition, T | KafkaError]:
    """`per_key` over the partitions of a response's topics ("name", and `partitions`
    each numbered by `index`, its error code in `error`); by default an error names its
    partition."""

    def named(key: TopicPartition, entry: Entry) -> str:
        return entry.get("error_message") or f"{api} {key[0]}-{key[1]}"

    entries = ((TopicPartition(t["name"], p[index]), p) for t in topics for p in t[partitions])
    return per_key(entries, asked, api, read, message or named, error)
