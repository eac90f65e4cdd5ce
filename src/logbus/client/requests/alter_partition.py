"""AlterPartition v0-3: a partition leader asks the controller to change its ISR (Kafka
2.7+, KIP-497). The controller answers each partition with the ISR and partition epoch it
wrote, or an error (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, ...);
a request-wide error (NOT_CONTROLLER, STALE_BROKER_EPOCH) means none was applied.

Topics are named up to v1 and by id from v2; v3 sends each ISR member with its broker
epoch (-1 when the leader does not know it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import per_key, send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import alter_partition_request, alter_partition_response, apis
from logbus.types import TopicPartition

TOPIC_IDS_FROM = 2
ISR_WITH_EPOCHS_FROM = 3


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition's proposed ISR, with the leader's epochs the controller checks."""

    topic_id: UUID
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    broker_epochs: Mapping[int, int] | None = None  # ISR member -> its broker epoch (v3)


class LeaderAndIsr(NamedTuple):
    """What the controller wrote: the partition's leader, leader epoch, ISR and the
    partition epoch (the state's new version)."""

    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


class AlterPartitionResponse(NamedTuple):
    error_code: int
    partitions: dict[TopicPartition, LeaderAndIsr | KafkaError]


def build_alter_partition(
    version: int, broker_id: int, broker_epoch: int, changes: Mapping[TopicPartition, IsrChange]
) -> alter_partition_request.AlterPartitionRequest:
    topics: dict[str, alter_partition_request.TopicData] = {}
    for tp, change in changes.items():
        topic = topics.setdefault(
            tp.topic, {"topic_name": tp.topic, "topic_id": change.topic_id, "partitions": []}
        )
        epochs = change.broker_epochs or {}
        topic["partitions"].append(
            {
                "partition_index": tp.partition,
                "leader_epoch": change.leader_epoch,
                "new_isr": list(change.new_isr),
                "new_isr_with_epochs": [
                    {"broker_id": b, "broker_epoch": epochs.get(b, -1)} for b in change.new_isr
                ],
                "leader_recovery_state": 0,
                "partition_epoch": change.partition_epoch,
            }
        )
    return {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": list(topics.values())}


def read_alter_partition(
    response: alter_partition_response.AlterPartitionResponse,
    version: int,
    changes: Mapping[TopicPartition, IsrChange],
) -> AlterPartitionResponse:
    names = {change.topic_id: tp.topic for tp, change in changes.items()}
    entries: list[tuple[TopicPartition, alter_partition_response.PartitionData]] = []
    for t in response["topics"]:
        name = t["topic_name"] if version < TOPIC_IDS_FROM else names.get(t["topic_id"])
        if name is None:
            continue
        entries.extend((TopicPartition(name, p["partition_index"]), p) for p in t["partitions"])
    error = response["error_code"]
    if error != ErrorCode.NONE:
        return AlterPartitionResponse(error, {})
    return AlterPartitionResponse(
        error,
        per_key(
            entries,
            changes,
            "AlterPartition",
            lambda p: LeaderAndIsr(
                p["leader_id"], p["leader_epoch"], tuple(p["isr"]), p["partition_epoch"]
            ),
            lambda tp, _p: f"AlterPartition {tp[0]}-{tp[1]}",
        ),
    )


async def alter_partition(
    conn: Connection,
    broker_id: int,
    broker_epoch: int,
    changes: Mapping[TopicPartition, IsrChange],
) -> AlterPartitionResponse:
    """Send the ISR changes to the controller at `conn` (newest version both support; v2+
    needs every topic id, else v1)."""
    by_id = all(change.topic_id.int for change in changes.values())
    version = conn.choose_version(ApiKey.ALTER_PARTITION, None if by_id else TOPIC_IDS_FROM - 1)
    body = build_alter_partition(version, broker_id, broker_epoch, changes)
    response = await send(conn, apis.ALTER_PARTITION, body, version)
    return read_alter_partition(response, version, changes)
