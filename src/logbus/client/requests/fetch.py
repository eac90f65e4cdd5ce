"""Fetch v4-17, the one builder and reader for every fetcher: the consumer (isolation
level, rack, leader epochs), the admin tools and the Spark source, and next the replica
fetcher (replica id and epoch, log start offset, sessions).

v4 is the first version that returns record batches v2 without down-conversion. From v13
topics are named by id only: a request goes out at v13+ only when every topic's id is
known (from metadata), else it is capped at v12, and the reader maps ids back to names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, TypeVar
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.metadata import ZERO_UUID
from logbus.client.requests.common import (
    fill_missing,
    require_version,
    send,
    value,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis, fetch_response
from logbus.protocol.messages.fetch_request import FetchPartition, FetchRequest
from logbus.records.batch import BatchHeader, InvalidBatch, split_batches
from logbus.records.reader import iter_record_set
from logbus.records.record import Record
from logbus.types import TopicPartition

MIN_VERSION = 4
LAST_VERSION_BY_NAME = 12
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
P = TypeVar("P")


class FetchPosition(NamedTuple):
    """Where to read one partition: the offset, the leader epoch the fetcher believes
    current (fencing, KIP-320) and the epoch of the last record it fetched (truncation
    detection, KIP-595); -1 when unknown. `log_start_offset` is a follower's own."""

    offset: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """The request-wide fields. `replica_id`/`replica_epoch` are a follower's (a consumer
    sends -1); `session_id` 0 with `session_epoch` -1 is a sessionless full fetch."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    isolation_level: int = READ_UNCOMMITTED
    rack_id: str = ""
    replica_id: int = -1
    replica_epoch: int = -1
    session_id: int = 0
    session_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedData:
    """One partition of a Fetch response as the broker sent it: the record set is left
    undecoded (a view of the response). `aborted_transactions` holds (producer id, first
    offset) pairs, or None when the broker sent none (read_uncommitted)."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]] | None
    preferred_read_replica: int
    records: bytes | memoryview | None
    # (epoch, end offset) a leader sends a follower whose log diverged (v12+; an epoch
    # of -1, the field's default, is no divergence)
    diverging_epoch: tuple[int, int] | None = None


class FetchResponse(NamedTuple):
    """The top-level error (a session error, or NONE) and each partition's data."""

    error_code: int
    partitions: dict[TopicPartition, FetchedData]


def fetch_version(
    conn: Connection, topics: Mapping[TopicPartition, object], topic_ids: Mapping[str, UUID]
) -> int:
    """The newest Fetch version to use: v13+ only if every topic's id is known."""
    by_id = all(topic_ids.get(topic, ZERO_UUID).int for topic in {t for t, _ in topics})
    return require_version(conn, ApiKey.FETCH, MIN_VERSION, None if by_id else LAST_VERSION_BY_NAME)


def build_fetch(
    version: int,
    positions: Mapping[TopicPartition, FetchPosition],
    options: FetchOptions,
    topic_ids: Mapping[str, UUID] | None = None,
) -> FetchRequest:
    """A full fetch of `positions`; topics carry both their name (v4-12) and id (v13+)."""
    ids = topic_ids or {}
    max_bytes = options.partition_max_bytes
    topics: dict[str, list[FetchPartition]] = {}
    for (topic, partition), position in positions.items():  # by_topic, inlined: hot
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "current_leader_epoch": position.current_leader_epoch,
                "fetch_offset": position.offset,
                "last_fetched_epoch": position.last_fetched_epoch,
                "log_start_offset": position.log_start_offset,
                "partition_max_bytes": max_bytes,
            }
        )
    return {
        "replica_id": options.replica_id,
        "replica_state": {"replica_id": options.replica_id, "replica_epoch": options.replica_epoch},
        "max_wait_ms": options.max_wait_ms,
        "min_bytes": options.min_bytes,
        "max_bytes": options.max_bytes,
        "isolation_level": options.isolation_level,
        "session_id": options.session_id,
        "session_epoch": options.session_epoch,
        "topics": [
            {"topic": t, "topic_id": ids.get(t, ZERO_UUID), "partitions": ps}
            for t, ps in topics.items()
        ],
        "forgotten_topics_data": [],
        "rack_id": options.rack_id,
    }


def read_fetch(
    response: fetch_response.FetchResponse,
    version: int,
    topic_ids: Mapping[str, UUID] | None = None,
) -> FetchResponse:
    """Each partition's data keyed by (topic name, partition); at v13+ topics come by id
    and are named from `topic_ids` (ids it does not know are left out)."""
    names = {topic_id: name for name, topic_id in (topic_ids or {}).items()}
    partitions: dict[TopicPartition, FetchedData] = {}
    for t in response["responses"]:
        if version <= LAST_VERSION_BY_NAME:
            name = t["topic"]
        elif (found := names.get(t["topic_id"])) is not None:
            name = found
        else:
            continue
        for p in t["partitions"]:
            aborted = p["aborted_transactions"]
            diverging = p.get("diverging_epoch")
            partitions[TopicPartition(name, p["partition_index"])] = FetchedData(
                p["error_code"],
                p["high_watermark"],
                p["last_stable_offset"],
                p["log_start_offset"],
                None
                if aborted is None
                else [(a["producer_id"], a["first_offset"]) for a in aborted],
                p["preferred_read_replica"],
                p["records"],
                None
                if diverging is None or diverging["epoch"] < 0
                else (diverging["epoch"], diverging["end_offset"]),
            )
    return FetchResponse(response.get("error_code", ErrorCode.NONE), partitions)


