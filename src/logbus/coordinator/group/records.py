"""The `__consumer_offsets` record formats, byte-compatible with Kafka.

Every record's key and value start with an int16 version that selects the schema of the
rest (internal-records/*.json): key versions 0 and 1 are `OffsetCommitKey`, key version 2
is `GroupMetadataKey`; newer key versions belong to KIP-848 consumer groups, which logbus
does not implement, and decode as `UnknownRecord`. A null value is a tombstone: the offset
or the group was deleted.

Versions written are the ones Kafka 3.x writes (MetadataVersion >= 2.3): offset commit
key v1, offset commit value v3 (v1 when the commit carries an explicit expire timestamp,
i.e. an OffsetCommit v2-v4 request with a retention time), group metadata key v2, group
metadata value v3. Every version 0-4 decodes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from logbus.protocol import schema

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")


class InvalidRecord(ValueError):
    """A `__consumer_offsets` record that does not decode (corrupt or unknown version)."""


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """A committed offset of one group for one partition."""

    group: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    # Set only by OffsetCommit v2-v4 requests with a retention time (pre-KIP-211 expiry).
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetDeleted:
    """Tombstone for an offset: the key of an offset commit with a null value."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member as stored in a group metadata record."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """A classic group's membership after a completed rebalance.

    `protocol_type` is "" for a group that only stores offsets; `protocol` and `leader`
    are None for a group without members.
    """

    group: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    """Tombstone for a group's metadata."""

    group: str


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record with a key version this coordinator does not know (KIP-848 records)."""

    key_version: int


Record = OffsetCommit | OffsetDeleted | GroupMetadata | GroupDeleted | UnknownRecord
KeyValue = tuple[bytes, bytes | None]


def _encode(name: str, version: int, body: dict[str, Any]) -> bytes:
    return _INT16.pack(version) + schema.message(name).encode(body, version)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(
        "OffsetCommitKey",
        OFFSET_COMMIT_KEY_VERSION,
        {"group": group, "topic": topic, "partition": partition},
    )


def group_metadata_key(group: str) -> bytes:
    return _encode("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group})


def offset_commit_value(commit: OffsetCommit, version: int | None = None) -> bytes:
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_VERSION
            if commit.expire_timestamp is None
            else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        )
    body = {
        "offset": commit.offset,
        "leader_epoch": commit.leader_epoch,
        "metadata": commit.metadata,
        "commit_timestamp": commit.commit_timestamp,
        "expire_timestamp": -1 if commit.expire_timestamp is None else commit.expire_timestamp,
    }
    return _encode("OffsetCommitValue", version, body)


def group_metadata_value(
    group: GroupMetadata, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    body = {
        "protocol_type": group.protocol_type,
        "generation": group.generation,
        "protocol": group.protocol,
        "leader": group.leader,
        "current_state_timestamp": group.current_state_timestamp,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in group.members
        ],
    }
    return _encode("GroupMetadataValue", version, body)


def offset_commit_record(commit: OffsetCommit) -> KeyValue:
    key = offset_commit_key(commit.group, commit.topic, commit.partition)
    return key, offset_commit_value(commit)


def offset_tombstone(group: str, topic: str, partition: int) -> KeyValue:
    return offset_commit_key(group, topic, partition), None


def group_metadata_record(group: GroupMetadata) -> KeyValue:
    return group_metadata_key(group.group), group_metadata_value(group)


def group_tombstone(group: str) -> KeyValue:
    return group_metadata_key(group), None


def _split(data: bytes, what: str, max_version: int) -> tuple[int, bytes]:
    if len(data) < 2:
        raise InvalidRecord(f"{what} too short: {len(data)} bytes")
    (version,) = _INT16.unpack_from(data)
    if not 0 <= version <= max_version:
        raise InvalidRecord(f"unknown {what} version {version}")
    return version, data[2:]


def _decode_body(name: str, version: int, body: bytes) -> dict[str, Any]:
    try:
        return schema.message(name).decode(body, version)
    except (ValueError, IndexError, struct.error) as exc:
        raise InvalidRecord(f"corrupt {name} v{version}: {exc}") from exc


def decode_record(key: bytes, value: bytes | None) -> Record:
    """Decode one `__consumer_offsets` record; raise `InvalidRecord` if it is corrupt."""
    if len(key) < 2:
        raise InvalidRecord(f"record key too short: {len(key)} bytes")
    (key_version,) = _INT16.unpack_from(key)
    if key_version in (0, 1):
        k = _decode_body("OffsetCommitKey", key_version, key[2:])
        if value is None:
            return OffsetDeleted(k["group"], k["topic"], k["partition"])
        version, body = _split(value, "offset commit value", 4)
        v = _decode_body("OffsetCommitValue", version, body)
        expire = v["expire_timestamp"] if version == 1 else -1
        return OffsetCommit(
            group=k["group"],
            topic=k["topic"],
            partition=k["partition"],
            offset=v["offset"],
            leader_epoch=v["leader_epoch"],
            metadata=v["metadata"],
            commit_timestamp=v["commit_timestamp"],
            expire_timestamp=None if expire == -1 else expire,
        )
    if key_version == 2:
        group = _decode_body("GroupMetadataKey", key_version, key[2:])["group"]
        if value is None:
            return GroupDeleted(group)
        version, body = _split(value, "group metadata value", 4)
        v = _decode_body("GroupMetadataValue", version, body)
        members = tuple(
            MemberMetadata(
                member_id=m["member_id"],
                group_instance_id=m["group_instance_id"],
                client_id=m["client_id"],
                client_host=m["client_host"],
                # v0 has no rebalance timeout: Kafka uses the session timeout instead.
                rebalance_timeout_ms=(
                    m["rebalance_timeout"] if version >= 1 else m["session_timeout"]
                ),
                session_timeout_ms=m["session_timeout"],
                subscription=bytes(m["subscription"]),
                assignment=bytes(m["assignment"]),
            )
            for m in v["members"]
        )
        return GroupMetadata(
            group=group,
            protocol_type=v["protocol_type"],
            generation=v["generation"],
            protocol=v["protocol"],
            leader=v["leader"],
            current_state_timestamp=v["current_state_timestamp"],
            members=members,
        )
    return UnknownRecord(key_version)
