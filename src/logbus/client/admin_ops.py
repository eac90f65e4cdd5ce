"""The few requests the `logbus` command needs, each on one given connection.

Each function builds a request body, sends it with `Connection.request` at the newest
version both sides support, and turns error codes into `KafkaError` (named by its
ErrorCode, with the broker's message when it sent one). Routing (which broker leads a
partition, which is the controller) is `logbus.client.cluster.Cluster`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.metadata import ClusterMetadata, parse_metadata
from logbus.protocol import ApiKey, ErrorCode

EARLIEST = -2
LATEST = -1
DEFAULT_TIMEOUT_MS = 30_000
# Topic resource in DescribeConfigs; DYNAMIC_TOPIC_CONFIG is a topic's own override.
_RESOURCE_TOPIC = 2
_CONFIG_SOURCE_DYNAMIC_TOPIC = 1
# Produce v3 is the first to carry record batches v2.
_MIN_PRODUCE_VERSION = 3

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: UUID
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time: int
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
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }
    body = {"topics": [topic], "timeout_ms": timeout_ms, "validate_only": validate_only}
    response = await conn.request(ApiKey.CREATE_TOPICS, body)
    result = _only(response["topics"], name, "CreateTopics")
    check(result["error_code"], result["error_message"])
    return CreatedTopic(
        name, result["topic_id"], result["num_partitions"], result["replication_factor"]
    )


async def delete_topics(
    conn: Connection, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> None:
    """Delete topics by name; raises the first error. Must be sent to the controller."""
    body = {
        "topics": [{"name": name} for name in names],  # v6+
        "topic_names": list(names),  # v0-5
        "timeout_ms": timeout_ms,
    }
    response = await conn.request(ApiKey.DELETE_TOPICS, body)
    for result in response["responses"]:
        check(result["error_code"], result["error_message"] or f"Topic '{result['name']}'")


async def create_partitions(
    conn: Connection,
    name: str,
    total: int,
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> None:
    """Grow a topic to `total` partitions, placed by the broker. Must go to the controller."""
    body = {
        "topics": [{"name": name, "count": total, "assignments": None}],
        "timeout_ms": timeout_ms,
        "validate_only": validate_only,
    }
    response = await conn.request(ApiKey.CREATE_PARTITIONS, body)
    result = _only(response["results"], name, "CreatePartitions")
    check(result["error_code"], result["error_message"])


async def describe_topic_configs(
    conn: Connection, names: Sequence[str]
) -> dict[str, dict[str, str | None]]:
    """The configs set on each topic itself (not broker defaults), as kafka-topics shows
    them; a sensitive value is None."""
    body = {
        "resources": [
            {"resource_type": _RESOURCE_TOPIC, "resource_name": name, "configuration_keys": None}
            for name in names
        ],
    }
    version = conn.choose_version(ApiKey.DESCRIBE_CONFIGS)
    response = await conn.request(ApiKey.DESCRIBE_CONFIGS, body, version)
    found: dict[str, dict[str, str | None]] = {}
    for result in response["results"]:
        check(result["error_code"], result["error_message"])
        configs: dict[str, str | None] = {}
        for entry in result["configs"]:
            own = (
                entry["config_source"] == _CONFIG_SOURCE_DYNAMIC_TOPIC
                if version >= 1
                else not entry["is_default"]
            )
            if own:
                configs[entry["name"]] = None if entry["is_sensitive"] else entry["value"]
        found[result["resource_name"]] = dict(sorted(configs.items()))
    return found


async def list_offsets(conn: Connection, topic: str, partition: int, timestamp: int) -> int:
    """The offset for a timestamp: EARLIEST (-2), LATEST (-1), or the first offset whose
    timestamp is at least `timestamp` ms (-1 if there is none). Must go to the leader."""
    result = await list_offsets_many(conn, {(topic, partition): timestamp})
    value = result[(topic, partition)]
    if isinstance(value, KafkaError):
        raise value
    return value


async def list_offsets_many(
    conn: Connection, requests: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | KafkaError]:
    """ListOffsets for several partitions led by the broker at the other end of `conn`."""
    version = conn.choose_version(ApiKey.LIST_OFFSETS)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), timestamp in requests.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "timestamp": timestamp, "max_num_offsets": 1}
        )
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": DEFAULT_TIMEOUT_MS,
    }
    response = await conn.request(ApiKey.LIST_OFFSETS, body, version)
    out: dict[TopicPartition, int | KafkaError] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            if p["error_code"] != ErrorCode.NONE:
                out[key] = KafkaError(p["error_code"], f"ListOffsets {key[0]}-{key[1]}")
            elif version == 0:
                out[key] = p["old_style_offsets"][0] if p["old_style_offsets"] else -1
            else:
                out[key] = p["offset"]
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
    batches: Mapping[TopicPartition, bytes],
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
        f"record {e['batch_index']}: {e['batch_index_error_message']}"
        for e in p["record_errors"]
    ]
    return "; ".join(parts) or f"producing to {key[0]}-{key[1]}"


def _only(results: Iterable[dict[str, Any]], name: str, api: str) -> dict[str, Any]:
    for result in results:
        if result["name"] == name:
            return result
    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response has no result for {name!r}")


def _fill_missing(
    out: dict[TopicPartition, Any], asked: Iterable[TopicPartition], api: str
) -> None:
    for key in asked:
        if key not in out:
            out[key] = KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response left out {key[0]}-{key[1]}"
            )