async def fetch_partitions(
    conn: Connection,
    positions: Mapping[TopicPartition, FetchPosition],
    options: FetchOptions,
    topic_ids: Mapping[str, UUID] | None = None,
) -> FetchResponse:
    """One Fetch request to `conn`'s broker, at the newest version both sides support
    (v13+ when every topic's id is in `topic_ids`)."""
    ids = topic_ids or {}
    version = fetch_version(conn, positions, ids)
    response = await send(
        conn,
        apis.FETCH,
        build_fetch(version, positions, options, ids),
        version,
        response_timeout=conn.request_timeout + options.max_wait_ms / 1000,
    )
    return read_fetch(response, version, ids)


# --- fetching for tools: records decoded, or batches split ------------------------------


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """What a fetch returned for one partition: its data batches (control batches left
    out, records before the fetch offset dropped) and where the next fetch starts."""

    batches: list[tuple[BatchHeader, list[Record]]]
    next_offset: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int

    @property
    def records(self) -> list[Record]:
        return [record for _, records in self.batches for record in records]


@dataclass(frozen=True, slots=True)
class RawFetchedPartition:
    """Like `FetchedPartition`, with each whole data batch left undecoded: a view of its
    bytes in the response and its parsed header (control batches left out). The caller
    decodes them (`records.reader.decode_record_tuples`) and drops records before the
    fetch offset, which the first batch may hold."""

    batches: list[tuple[memoryview, BatchHeader]]
    next_offset: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


async def fetch(
    conn: Connection,
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int = 500,
    max_bytes: int = 1024 * 1024,
    *,
    topic_id: UUID | None = None,
) -> FetchedPartition:
    """Records of one partition from `offset` on (from its leader). Without a topic id the
    request is capped at Fetch v12, the last to name topics."""
    ids = {topic: topic_id} if topic_id is not None else {}
    options = FetchOptions(max_wait_ms, max_bytes=max_bytes, partition_max_bytes=max_bytes)
    tp = TopicPartition(topic, partition)
    results = await _fetch(conn, {tp: offset}, options, ids, _decoded)
    return value(results[tp])


DEFAULT_OPTIONS = FetchOptions()


async def fetch_many_raw(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    options: FetchOptions = DEFAULT_OPTIONS,
    topic_ids: Mapping[str, UUID] | None = None,
) -> dict[TopicPartition, RawFetchedPartition | KafkaError]:
    """A sessionless Fetch for several partitions led by `conn`'s broker, each data batch
    left undecoded (headers parsed, records not)."""
    return await _fetch(conn, offsets, options, topic_ids or {}, _split)


async def _fetch(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    options: FetchOptions,
    topic_ids: Mapping[str, UUID],
    convert: Callable[[FetchedData, int], P],
) -> dict[TopicPartition, P | KafkaError]:
    positions = {tp: FetchPosition(offset) for tp, offset in offsets.items()}
    response = await fetch_partitions(conn, positions, options, topic_ids)
    check(response.error_code, "Fetch")
    out: dict[TopicPartition, P | KafkaError] = {}
    for key, data in response.partitions.items():
        if key not in offsets:
            continue
        name, partition = key
        if data.error_code != ErrorCode.NONE:
            out[key] = KafkaError(data.error_code, f"fetching {name}-{partition}")
            continue
        try:
            out[key] = convert(data, offsets[key])
        except InvalidBatch as exc:
            out[key] = KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{name}-{partition}: {exc}")
    fill_missing(out, offsets, "Fetch")
    return out


def _decoded(data: FetchedData, offset: int) -> FetchedPartition:
    batches: list[tuple[BatchHeader, list[Record]]] = []
    next_offset = offset
    if data.records:
        for header, records in iter_record_set(data.records):
            next_offset = max(next_offset, header.next_offset)
            if header.is_control:
                continue
            # A batch starts where its producer started it, so its first records may
            # precede the offset asked for (the broker sends whole batches).
            kept = [r for r in records if r.offset >= offset]
            if kept:
                batches.append((header, kept))
    return FetchedPartition(
        batches, next_offset, data.high_watermark, data.last_stable_offset,
        data.log_start_offset,
    )


def _split(data: FetchedData, offset: int) -> RawFetchedPartition:
    batches: list[tuple[memoryview, BatchHeader]] = []
    next_offset = offset
    if data.records:
        view = memoryview(data.records)
        for position, header in split_batches(view):
            next_offset = max(next_offset, header.next_offset)
            if not header.is_control and header.next_offset > offset:
                batches.append((view[position : position + header.size], header))
    return RawFetchedPartition(
        batches, next_offset, data.high_watermark, data.last_stable_offset,
        data.log_start_offset,
    )
