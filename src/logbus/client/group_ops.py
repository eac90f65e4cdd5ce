"""Requests to a group coordinator: FindCoordinator, ListGroups, DescribeGroups,
DeleteGroups, OffsetFetch, OffsetCommit and OffsetDelete, and the consumer protocol's
subscription and assignment payloads (Kafka's `ConsumerProtocol`: an int16 version, then the body).

Like `admin_ops`, each function sends one request on a given connection and turns error
codes into `KafkaError`; `coordinator()` finds (and connects to) a group's coordinator,
waiting while the broker is still creating or loading `__consumer_offsets`.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.protocol import ApiKey, ErrorCode, schema

TopicPartition = tuple[str, int]

# Errors that mean "ask again, perhaps of another coordinator, soon".
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_GROUP_KEY_TYPE = 0
_RETRY_BACKOFF = 0.1
DEFAULT_COORDINATOR_WAIT = 20.0
# OffsetFetch v8 batches groups; one group at a time is all we need.
_OFFSET_FETCH_MAX_VERSION = 7
_SUBSCRIPTION_VERSION = 2
_ASSIGNMENT_VERSION = 1
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class GroupMemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMemberInfo]

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


# --- finding the coordinator ------------------------------------------------------------


async def coordinator(
    cluster: Cluster, group_id: str, *, wait: float = DEFAULT_COORDINATOR_WAIT
) -> Connection:
    """A connection to the coordinator of `group_id`, found with FindCoordinator; retried
    (for up to `wait` seconds) while the broker answers COORDINATOR_NOT_AVAILABLE."""
    node_id = await _coordinator_id(cluster, group_id, wait)
    md = cluster.metadata
    if md is None or node_id not in md.brokers:
        await cluster.refresh([])
    return await cluster.node(node_id)


async def coordinator_id(
    cluster: Cluster, group_id: str, *, wait: float = DEFAULT_COORDINATOR_WAIT
) -> int:
    """The broker id of the coordinator of `group_id` (FindCoordinator), retried for up to
    `wait` seconds while the broker answers COORDINATOR_NOT_AVAILABLE."""
    return await _coordinator_id(cluster, group_id, wait)


async def _coordinator_id(cluster: Cluster, group_id: str, wait: float) -> int:
    deadline = time.monotonic() + wait
    while True:
        conn = await cluster.bootstrap()
        version = conn.choose_version(ApiKey.FIND_COORDINATOR)
        body = {"key": group_id, "key_type": _GROUP_KEY_TYPE, "coordinator_keys": [group_id]}
        response = await conn.request(ApiKey.FIND_COORDINATOR, body, version)
        if version >= 4:
            found = response["coordinators"][0]
            code, message, node_id = found["error_code"], found["error_message"], found["node_id"]
        else:
            code, node_id = response["error_code"], response["node_id"]
            message = response.get("error_message")
        if code == ErrorCode.NONE:
            return int(node_id)
        if code not in COORDINATOR_ERRORS or time.monotonic() > deadline:
            raise KafkaError(code, message or f"FindCoordinator for group '{group_id}'")
        await asyncio.sleep(_RETRY_BACKOFF)


async def until_loaded(
    cluster: Cluster, group_id: str, *, wait: float = DEFAULT_COORDINATOR_WAIT
) -> Connection:
    """The group's coordinator, once it has loaded the group (OffsetFetch answers)."""
    deadline = time.monotonic() + wait
    while True:
        conn = await coordinator(cluster, group_id, wait=wait)
        try:
            await fetch_offsets(conn, group_id)
        except KafkaError as exc:
            if exc.code not in COORDINATOR_ERRORS or time.monotonic() > deadline:
                raise
            await asyncio.sleep(_RETRY_BACKOFF)
            continue
        return conn


# --- group administration ---------------------------------------------------------------


async def list_groups(conn: Connection, states: Sequence[str] = ()) -> list[ListedGroup]:
    """The groups a broker coordinates (with their state from ListGroups v4)."""
    version = conn.choose_version(ApiKey.LIST_GROUPS)
    if states and version < 4:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION, f"broker {conn.address} cannot filter groups by state"
        )
    body = {"states_filter": list(states), "types_filter": []}
    response = await conn.request(ApiKey.LIST_GROUPS, body, version)
    check(response["error_code"], "ListGroups")
    return [
        ListedGroup(g["group_id"], g["protocol_type"], g.get("group_state") or "")
        for g in response["groups"]
    ]


