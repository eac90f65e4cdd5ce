"""OffsetForLeaderEpoch v0-4: where a leader epoch ended in the leader's log (KIP-101,
KIP-279). A follower asks it before fetching, to find where its log diverged from the
leader's; a consumer may ask it to detect truncation (KIP-320).

`replica_id` (v3+) is the follower's broker id, or -1 for a consumer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import by_topic, per_key, require_version, send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
from logbus.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from logbus.protocol.messages.offset_for_leader_epoch_response import (
    OffsetForLeaderEpochResponse,
)
from logbus.types import TopicPartition

MIN_VERSION = 2  # the first with current_leader_epoch (fencing)
CONSUMER_REPLICA_ID = -1


class EpochQuery(NamedTuple):
    """The epoch to look up, and the leader epoch the asker believes current (-1: none)."""

    leader_epoch: int
    current_leader_epoch: int = -1


class EpochEndOffset(NamedTuple):
    """The largest epoch <= the one asked for that the leader knows, and where it ended;
    (-1, -1) when the leader knows none (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)."""

    leader_epoch: int
    end_offset: int


def build_offset_for_leader_epoch(
    version: int,
    queries: Mapping[TopicPartition, EpochQuery],
    replica_id: int = CONSUMER_REPLICA_ID,
) -> OffsetForLeaderEpochRequest:
    entries: list[tuple[TopicPartition, OffsetForLeaderPartition]] = [
        (
            tp,
            {
                "partition": tp.partition,
                "current_leader_epoch": q.current_leader_epoch,
                "leader_epoch": q.leader_epoch,
            },
        )
        for tp, q in queries.items()
    ]
    return {
        "replica_id": replica_id,
        "topics": [
            {"topic": topic, "partitions": parts} for topic, parts in by_topic(entries).items()
        ],
    }


def read_offset_for_leader_epoch(
    response: OffsetForLeaderEpochResponse, asked: Mapping[TopicPartition, object]
) -> dict[TopicPartition, EpochEndOffset | KafkaError]:
    entries = (
        (TopicPartition(t["topic"], p["partition"]), p)
        for t in response["topics"]
        for p in t["partitions"]
    )
    return per_key(
        entries,
        asked,
        "OffsetForLeaderEpoch",
        lambda p: EpochEndOffset(p["leader_epoch"], p["end_offset"]),
        lambda tp, _p: f"OffsetForLeaderEpoch {tp[0]}-{tp[1]}",
    )


async def offset_for_leader_epoch(
    conn: Connection,
    queries: Mapping[TopicPartition, EpochQuery],
    replica_id: int = CONSUMER_REPLICA_ID,
) -> dict[TopicPartition, EpochEndOffset | KafkaError]:
    """Each partition's epoch end offset from `conn`'s broker (which must lead it)."""
    version = require_version(conn, ApiKey.OFFSET_FOR_LEADER_EPOCH, MIN_VERSION)
    body = build_offset_for_leader_epoch(version, queries, replica_id)
    response = await send(conn, apis.OFFSET_FOR_LEADER_EPOCH, body, version)
    return read_offset_for_leader_epoch(response, queries)
