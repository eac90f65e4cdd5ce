"""Request bodies of the client's share-group builders (KIP-932), one per API, at any
version: the request tests take them in for the APIs the broker serves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from logbus.client.requests import share_group_offsets, share_groups, share_state
from logbus.coordinator.share.share_partition import RecordState
from logbus.protocol import ApiKey

TOPIC_ID = UUID("12345678-1234-5678-1234-567812345678")
OTHER_ID = UUID("87654321-4321-8765-4321-876543218765")

# api key -> a request body at a version
SHARE_BUILDERS: dict[int, Callable[[int], Any]] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: lambda v: share_groups.build_share_group_heartbeat(
        v, "g", "member-1", 3, ["a", "b"], rack_id="rack-1"
    ),
    ApiKey.SHARE_GROUP_DESCRIBE: lambda v: share_groups.build_share_group_describe(
        v, ["g", "h"], include_authorized_operations=True
    ),
    ApiKey.SHARE_FETCH: lambda v: share_groups.build_share_fetch(
        v, "g", "member-1", 4, [(TOPIC_ID, 0), (TOPIC_ID, 2)],
        {(TOPIC_ID, 0): [(5, 9, [1]), (12, 13, [2, 3])], (OTHER_ID, 1): [(0, 0, [1])]},
        max_wait_ms=250, max_records=100, forgotten=[(OTHER_ID, 3)],
    ),
    ApiKey.SHARE_ACKNOWLEDGE: lambda v: share_groups.build_share_acknowledge(
        v, "g", "member-1", 5, {(TOPIC_ID, 0): [(5, 9, [1])], (OTHER_ID, 1): [(2, 3, [3, 0])]}
    ),
    ApiKey.READ_SHARE_GROUP_STATE: lambda v: share_state.build_read_share_group_state(
        "g", TOPIC_ID, 2, 7
    ),
    ApiKey.WRITE_SHARE_GROUP_STATE: lambda v: share_state.build_write_share_group_state(
        "g", TOPIC_ID, 2, 3, 7, 100,
        [{"first_offset": 100, "last_offset": 104, "delivery_state": int(RecordState.AVAILABLE),
          "delivery_count": 2}],
    ),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: lambda v: (
        share_state.build_initialize_share_group_state("g", TOPIC_ID, 2, 1, 0)
    ),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: lambda v: (
        share_state.build_read_share_group_state_summary("g", {TOPIC_ID: [0, 2], OTHER_ID: [1]})
    ),
    ApiKey.DELETE_SHARE_GROUP_STATE: lambda v: (
        share_state.build_delete_share_group_state("g", {TOPIC_ID: [0, 2], OTHER_ID: [1]})
    ),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: lambda v: (
        share_group_offsets.build_describe_share_group_offsets("g", [("a", 0), ("a", 2), ("b", 1)])
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: lambda v: (
        share_group_offsets.build_alter_share_group_offsets("g", {("a", 0): 10, ("b", 1): 0})
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: lambda v: (
        share_group_offsets.build_delete_share_group_offsets("g", ["a", "b"])
    ),
}
