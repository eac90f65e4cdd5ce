"""The KIP-848 records of `__consumer_offsets`, byte-compatible with Kafka's
(internal-records/ConsumerGroup*.json): key versions 3 (group epoch), 5 (member
metadata), 6 (target assignment epoch), 7 (a member's target assignment) and 8 (a
member's current assignment); a null value is a tombstone. Version 4 (partition metadata,
which Kafka 4.x no longer writes) is read and ignored.

`replay` rebuilds the consumer groups of a partition from these records, in the order
Kafka writes them (a member's records are removed current assignment first, its
metadata last; a group's metadata record is removed last of all).
"""

from __future__ import annotations

import struct
from typing import Any

from logbus.coordinator.group.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from logbus.coordinator.group.records import InvalidRecord, KeyValue
from logbus.protocol import schema

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_MEMBER + 1))

_INT16 = struct.Struct(">h")
_KEYS = {
    GROUP_METADATA: "ConsumerGroupMetadataKey",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadataKey",
    MEMBER_METADATA: "ConsumerGroupMemberMetadataKey",
    TARGET_METADATA: "ConsumerGroupTargetAssignmentMetadataKey",
    TARGET_MEMBER: "ConsumerGroupTargetAssignmentMemberKey",
    CURRENT_MEMBER: "ConsumerGroupCurrentMemberAssignmentKey",
}
_VALUES = {
    GROUP_METADATA: "ConsumerGroupMetadataValue",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadataValue",
    MEMBER_METADATA: "ConsumerGroupMemberMetadataValue",
    TARGET_METADATA: "ConsumerGroupTargetAssignmentMetadataValue",
    TARGET_MEMBER: "ConsumerGroupTargetAssignmentMemberValue",
    CURRENT_MEMBER: "ConsumerGroupCurrentMemberAssignmentValue",
}


def _key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    body: dict[str, Any] = {"group_id": group_id}
    if member_id is not None:
        body["member_id"] = member_id
    return _INT16.pack(version) + schema.message(_KEYS[version]).encode(body, version)


def _value(version: int, body: dict[str, Any]) -> bytes:
    return _INT16.pack(0) + schema.message(_VALUES[version]).encode(body, 0)


def _topic_partitions(assignment: Assignment) -> list[dict[str, Any]]:
    return [
        {"topic_id": topic_id, "partitions": sorted(parts)}
        for topic_id, parts in sorted(assignment.items())
        if parts
    ]


def _assignment(items: list[dict[str, Any]]) -> Assignment:
    return {item["topic_id"]: frozenset(item["partitions"]) for item in items}


# --- writing ----------------------------------------------------------------------------


def group_epoch_record(group: ConsumerGroup) -> KeyValue:
    return _key(GROUP_METADATA, group.group_id), _value(
        GROUP_METADATA, {"epoch": group.group_epoch}
    )


def member_metadata_record(group_id: str, member: ConsumerMember) -> KeyValue:
    body = {
        "instance_id": member.instance_id,
        "rack_id": member.rack_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "subscribed_topic_names": list(member.subscribed_topic_names),
        "subscribed_topic_regex": member.subscribed_topic_regex,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "server_assignor": member.server_assignor,
        "classic_member_metadata": (
            {
                "session_timeout_ms": member.classic_session_timeout_ms,
                "supported_protocols": [
                    {"name": name, "metadata": metadata}
                    for name, metadata in member.classic_protocols
                ],
            }
            if member.uses_classic_protocol
            else None
        ),
    }
    return _key(MEMBER_METADATA, group_id, member.member_id), _value(MEMBER_METADATA, body)


def target_member_record(group_id: str, member_id: str, target: Assignment) -> KeyValue:
    return _key(TARGET_MEMBER, group_id, member_id), _value(
        TARGET_MEMBER, {"topic_partitions": _topic_partitions(target)}
    )


def target_epoch_record(group: ConsumerGroup) -> KeyValue:
    return _key(TARGET_METADATA, group.group_id), _value(
        TARGET_METADATA, {"assignment_epoch": group.assignment_epoch}
    )