async def describe_group(conn: Connection, group_id: str) -> GroupDescription:
    """DescribeGroups for one group; a group that does not exist has state "Dead"."""
    described = (await describe_groups(conn, [group_id]))[group_id]
    if isinstance(described, KafkaError):
        raise described
    return described


async def describe_groups(
    conn: Connection, group_ids: Sequence[str]
) -> dict[str, GroupDescription | KafkaError]:
    """DescribeGroups for groups this coordinator owns: per group its description (state
    "Dead" if it does not exist), or its error."""
    body = {"groups": list(group_ids), "include_authorized_operations": False}
    response = await conn.request(ApiKey.DESCRIBE_GROUPS, body)
    out: dict[str, GroupDescription | KafkaError] = {}
    for described in response["groups"]:
        group_id = described["group_id"]
        code = described["error_code"]
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            out[group_id] = GroupDescription(group_id, "Dead", "", "", [])
            continue
        if code != ErrorCode.NONE:
            out[group_id] = KafkaError(code, f"DescribeGroups for group '{group_id}'")
            continue
        consumer = described["protocol_type"] == "consumer"
        members = [
            GroupMemberInfo(
                member_id=m["member_id"],
                group_instance_id=m.get("group_instance_id"),
                client_id=m["client_id"],
                client_host=m["client_host"],
                assignment=decode_assignment(m["member_assignment"]) if consumer else {},
            )
            for m in described["members"]
        ]
        out[group_id] = GroupDescription(
            group_id,
            described["group_state"],
            described["protocol_type"],
            described["protocol_data"],
            members,
        )
    _fill_missing(out, group_ids, "DescribeGroups")
    return out


async def delete_group(conn: Connection, group_id: str) -> None:
    result = (await delete_groups(conn, [group_id]))[group_id]
    if result is not None:
        raise result


async def delete_groups(
    conn: Connection, group_ids: Sequence[str]
) -> dict[str, KafkaError | None]:
    """DeleteGroups on their coordinator: per group None, or its error (NON_EMPTY_GROUP
    while it has members, GROUP_ID_NOT_FOUND if there is no such group)."""
    response = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": list(group_ids)})
    out: dict[str, KafkaError | None] = {}
    for result in response["results"]:
        group_id, code = result["group_id"], result["error_code"]
        out[group_id] = None if code == ErrorCode.NONE else KafkaError(code, f"Group '{group_id}'")
    _fill_missing(out, group_ids, "DeleteGroups")
    return out


def _fill_missing(out: dict[Any, Any], asked: Iterable[Any], api: str) -> None:
    for key in asked:
        if key not in out:
            out[key] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{api} response left out {key}")


# --- committed offsets ------------------------------------------------------------------


