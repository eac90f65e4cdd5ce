"""The bodies of the Raft requests and responses (KIP-595, KIP-630) for the one partition
of `__cluster_metadata`, as plain dicts for the generic codec: built by the sender,
read by the receiver. Pure code: no I/O.

The versions spoken are fixed (`RAFT_API_VERSIONS`): the voter's listener advertises
exactly these, and its client asks for no more.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from logbus.protocol import ApiKey, ErrorCode

__all__ = [
    "METADATA_TOPIC_ID",
    "RAFT_API_VERSIONS",
    "only_partition",
]

METADATA_TOPIC_NAME: Final = "__cluster_metadata"
# Kafka's fixed topic id of the metadata topic (Uuid.METADATA_TOPIC_ID).
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)

RAFT_API_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.VOTE: (0, 0),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 0),
    ApiKey.END_QUORUM_EPOCH: (0, 0),
    ApiKey.FETCH: (12, 13),
    ApiKey.FETCH_SNAPSHOT: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (1, 1),
}


def only_partition(body: dict[str, Any], topics_key: str = "topics") -> dict[str, Any] | None:
    """The single partition of a Raft request or response (None if it names none)."""
    for topic in body.get(topics_key) or ():
        for partition in topic.get("partitions") or ():
            return dict(partition)
    return None


def topic_partition(
    partition: dict[str, Any], name_key: str = "topic_name"
) -> list[dict[str, Any]]:
    return [{name_key: METADATA_TOPIC_NAME, "partitions": [partition]}]


def vote_request(
    cluster_id: str, epoch: int, candidate: int, last_epoch: int, end_offset: int
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "topics": topic_partition(
            {
                "partition_index": 0,
                "candidate_epoch": epoch,
                "candidate_id": candidate,
                "last_offset_epoch": last_epoch,
                "last_offset": end_offset,
            }
        ),
    }


def epoch_response(
    error: ErrorCode,
    leader_id: int,
    epoch: int,
    *,
    partition_error: ErrorCode = ErrorCode.NONE,
    **extra: Any,
) -> dict[str, Any]:
    """Vote, BeginQuorumEpoch and EndQuorumEpoch responses share this shape."""
    return {
        "error_code": int(error),
        "topics": topic_partition(
            {
                "partition_index": 0,
                "error_code": int(partition_error),
                "leader_id": leader_id,
                "leader_epoch": epoch,
                **extra,
            }
        ),
    }


def begin_quorum_epoch_request(cluster_id: str, leader_id: int, epoch: int) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "topics": topic_partition(
            {"partition_index": 0, "leader_id": leader_id, "leader_epoch": epoch}
        ),
    }


def end_quorum_epoch_request(
    cluster_id: str, leader_id: int, epoch: int, successors: list[int]
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "topics": topic_partition(
            {
                "partition_index": 0,
                "leader_id": leader_id,
                "leader_epoch": epoch,
                "preferred_successors": successors,
            }
        ),
    }


def fetch_request(
    cluster_id: str,
    replica_id: int,
    epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    max_wait_ms: int,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "replica_id": replica_id,
        "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 8 * 1024 * 1024,
        "topics": [
            {
                "topic": METADATA_TOPIC_NAME,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": epoch,
                        "fetch_offset": fetch_offset,
                        "last_fetched_epoch": last_fetched_epoch,
                        "log_start_offset": -1,
                        "partition_max_bytes": 8 * 1024 * 1024,
                    }
                ],
            }
        ],
    }


def fetch_partition_response(
    error: ErrorCode, leader_id: int, epoch: int, high_watermark: int, log_start: int
) -> dict[str, Any]:
    return {
        "partition_index": 0,
        "error_code": int(error),
        "high_watermark": high_watermark,
        "last_stable_offset": high_watermark,
        "log_start_offset": log_start,
        "current_leader": {"leader_id": leader_id, "leader_epoch": epoch},
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


def fetch_response(error: ErrorCode, partition: dict[str, Any] | None) -> dict[str, Any]:
    responses = []
    if partition is not None:
        responses = [
            {
                "topic": METADATA_TOPIC_NAME,
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [partition],
            }
        ]
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "session_id": 0,
        "responses": responses,
    }


def fetch_snapshot_request(
    cluster_id: str,
    replica_id: int,
    epoch: int,
    end_offset: int,
    snapshot_epoch: int,
    position: int,
) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "replica_id": replica_id,
        "max_bytes": 1024 * 1024,
        "topics": [
            {
                "name": METADATA_TOPIC_NAME,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": epoch,
                        "snapshot_id": {"end_offset": end_offset, "epoch": snapshot_epoch},
                        "position": position,
                    }
                ],
            }
        ],
    }


def fetch_snapshot_response(error: ErrorCode, partition: dict[str, Any] | None) -> dict[str, Any]:
    topics = [] if partition is None else [{"name": METADATA_TOPIC_NAME, "partitions": [partition]}]
    return {"throttle_time_ms": 0, "error_code": int(error), "topics": topics}


def describe_quorum_request() -> dict[str, Any]:
    return {"topics": topic_partition({"partition_index": 0})}
