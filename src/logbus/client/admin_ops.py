"""The few requests the `logbus` command needs, each on one given connection.

Each function builds a request body, sends it with `Connection.request` at the newest
version both sides support, and turns error codes into `KafkaError` (named by its
ErrorCode, with the broker's message when it sent one). Routing (which broker leads a
partition, which is the controller) is `logbus.client.cluster.Cluster`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.metadata import ZERO_UUID, BrokerInfo, ClusterMetadata, parse_metadata
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.batch import BatchHeader, InvalidBatch, split_batches
from logbus.records.reader import iter_record_set
from logbus.records.record import Record

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3  # the record with the largest timestamp (ListOffsets v7+, KIP-734)
DEFAULT_TIMEOUT_MS = 30_000
# Config resource types.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
HIGH_WATERMARK = -1  # DeleteRecords: everything below the high watermark
# Produce v3 is the first to carry record batches v2, and Fetch v4 the first to return
# them without down-conversion; from Fetch v13 topics are named by id only.
_MIN_PRODUCE_VERSION = 3
_MIN_FETCH_VERSION = 4
_LAST_FETCH_BY_NAME = 12

TopicPartition = tuple[str, int]
T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """A topic CreateTopics made (or would make, when only validating), with the configs
    it was given (v5+: every config with its value)."""

    name: str
    topic_id: UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """ListOffsets' answer for one partition: the offset, the timestamp of its record
    (-1 when not looked up by time) and the leader epoch (-1 if unknown)."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int


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


def _require(conn: Connection, api_key: ApiKey, minimum: int, max_version: int | None) -> int:
    version = conn.choose_version(api_key, max_version)
    if version < minimum:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"broker {conn.address} supports {api_key.name} only up to v{version}; "
            f"v{minimum} or later is needed",
        )
    return version


async def metadata(
    conn: Connection, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
) -> ClusterMetadata:
    """Brokers, controller, and the given topics (every topic if `topics` is None).
    Per-topic errors are kept in TopicInfo.error_code; `ClusterMetadata.topic()` raises."""
    version = conn.choose_version(ApiKey.METADATA)
    requested: list[dict[str, Any]] | None
    if topics is None:
        requested = None if version >= 1 else []
    else:
        requested = [{"name": name} for name in topics]
    body = {"topics": requested, "allow_auto_topic_creation": allow_auto_topic_creation}
    return parse_metadata(await conn.request(ApiKey.METADATA, body, version))