async def fetch_offsets(
    conn: Connection, group_id: str, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """The group's committed offsets (for `partitions`, or every one it has); partitions
    without a committed offset are left out."""
    found = await fetch_offsets_with_metadata(conn, group_id, partitions)
    return {tp: offset for tp, (offset, _) in found.items()}


async def fetch_offsets_with_metadata(
    conn: Connection, group_id: str, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, tuple[int, str]]:
    """Like `fetch_offsets`, with each offset's commit metadata."""
    version = conn.choose_version(ApiKey.OFFSET_FETCH, _OFFSET_FETCH_MAX_VERSION)
    topics: list[dict[str, Any]] | None = None
    if partitions is not None or version < 2:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    body = {"group_id": group_id, "topics": topics, "require_stable": False}
    response = await conn.request(ApiKey.OFFSET_FETCH, body, version)
    check(response.get("error_code", ErrorCode.NONE), f"OffsetFetch for group '{group_id}'")
    out: dict[TopicPartition, tuple[int, str]] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            check(p["error_code"], f"OffsetFetch {t['name']}-{p['partition_index']}")
            if p["committed_offset"] >= 0:
                out[(t["name"], p["partition_index"])] = (
                    p["committed_offset"],
                    p.get("metadata") or "",
                )
    return out


async def commit_offsets(
    conn: Connection,
    group_id: str,
    offsets: Mapping[TopicPartition, int | tuple[int, str]],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> None:
    """Commit offsets (each an offset, or (offset, metadata)); generation -1 and no member
    id commit as an admin or a consumer outside the group (the group must then have no
    members). Raises the first partition error."""
    results = await commit_offsets_each(
        conn,
        group_id,
        offsets,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id,
    )
    for result in results.values():
        if result is not None:
            raise result


async def commit_offsets_each(
    conn: Connection,
    group_id: str,
    offsets: Mapping[TopicPartition, int | tuple[int, str]],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> dict[TopicPartition, KafkaError | None]:
    """OffsetCommit, as `commit_offsets`: per partition None, or its error."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in offsets.items():
        offset, metadata = value if isinstance(value, tuple) else (value, "")
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_metadata": metadata,
            }
        )
    body = {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation_id,
        "member_id": member_id,
        "group_instance_id": group_instance_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    response = await conn.request(ApiKey.OFFSET_COMMIT, body)
    return _partition_results(response, offsets, "OffsetCommit")


async def delete_offsets(
    conn: Connection, group_id: str, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    """OffsetDelete (KIP-496): forget the group's committed offsets of `partitions`; per
    partition None, or its error (GROUP_SUBSCRIBED_TO_TOPIC while members consume it).
    A group-level error is raised."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append({"partition_index": partition})
    body = {
        "group_id": group_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    response = await conn.request(ApiKey.OFFSET_DELETE, body)
    check(response["error_code"], f"OffsetDelete for group '{group_id}'")
    return _partition_results(response, partitions, "OffsetDelete")


def _partition_results(
    response: dict[str, Any], asked: Iterable[TopicPartition], api: str
) -> dict[TopicPartition, KafkaError | None]:
    out: dict[TopicPartition, KafkaError | None] = {}
    for t in response["topics"]:
        for p in t["partitions"]:
            key = (t["name"], p["partition_index"])
            code = p["error_code"]
            out[key] = (
                None if code == ErrorCode.NONE else KafkaError(code, f"{api} {key[0]}-{key[1]}")
            )
    _fill_missing(out, asked, api)
    return out


# --- consumer protocol payloads ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's ConsumerProtocolSubscription: the topics it wants, its assignor's user
    data, the partitions it owns now (v1+) and the generation it owned them in (v2+)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


def encode_subscription(
    topics: Sequence[str],
    *,
    user_data: bytes | None = None,
    owned_partitions: Sequence[TopicPartition] = (),
    generation_id: int = -1,
) -> bytes:
    """A subscription as JoinGroup carries it (version 2: owned partitions and generation,
    which readers of older versions skip as trailing bytes)."""
    message = schema.message("ConsumerProtocolSubscription")
    owned: dict[str, list[int]] = {}
    for topic, partition in owned_partitions:
        owned.setdefault(topic, []).append(partition)
    body = {
        "topics": sorted(topics),
        "user_data": user_data,
        "owned_partitions": [
            {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(owned.items())
        ],
        "generation_id": generation_id,
        "rack_id": None,
    }
    return _VERSION.pack(_SUBSCRIPTION_VERSION) + message.encode(body, _SUBSCRIPTION_VERSION)


def decode_subscription(data: bytes | None) -> Subscription:
    """Any version of a subscription (an empty one for no data)."""
    body = _decode("ConsumerProtocolSubscription", data)
    if body is None:
        return Subscription([])
    user_data = body.get("user_data")
    return Subscription(
        topics=list(body["topics"]),
        user_data=bytes(user_data) if user_data is not None else None,
        owned_partitions=[
            (owned["topic"], partition)
            for owned in body.get("owned_partitions") or ()
            for partition in owned["partitions"]
        ],
        generation_id=body.get("generation_id", -1),
        rack_id=body.get("rack_id"),
    )


def encode_assignment(assignment: Mapping[str, Sequence[int]]) -> bytes:
    message = schema.message("ConsumerProtocolAssignment")
    body = {
        "assigned_partitions": [
            {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items())
        ],
        "user_data": None,
    }
    return _VERSION.pack(_ASSIGNMENT_VERSION) + message.encode(body, _ASSIGNMENT_VERSION)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    body = _decode("ConsumerProtocolAssignment", data)
    if body is None:
        return {}
    return {a["topic"]: sorted(a["partitions"]) for a in body["assigned_partitions"]}


def _decode(name: str, data: bytes | None) -> dict[str, Any] | None:
    if not data:
        return None
    message = schema.message(name)
    (version,) = _VERSION.unpack_from(data)
    # Newer versions only add fields at the end: read them as the newest version we know.
    version = min(version, message.valid_versions[1])
    decoded: dict[str, Any] = message.decode(bytes(data[_VERSION.size :]), version)
    return decoded