def current_member_record(group_id: str, member: ConsumerMember) -> KeyValue:
    body = {
        "member_epoch": member.member_epoch,
        "previous_member_epoch": member.previous_member_epoch,
        "state": int(member.state),
        "assigned_partitions": _topic_partitions(member.assigned),
        "partitions_pending_revocation": _topic_partitions(member.pending_revocation),
    }
    return _key(CURRENT_MEMBER, group_id, member.member_id), _value(CURRENT_MEMBER, body)


def member_tombstones(group_id: str, member_id: str) -> list[KeyValue]:
    """A member's removal, in Kafka's order: current assignment, target, metadata."""
    return [
        (_key(CURRENT_MEMBER, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[KeyValue]:
    """A consumer group's removal (its members removed before)."""
    return [(_key(TARGET_METADATA, group_id), None), (_key(GROUP_METADATA, group_id), None)]


# --- reading ----------------------------------------------------------------------------


def _decode(name: str, version: int, data: bytes) -> dict[str, Any]:
    try:
        return schema.message(name).decode(data, version)
    except (ValueError, IndexError, struct.error) as exc:
        raise InvalidRecord(f"corrupt {name} v{version}: {exc}") from exc


def replay(groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None) -> None:
    """Apply one KIP-848 record (its key version in `KEY_VERSIONS`) to `groups`."""
    (version,) = _INT16.unpack_from(key)
    k = _decode(_KEYS[version], version, key[2:])
    group_id: str = k["group_id"]
    if version == PARTITION_METADATA:
        return
    if value is None:
        _replay_tombstone(groups, version, group_id, k.get("member_id"))
        return
    if len(value) < 2:
        raise InvalidRecord(f"{_VALUES[version]} too short")
    v = _decode(_VALUES[version], 0, value[2:])
    group = groups.setdefault(group_id, ConsumerGroup(group_id))
    if version == GROUP_METADATA:
        group.group_epoch = v["epoch"]
    elif version == TARGET_METADATA:
        group.assignment_epoch = v["assignment_epoch"]
    elif version == TARGET_MEMBER:
        group.target[k["member_id"]] = _assignment(v["topic_partitions"])
    elif version == MEMBER_METADATA:
        _replay_member_metadata(group, k["member_id"], v)
    elif version == CURRENT_MEMBER:
        member = group.members.setdefault(k["member_id"], ConsumerMember(k["member_id"]))
        member.member_epoch = v["member_epoch"]
        member.previous_member_epoch = v["previous_member_epoch"]
        try:
            member.state = MemberState(v["state"])
        except ValueError:
            member.state = MemberState.UNKNOWN
        member.assigned = _assignment(v["assigned_partitions"])
        member.pending_revocation = _assignment(v["partitions_pending_revocation"])


def _replay_member_metadata(group: ConsumerGroup, member_id: str, v: dict[str, Any]) -> None:
    member = group.members.get(member_id)
    if member is None:
        member = ConsumerMember(member_id)
    member.instance_id = v["instance_id"]
    member.rack_id = v["rack_id"]
    member.client_id = v["client_id"]
    member.client_host = v["client_host"]
    member.subscribed_topic_names = tuple(v["subscribed_topic_names"])
    member.subscribed_topic_regex = v["subscribed_topic_regex"]
    member.rebalance_timeout_ms = v["rebalance_timeout_ms"]
    member.server_assignor = v["server_assignor"]
    classic = v.get("classic_member_metadata")
    member.uses_classic_protocol = classic is not None
    if classic is not None:
        member.classic_session_timeout_ms = classic["session_timeout_ms"]
        member.classic_protocols = tuple(
            (p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]
        )
    group.add(member)


def _replay_tombstone(
    groups: dict[str, ConsumerGroup], version: int, group_id: str, member_id: str | None
) -> None:
    group = groups.get(group_id)
    if group is None:
        return
    if version == MEMBER_METADATA and member_id is not None:
        group.remove(member_id)
    elif version == TARGET_MEMBER and member_id is not None:
        group.target.pop(member_id, None)
    elif version == CURRENT_MEMBER and member_id is not None:
        member = group.members.get(member_id)
        if member is not None:
            member.assigned, member.pending_revocation = {}, {}
    elif version == GROUP_METADATA:
        del groups[group_id]