def new_topic(
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    configs: Mapping[str, str | None] | None = None,
    assignments: Mapping[int, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """One topic of a CreateTopics request (-1 partitions or replication factor: the
    broker's default; with `assignments`, partition -> replica broker ids, both are -1)."""
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "assignments": [
            {"partition_index": p, "broker_ids": list(ids)}
            for p, ids in sorted((assignments or {}).items())
        ],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


async def create_topics(
    conn: Connection,
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    configs: Mapping[str, str] | None = None,
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> CreatedTopic:
    """Create one topic (-1 partitions or replication factor: the broker's default).
    Must be sent to the controller."""
    topic = new_topic(name, partitions, replication_factor, configs)
    results = await create_topics_many(
        conn, [topic], validate_only=validate_only, timeout_ms=timeout_ms
    )
    return _value(results[name])


async def create_topics_many(
    conn: Connection,
    topics: Sequence[Mapping[str, Any]],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[str, CreatedTopic | KafkaError]:
    """CreateTopics for several topics (each made by `new_topic`), on the controller:
    per topic what was created, or its error."""
    body = {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}
    response = await conn.request(
        ApiKey.CREATE_TOPICS, body, response_timeout=conn.request_timeout + timeout_ms / 1000
    )
    out: dict[str, CreatedTopic | KafkaError] = {}
    for result in response["topics"]:
        name = result["name"]
        if result["error_code"] != ErrorCode.NONE:
            out[name] = KafkaError(result["error_code"], result["error_message"])
        else:
            out[name] = CreatedTopic(
                name,
                result["topic_id"],
                result["num_partitions"],
                result["replication_factor"],
                {c["name"]: c["value"] for c in result["configs"]},
            )
    _fill_missing(out, [t["name"] for t in topics], "CreateTopics")
    return out


async def delete_topics(
    conn: Connection, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> None:
    """Delete topics by name; raises the first error. Must be sent to the controller."""
    for value in (await delete_topics_many(conn, names, timeout_ms=timeout_ms)).values():
        _value(value)


async def delete_topics_many(
    conn: Connection, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> dict[str, KafkaError | None]:
    """DeleteTopics by name, on the controller: per topic None, or its error."""
    body = {
        "topics": [{"name": name} for name in names],  # v6+
        "topic_names": list(names),  # v0-5
        "timeout_ms": timeout_ms,
    }
    response = await conn.request(
        ApiKey.DELETE_TOPICS, body, response_timeout=conn.request_timeout + timeout_ms / 1000
    )
    out: dict[str, KafkaError | None] = {}
    for result in response["responses"]:
        name = result["name"]
        if result["error_code"] != ErrorCode.NONE:
            message = result["error_message"]
            if result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                message = f"Topic '{name}' does not exist"
            out[name] = KafkaError(result["error_code"], message or f"Topic '{name}'")
        else:
            out[name] = None
    _fill_missing(out, names, "DeleteTopics")
    return out


async def create_partitions(
    conn: Connection,
    name: str,
    total: int,
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> None:
    """Grow a topic to `total` partitions, placed by the broker. Must go to the controller."""
    results = await create_partitions_many(
        conn, {name: (total, None)}, validate_only=validate_only, timeout_ms=timeout_ms
    )
    _value(results[name])


async def create_partitions_many(
    conn: Connection,
    topics: Mapping[str, tuple[int, Sequence[Sequence[int]] | None]],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[str, KafkaError | None]:
    """CreatePartitions on the controller: topic -> (new total, replica broker ids of each
    new partition or None to let the broker place them); per topic None, or its error."""
    body = {
        "topics": [
            {
                "name": name,
                "count": total,
                "assignments": None
                if assignments is None
                else [{"broker_ids": list(ids)} for ids in assignments],
            }
            for name, (total, assignments) in topics.items()
        ],
        "timeout_ms": timeout_ms,
        "validate_only": validate_only,
    }
    response = await conn.request(
        ApiKey.CREATE_PARTITIONS, body, response_timeout=conn.request_timeout + timeout_ms / 1000
    )
    out: dict[str, KafkaError | None] = {}
    for result in response["results"]:
        code = result["error_code"]
        out[result["name"]] = (
            None if code == ErrorCode.NONE else KafkaError(code, result["error_message"])
        )
    _fill_missing(out, topics, "CreatePartitions")
    return out


async def describe_cluster(conn: Connection) -> ClusterMetadata:
    """Brokers, controller and cluster id from DescribeCluster (KIP-700), or from a
    Metadata request for no topics on a broker without it."""
    try:
        version = conn.choose_version(ApiKey.DESCRIBE_CLUSTER)
    except KafkaError as exc:
        if exc.code != ErrorCode.UNSUPPORTED_VERSION:
            raise
        return await metadata(conn, [])
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    response = await conn.request(ApiKey.DESCRIBE_CLUSTER, body, version)
    check(response["error_code"], response["error_message"])
    brokers = {
        b["broker_id"]: BrokerInfo(b["broker_id"], b["host"], b["port"], b["rack"])
        for b in response["brokers"]
    }
    return ClusterMetadata(response["cluster_id"], response["controller_id"], brokers, {})


@dataclass(frozen=True, slots=True)
class ConfigSynonymInfo:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigInfo:
    """One DescribeConfigs entry; `source` and `config_type` are the protocol's ids."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    config_type: int
    synonyms: list[ConfigSynonymInfo]
    documentation: str | None


async def describe_configs(
    conn: Connection,
    resource_type: int,
    name: str,
    names: Sequence[str] | None = None,
    *,
    include_synonyms: bool = True,
    include_documentation: bool = False,
) -> list[ConfigInfo]:
    """Every config of one resource (or only `names`), as the broker describes them.
    A BROKER resource must go to that broker (named "": the cluster-wide defaults)."""
    version = _require(conn, ApiKey.DESCRIBE_CONFIGS, 1, None)
    body = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configuration_keys": list(names) if names else None,
            }
        ],
        "include_synonyms": include_synonyms,
        "include_documentation": include_documentation,
    }
    response = await conn.request(ApiKey.DESCRIBE_CONFIGS, body, version)
    [result] = response["results"]
    check(result["error_code"], result["error_message"])
    return [
        ConfigInfo(
            entry["name"],
            entry["value"],
            entry["config_source"],
            entry["is_sensitive"],
            entry["read_only"],
            entry.get("config_type", 0) or 0,
            [ConfigSynonymInfo(s["name"], s["value"], s["source"]) for s in entry["synonyms"]],
            entry.get("documentation"),
        )
        for entry in result["configs"]
    ]


async def incremental_alter_configs(
    conn: Connection,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool = False,
) -> None:
    """Apply (config name, OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT, value) operations to one
    resource's dynamic configs. A BROKER resource must go to that broker."""
    entries = [{"name": n, "config_operation": op, "value": value} for n, op, value in ops]
    await _alter_resource(
        conn, ApiKey.INCREMENTAL_ALTER_CONFIGS, resource_type, name, entries, validate_only
    )


async def alter_configs(
    conn: Connection,
    resource_type: int,
    name: str,
    configs: Mapping[str, str],
    *,
    validate_only: bool = False,
) -> None:
    """Replace the whole set of one resource's dynamic configs (the legacy AlterConfigs)."""
    entries = [{"name": n, "value": v} for n, v in configs.items()]
    await _alter_resource(conn, ApiKey.ALTER_CONFIGS, resource_type, name, entries, validate_only)


async def _alter_resource(
    conn: Connection,
    api_key: ApiKey,
    resource_type: int,
    name: str,
    configs: list[dict[str, Any]],
    validate_only: bool,
) -> None:
    """(Incremental)AlterConfigs of one resource; raises its error."""
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": configs}],
        "validate_only": validate_only,
    }
    version = _require(conn, api_key, 0, None)
    response = await conn.request(api_key, body, version)
    [result] = response["responses"]
    check(result["error_code"], result["error_message"])


async def delete_records(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, int | KafkaError]:
    """Delete the records below each offset (HIGH_WATERMARK: below the high watermark) of
    partitions led by `conn`'s broker; returns each new low watermark, or the error."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    body = {
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }
    version = _require(conn, ApiKey.DELETE_RECORDS, 0, None)
    response = await conn.request(ApiKey.DELETE_RECORDS, body, version)
    out: dict[TopicPartition, int | KafkaError] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], f"deleting records of {key[0]}-{key[1]}")
            else:
                out[key] = p["low_watermark"]
    _fill_missing(out, offsets, "DeleteRecords")
    return out


async def list_offsets(conn: Connection, topic: str, partition: int, timestamp: int) -> int:
    """The offset for a timestamp: EARLIEST (-2), LATEST (-1), or the first offset whose
    timestamp is at least `timestamp` ms (-1 if there is none). Must go to the leader."""
    result = await list_offsets_many(conn, {(topic, partition): timestamp})
    return _value(result[(topic, partition)])


async def list_offsets_many(
    conn: Connection, requests: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | KafkaError]:
    """ListOffsets for several partitions led by the broker at the other end of `conn`."""
    found = await list_offsets_info(conn, requests)
    return {
        key: value if isinstance(value, KafkaError) else value.offset
        for key, value in found.items()
    }


async def list_offsets_info(
    conn: Connection,
    requests: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    """ListOffsets (EARLIEST, LATEST, MAX_TIMESTAMP or a timestamp in ms) for partitions
    led by `conn`'s broker: per partition the offset with its timestamp and leader epoch.
    `isolation_level` 1 (read_committed) stops LATEST at the last stable offset."""
    version = conn.choose_version(ApiKey.LIST_OFFSETS)
    if MAX_TIMESTAMP in requests.values() and version < 7:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"broker {conn.address} cannot look up the offset of the largest timestamp",
        )
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), timestamp in requests.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1}
        )
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }
    response = await conn.request(ApiKey.LIST_OFFSETS, body, version)
    out: dict[TopicPartition, ListedOffset | KafkaError] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], f"ListOffsets {key[0]}-{key[1]}")
            elif version == 0:
                offsets = p["old_style_offsets"]
                out[key] = ListedOffset(offsets[0] if offsets else -1, -1, -1)
            else:
                out[key] = ListedOffset(p["offset"], p["timestamp"], p["leader_epoch"])
    _fill_missing(out, requests, "ListOffsets")
    return out


async def produce(
    conn: Connection,
    topic: str,
    partition: int,
    batch: bytes,
    acks: int = -1,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> ProduceResult | None:
    """Append one record batch (v2 bytes) to a partition, on its leader. With acks=0 the
    broker does not answer and this returns None once the request is written."""
    results = await produce_many(conn, {(topic, partition): batch}, acks, timeout_ms=timeout_ms)
    if results is None:
        return None
    value = results[(topic, partition)]
    if isinstance(value, KafkaError):
        raise value
    return value


async def produce_many(
    conn: Connection,
    batches: Mapping[TopicPartition, bytes | bytearray | memoryview],
    acks: int = -1,
    *,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[TopicPartition, ProduceResult | KafkaError] | None:
    """One Produce request carrying a batch for each partition (all led by `conn`'s broker).
    Returns per-partition results or errors, or None with acks=0."""
    version = _require(conn, ApiKey.PRODUCE, _MIN_PRODUCE_VERSION, None)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), batch in batches.items():
        topics.setdefault(topic, []).append({"index": partition, "records": batch})
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
    }
    timeout = conn.request_timeout + timeout_ms / 1000
    response = await conn.request(ApiKey.PRODUCE, body, version, response_timeout=timeout)
    if acks == 0:
        return None
    out: dict[TopicPartition, ProduceResult | KafkaError] = {}
    for t in response["responses"]:
        for p in t["partition_responses"]:
            key = (t["name"], p["index"])
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], _produce_error_message(key, p))
            else:
                out[key] = ProduceResult(
                    p["base_offset"], p["log_append_time_ms"], p["log_start_offset"]
                )
    _fill_missing(out, batches, "Produce")
    return out


def _produce_error_message(key: TopicPartition, p: dict[str, Any]) -> str:
    parts = [p["error_message"]] if p["error_message"] else []
    parts += [
        f"record {e['batch_index']}: {e['batch_index_error_message']}" for e in p["record_errors"]
    ]
    return "; ".join(parts) or f"producing to {key[0]}-{key[1]}"


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
    results = await fetch_many(
        conn, {(topic, partition): offset}, max_wait_ms, max_bytes, max_bytes, topic_ids=ids
    )
    value = results[(topic, partition)]
    if isinstance(value, KafkaError):
        raise value
    return value


async def fetch_many(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    max_wait_ms: int = 500,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    *,
    topic_ids: Mapping[str, UUID] | None = None,
    min_bytes: int = 1,
) -> dict[TopicPartition, FetchedPartition | KafkaError]:
    """A sessionless Fetch for several partitions led by `conn`'s broker."""
    return await _fetch(
        conn, offsets, max_wait_ms, max_bytes, partition_max_bytes, topic_ids, min_bytes,
        _fetched,
    )


async def fetch_many_raw(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    max_wait_ms: int = 500,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    *,
    topic_ids: Mapping[str, UUID] | None = None,
    min_bytes: int = 1,
) -> dict[TopicPartition, RawFetchedPartition | KafkaError]:
    """`fetch_many` leaving the batches undecoded (headers parsed, records not)."""
    return await _fetch(
        conn, offsets, max_wait_ms, max_bytes, partition_max_bytes, topic_ids, min_bytes,
        _raw_fetched,
    )


async def _fetch(
    conn: Connection,
    offsets: Mapping[TopicPartition, int],
    max_wait_ms: int,
    max_bytes: int,
    partition_max_bytes: int,
    topic_ids: Mapping[str, UUID] | None,
    min_bytes: int,
    convert: Callable[[dict[str, Any], int], P],
) -> dict[TopicPartition, P | KafkaError]:
    ids = dict(topic_ids or {})
    by_id = all(ids.get(topic, ZERO_UUID) != ZERO_UUID for topic, _ in offsets)
    version = _require(
        conn, ApiKey.FETCH, _MIN_FETCH_VERSION, None if by_id else _LAST_FETCH_BY_NAME
    )
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "fetch_offset": offset,
                "partition_max_bytes": partition_max_bytes,
            }
        )
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": t, "topic_id": ids.get(t, ZERO_UUID), "partitions": ps}
            for t, ps in topics.items()
        ],
    }
    timeout = conn.request_timeout + max_wait_ms / 1000
    response = await conn.request(ApiKey.FETCH, body, version, response_timeout=timeout)
    check(response["error_code"], "Fetch")
    names = {topic_id: name for name, topic_id in ids.items()}
    out: dict[TopicPartition, P | KafkaError] = {}
    for t in response["responses"]:
        name = t["topic"] if version <= _LAST_FETCH_BY_NAME else names.get(t["topic_id"], "")
        for p in t["partitions"]:
            key = (name, p["partition_index"])
            if key not in offsets:
                continue
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], f"fetching {name}-{key[1]}")
            else:
                try:
                    out[key] = convert(p, offsets[key])
                except InvalidBatch as exc:
                    out[key] = KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{name}-{key[1]}: {exc}")
    _fill_missing(out, offsets, "Fetch")
    return out


def _fetched(p: dict[str, Any], offset: int) -> FetchedPartition:
    batches: list[tuple[BatchHeader, list[Record]]] = []
    next_offset = offset
    data = p["records"]
    if data:
        for header, records in iter_record_set(data):
            next_offset = max(next_offset, header.next_offset)
            if header.is_control:
                continue
            # A batch starts where its producer started it, so its first records may
            # precede the offset asked for (the broker sends whole batches).
            kept = [r for r in records if r.offset >= offset]
            if kept:
                batches.append((header, kept))
    return FetchedPartition(
        batches=batches,
        next_offset=next_offset,
        high_watermark=p["high_watermark"],
        last_stable_offset=p["last_stable_offset"],
        log_start_offset=p["log_start_offset"],
    )


def _raw_fetched(p: dict[str, Any], offset: int) -> RawFetchedPartition:
    batches: list[tuple[memoryview, BatchHeader]] = []
    next_offset = offset
    data = p["records"]
    if data:
        view = memoryview(data)
        for position, header in split_batches(view):
            next_offset = max(next_offset, header.next_offset)
            if not header.is_control and header.next_offset > offset:
                batches.append((view[position : position + header.size], header))
    return RawFetchedPartition(
        batches=batches,
        next_offset=next_offset,
        high_watermark=p["high_watermark"],
        last_stable_offset=p["last_stable_offset"],
        log_start_offset=p["log_start_offset"],
    )


def _value(result: T | KafkaError) -> T:
    if isinstance(result, KafkaError):
        raise result
    return result


def _fill_missing(out: dict[Any, Any], asked: Iterable[str | TopicPartition], api: str) -> None:
    for key in asked:
        if key not in out:
            shown = key if isinstance(key, str) else f"{key[0]}-{key[1]}"
            out[key] = KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response left out {shown}"
            )
