"""ElectLeaders on the KRaft controller (KIP-183, KIP-460), as Kafka's
`ReplicationControlManager.electLeaders` decides it:

- preferred (0): the first replica leads, when it is in the ISR and may lead
  (ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE when it
  cannot);
- unclean (1): a partition without a leader gets one from the ISR, or else the first
  replica that may lead, which becomes the whole ISR with its leader recovery state
  RECOVERING (ELECTION_NOT_NEEDED when it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
  when no replica may lead).

`topic_partitions` null means every partition (then only those that need an election
are answered). A pure function of the image.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from logbus.controller.control_result import ControllerResult
from logbus.controller.partition_change import elect_leader, partition_change
from logbus.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = ["elect_leaders"]

PREFERRED: Final = 0
UNCLEAN: Final = 1
RECOVERING: Final = 1


def _preferred(
    topic: TopicImage, index: int, p: PartitionRegistration, usable: set[int]
) -> tuple[MetadataRecord | None, ErrorCode]:
    preferred = p.replicas[0]
    if p.leader == preferred:
        return None, ErrorCode.ELECTION_NOT_NEEDED
    if preferred not in p.isr or preferred not in usable:
        return None, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    return partition_change(topic.topic_id, index, leader=preferred), ErrorCode.NONE


def _unclean(
    topic: TopicImage, index: int, p: PartitionRegistration, usable: set[int]
) -> tuple[MetadataRecord | None, ErrorCode]:
    if p.leader != NO_LEADER and p.leader in usable:
        return None, ErrorCode.ELECTION_NOT_NEEDED
    leader = elect_leader(p, p.isr, usable)
    if leader != NO_LEADER:
        return partition_change(topic.topic_id, index, leader=leader), ErrorCode.NONE
    leader = next((r for r in p.replicas if r in usable), NO_LEADER)
    if leader == NO_LEADER:
        return None, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    change = partition_change(
        topic.topic_id, index, leader=leader, isr=[leader], leader_recovery_state=RECOVERING
    )
    return change, ErrorCode.NONE


def _wanted(image: MetadataImage, body: dict[str, Any]) -> Iterator[tuple[str, int]]:
    if body.get("topic_partitions") is None:
        for topic in sorted(image.topics.values(), key=lambda t: t.name):
            for index in sorted(topic.partitions):
                yield topic.name, index
        return
    for item in body["topic_partitions"]:
        for index in item["partitions"]:
            yield item["topic"], index


def elect_leaders(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    kind = body.get("election_type", PREFERRED)
    decide = _unclean if kind == UNCLEAN else _preferred
    usable = set(image.unfenced_brokers())
    every = body.get("topic_partitions") is None
    records: list[MetadataRecord] = []
    results: dict[str, list[dict[str, Any]]] = {}
    for name, index in _wanted(image, body):
        topic = image.topic(name)
        p = None if topic is None else topic.partitions.get(index)
        if topic is None or p is None:
            change, error = None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            change, error = decide(topic, index, p, usable)
        if change is not None:
            records.append(change)
        if every and error is ErrorCode.ELECTION_NOT_NEEDED:
            continue
        message = None if error is ErrorCode.NONE else error.name
        results.setdefault(name, []).append(
            {"partition_id": index, "error_code": int(error), "error_message": message}
        )
    answer = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "replica_election_results": [
            {"topic": name, "partition_result": parts} for name, parts in results.items()
        ],
    }
    return ControllerResult(records, answer)
