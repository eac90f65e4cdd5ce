"""The `__share_group_state` records (KIP-932), byte-compatible with Kafka's share
coordinator: a key is an int16 record type (0, ShareSnapshotKey) and the key's fields
(group id, topic id, partition); a value is an int16 version (0) and a ShareSnapshotValue
(state epoch, leader epoch, start offset and the in-flight state batches). logbus writes a
full snapshot at every change (Kafka also writes ShareUpdate deltas between snapshots and
reads both; a ShareUpdate record, key type 1, is skipped here). A null value is a tombstone.

Which partition of the topic keeps a share partition's state: Kafka's
`Utils.abs("<group>:<topic id>:<partition>".hashCode) % partitions`.
"""

from __future__ import annotations

import base64
import struct
from typing import NamedTuple
from uuid import UUID

from logbus.coordinator.group.offsets_topic import java_abs, java_string_hash
from logbus.coordinator.share.share_partition import RecordState, StateBatch
from logbus.protocol import schema

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_TYPE = 0
UPDATE_KEY_TYPE = 1
VALUE_VERSION = 0

_INT16 = struct.Struct(">h")


class ShareStateKey(NamedTuple):
    group_id: str
    topic_id: UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's share coordinator key (`SharePartitionKey.asCoordinatorKey`), with the
        topic id in its base64 form."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{topic}:{self.partition}"


class SavedState(NamedTuple):
    """What the share coordinator keeps of one share partition."""

    start_offset: int
    state_epoch: int
    batches: list[StateBatch]
    leader_epoch: int = -1


def state_partition_for(key: ShareStateKey, partitions: int) -> int:
    return java_abs(java_string_hash(key.coordinator_key())) % partitions


def encode_snapshot(key: ShareStateKey, state: SavedState | None) -> tuple[bytes, bytes | None]:
    """A ShareSnapshot record's key and value (None: a tombstone)."""
    key_bytes = _INT16.pack(SNAPSHOT_KEY_TYPE) + schema.message("ShareSnapshotKey").encode(
        {"group_id": key.group_id, "topic_id": key.topic_id, "partition": key.partition}, 0
    )
    if state is None:
        return key_bytes, None
    value = {
        "snapshot_epoch": 0,
        "state_epoch": state.state_epoch,
        "leader_epoch": state.leader_epoch,
        "start_offset": state.start_offset,
        "state_batches": [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": int(b.state),
                "delivery_count": b.delivery_count,
            }
            for b in state.batches
        ],
    }
    return key_bytes, _INT16.pack(VALUE_VERSION) + schema.message("ShareSnapshotValue").encode(
        value, VALUE_VERSION
    )


def decode_snapshot(
    key: bytes, value: bytes | None
) -> tuple[ShareStateKey, SavedState | None] | None:
    """A ShareSnapshot record's key and state (None for a tombstone); None for any other
    record type."""
    if len(key) < 2 or _INT16.unpack_from(key)[0] != SNAPSHOT_KEY_TYPE:
        return None
    fields = schema.message("ShareSnapshotKey").decode(key[2:], 0)
    state_key = ShareStateKey(fields["group_id"], fields["topic_id"], fields["partition"])
    if value is None:
        return state_key, None
    body = schema.message("ShareSnapshotValue").decode(value[2:], _INT16.unpack_from(value)[0])
    batches = [
        StateBatch(
            b["first_offset"], b["last_offset"], RecordState(b["delivery_state"]),
            b["delivery_count"],
        )
        for b in body["state_batches"]
    ]
    return state_key, SavedState(
        body["start_offset"], body["state_epoch"], batches, body["leader_epoch"]
    )
