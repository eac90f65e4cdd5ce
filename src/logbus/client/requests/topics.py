"""Topic administration, sent to the controller: CreateTopics v2-7, DeleteTopics v1-6
(by name), CreatePartitions v0-3. Each reads per topic the result or its error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import DEFAULT_TIMEOUT_MS, per_key, send, value
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.create_partitions_request import CreatePartitionsRequest
from logbus.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from logbus.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from logbus.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)
from logbus.protocol.messages.delete_topics_request import DeleteTopicsRequest
from logbus.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """A topic CreateTopics made (or would make, when only validating), with the configs
    it was given (v5+: every config with its value)."""

    name: str
    topic_id: UUID
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None] = field(default_factory=dict)


# --- CreateTopics -----------------------------------------------------------------------


def new_topic(
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    configs: Mapping[str, str | None] | None = None,
    assignments: Mapping[int, Sequence[int]] | None = None,
) -> CreatableTopic:
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


def build_create_topics(
    version: int,
    topics: Sequence[CreatableTopic],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> CreateTopicsRequest:
    """Topics made by `new_topic`."""
    return {"topics": list(topics), "timeout_ms": timeout_ms, "validate_only": validate_only}


def read_create_topics(
    response: CreateTopicsResponse, asked: Sequence[str]
) -> dict[str, CreatedTopic | KafkaError]:
    def created(result: CreatableTopicResult) -> CreatedTopic:
        return CreatedTopic(
            result["name"],
            result["topic_id"],
            result["num_partitions"],
            result["replication_factor"],
            {c["name"]: c["value"] for c in result["configs"] or ()},
        )

    results = ((result["name"], result) for result in response["topics"])
    return per_key(results, asked, "CreateTopics", created, _broker_message)


def _broker_message(
    name: str, result: CreatableTopicResult | CreatePartitionsTopicResult
) -> str | None:
    return result.get("error_message")


async def create_topics_many(
    conn: Connection,
    topics: Sequence[CreatableTopic],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[str, CreatedTopic | KafkaError]:
    """CreateTopics for several topics (each made by `new_topic`), on the controller:
    per topic what was created, or its error."""
    version = conn.choose_version(ApiKey.CREATE_TOPICS)
    body = build_create_topics(version, topics, validate_only=validate_only, timeout_ms=timeout_ms)
    response = await send(
        conn, apis.CREATE_TOPICS, body, version,
        response_timeout=conn.request_timeout + timeout_ms / 1000,
    )
    return read_create_topics(response, [t["name"] for t in topics])


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
    """Create one topic (-1 partitions or replication factor: the broker's default)."""
    topic = new_topic(name, partitions, replication_factor, configs)
    results = await create_topics_many(
        conn, [topic], validate_only=validate_only, timeout_ms=timeout_ms
    )
    return value(results[name])


# --- DeleteTopics -----------------------------------------------------------------------


def build_delete_topics(
    version: int, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> DeleteTopicsRequest:
    return {
        "topics": [{"name": name} for name in names],  # v6+
        "topic_names": list(names),  # v0-5
        "timeout_ms": timeout_ms,
    }


def read_delete_topics(
    response: DeleteTopicsResponse, asked: Sequence[str]
) -> dict[str, KafkaError | None]:
    def message(name: str, result: DeletableTopicResult) -> str:
        if result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return f"Topic '{name}' does not exist"
        return result.get("error_message") or f"Topic '{name}'"

    # Asked by name, each result carries its name (null only when asked by id, v6+).
    results = ((result["name"] or "", result) for result in response["responses"])
    return per_key(results, asked, "DeleteTopics", lambda _: None, message)


async def delete_topics_many(
    conn: Connection, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> dict[str, KafkaError | None]:
    """DeleteTopics by name, on the controller: per topic None, or its error."""
    version = conn.choose_version(ApiKey.DELETE_TOPICS)
    body = build_delete_topics(version, names, timeout_ms=timeout_ms)
    response = await send(
        conn, apis.DELETE_TOPICS, body, version,
        response_timeout=conn.request_timeout + timeout_ms / 1000,
    )
    return read_delete_topics(response, names)


async def delete_topics(
    conn: Connection, names: Sequence[str], *, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> None:
    """Delete topics by name; raises the first error."""
    for result in (await delete_topics_many(conn, names, timeout_ms=timeout_ms)).values():
        if result is not None:
            raise result


# --- CreatePartitions -------------------------------------------------------------------


def build_create_partitions(
    version: int,
    topics: Mapping[str, tuple[int, Sequence[Sequence[int]] | None]],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> CreatePartitionsRequest:
    """topic -> (new total, replica broker ids of each new partition or None to let the
    broker place them)."""
    return {
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


def read_create_partitions(
    response: CreatePartitionsResponse, asked: Mapping[str, object]
) -> dict[str, KafkaError | None]:
    results = ((result["name"], result) for result in response["results"])
    return per_key(results, asked, "CreatePartitions", lambda _: None, _broker_message)


async def create_partitions_many(
    conn: Connection,
    topics: Mapping[str, tuple[int, Sequence[Sequence[int]] | None]],
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[str, KafkaError | None]:
    """CreatePartitions on the controller: per topic None, or its error."""
    version = conn.choose_version(ApiKey.CREATE_PARTITIONS)
    body = build_create_partitions(
        version, topics, validate_only=validate_only, timeout_ms=timeout_ms
    )
    response = await send(
        conn, apis.CREATE_PARTITIONS, body, version,
        response_timeout=conn.request_timeout + timeout_ms / 1000,
    )
    return read_create_partitions(response, topics)


async def create_partitions(
    conn: Connection,
    name: str,
    total: int,
    *,
    validate_only: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> None:
    """Grow a topic to `total` partitions, placed by the broker."""
    results = await create_partitions_many(
        conn, {name: (total, None)}, validate_only=validate_only, timeout_ms=timeout_ms
    )
    if (error := results[name]) is not None:
        raise error
