"""Consumer-group offsets, on the group's coordinator: OffsetFetch v1-9 (one group; v8+
carry it in the batched `groups` form of KIP-709), OffsetCommit v2-9, OffsetDelete v0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.common import by_topic, per_partition, send
from logbus.client.requests.group_membership import NOT_A_MEMBER, MemberIdentity
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
)
from logbus.protocol.messages.offset_commit_response import OffsetCommitResponse
from logbus.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
)
from logbus.protocol.messages.offset_delete_response import OffsetDeleteResponse
from logbus.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)
from logbus.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseTopic,
)
from logbus.types import TopicPartition

_GROUPS_FROM = 8  # OffsetFetch: several groups per request (KIP-709)
_ALL_PARTITIONS_FROM = 2  # OffsetFetch: topics null asks for every committed partition


# --- OffsetFetch ------------------------------------------------------------------------


def build_offset_fetch(
    version: int,
    group_id: str,
    partitions: Sequence[TopicPartition] | None = None,
    *,
    require_stable: bool = False,
) -> OffsetFetchRequest:
    """The group's committed offsets of `partitions`, or of every partition (None; before
    v2, which cannot ask for every partition, of none)."""
    topics: list[OffsetFetchRequestTopic] | None = None
    if partitions is not None or version < _ALL_PARTITIONS_FROM:
        grouped = by_topic((tp, tp[1]) for tp in partitions or ())
        topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
    if version >= _GROUPS_FROM:
        return {
            "groups": [
                {"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": topics}
            ],
            "require_stable": require_stable,
        }
    return {"group_id": group_id, "topics": topics, "require_stable": require_stable}


def read_offset_fetch(
    response: OffsetFetchResponse, version: int, group_id: str
) -> dict[TopicPartition, tuple[int, str]]:
    """(offset, metadata) of each partition with a committed offset; raises the group's
    error or the first partition error."""
    topics: Sequence[OffsetFetchResponseTopic]
    if version >= _GROUPS_FROM:
        found = [g for g in response["groups"] if g["group_id"] == group_id]
        if not found:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"OffsetFetch response left out '{group_id}'"
            )
        error_code, topics = found[0].get("error_code", ErrorCode.NONE), found[0]["topics"]
    else:
        error_code, topics = response.get("error_code", ErrorCode.NONE), response["topics"]
    check(error_code, f"OffsetFetch for group '{group_id}'")
    out: dict[TopicPartition, tuple[int, str]] = {}
    for t in topics:
        for p in t["partitions"]:
            check(p["error_code"], f"OffsetFetch {t['name']}-{p['partition_index']}")
            if p["committed_offset"] >= 0:
                out[TopicPartition(t["name"], p["partition_index"])] = (
                    p["committed_offset"],
                    p.get("metadata") or "",
                )
    return out


async def fetch_offsets_with_metadata(
    conn: Connection,
    group_id: str,
    partitions: Sequence[TopicPartition] | None = None,
    *,
    require_stable: bool = False,
) -> dict[TopicPartition, tuple[int, str]]:
    """The group's committed (offset, metadata) (for `partitions`, or every one it has);
    partitions without a committed offset are left out. `require_stable` (KIP-447, v7+):
    a partition with offsets pending in an open transaction raises
    UNSTABLE_OFFSET_COMMIT (retriable) instead of answering."""
    version = conn.choose_version(ApiKey.OFFSET_FETCH)
    body = build_offset_fetch(version, group_id, partitions, require_stable=require_stable)
    response = await send(conn, apis.OFFSET_FETCH, body, version)
    return read_offset_fetch(response, version, group_id)


async def fetch_offsets(
    conn: Connection, group_id: str, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """Like `fetch_offsets_with_metadata`, offsets only."""
    found = await fetch_offsets_with_metadata(conn, group_id, partitions)
    return {tp: offset for tp, (offset, _) in found.items()}


# --- OffsetCommit -----------------------------------------------------------------------


def build_offset_commit(
    version: int,
    group_id: str,
    offsets: Mapping[TopicPartition, int | tuple[int, str]],
    member: MemberIdentity = NOT_A_MEMBER,
) -> OffsetCommitRequest:
    """Offsets (each an offset, or (offset, metadata)), committed by `member` in its
    generation, or as an admin or a consumer outside the group (NOT_A_MEMBER)."""
    entries: list[tuple[TopicPartition, OffsetCommitRequestPartition]] = []
    for tp, committed in offsets.items():
        offset, metadata = committed if isinstance(committed, tuple) else (committed, "")
        entries.append(
            (
                tp,
                {
                    "partition_index": tp[1],
                    "committed_offset": offset,
                    "committed_metadata": metadata,
                },
            )
        )
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": member.generation_id,
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic(entries).items()],
    }


def read_partition_errors(
    response: OffsetCommitResponse | OffsetDeleteResponse,
    asked: Sequence[TopicPartition] | Mapping[TopicPartition, object],
    api: str,
) -> dict[TopicPartition, KafkaError | None]:
    """OffsetCommit's or OffsetDelete's per-partition answer: None, or the error."""
    return per_partition(
        (
            (TopicPartition(t["name"], p["partition_index"]), p)
            for t in response["topics"]
            for p in t["partitions"]
        ),
        asked,
        api,
        lambda p: None,
    )


async def commit_offsets_each(
    conn: Connection,
    group_id: str,
    offsets: Mapping[TopicPartition, int | tuple[int, str]],
    member: MemberIdentity = NOT_A_MEMBER,
) -> dict[TopicPartition, KafkaError | None]:
    """OffsetCommit: per partition None, or its error."""
    version = conn.choose_version(ApiKey.OFFSET_COMMIT)
    body = build_offset_commit(version, group_id, offsets, member)
    response = await send(conn, apis.OFFSET_COMMIT, body, version)
    return read_partition_errors(response, offsets, "OffsetCommit")


async def commit_offsets(
    conn: Connection,
    group_id: str,
    offsets: Mapping[TopicPartition, int | tuple[int, str]],
    member: MemberIdentity = NOT_A_MEMBER,
) -> None:
    """`commit_offsets_each`, raising the first partition error (a member outside the
    group commits only while the group has no members)."""
    for result in (await commit_offsets_each(conn, group_id, offsets, member)).values():
        if result is not None:
            raise result


# --- OffsetDelete -----------------------------------------------------------------------


def build_offset_delete(
    version: int, group_id: str, partitions: Sequence[TopicPartition]
) -> OffsetDeleteRequest:
    grouped: dict[str, list[OffsetDeleteRequestPartition]] = by_topic(
        (tp, {"partition_index": tp[1]}) for tp in partitions
    )
    return {
        "group_id": group_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
    }


def read_offset_delete(
    response: OffsetDeleteResponse, group_id: str, asked: Sequence[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    """Per partition None, or its error; raises the group's error."""
    check(response["error_code"], f"OffsetDelete for group '{group_id}'")
    return read_partition_errors(response, asked, "OffsetDelete")


async def delete_offsets(
    conn: Connection, group_id: str, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, KafkaError | None]:
    """OffsetDelete (KIP-496): forget the group's committed offsets of `partitions`; per
    partition None, or its error (GROUP_SUBSCRIBED_TO_TOPIC while members consume it).
    A group-level error is raised."""
    version = conn.choose_version(ApiKey.OFFSET_DELETE)
    body = build_offset_delete(version, group_id, partitions)
    response = await send(conn, apis.OFFSET_DELETE, body, version)
    return read_offset_delete(response, group_id, partitions)
