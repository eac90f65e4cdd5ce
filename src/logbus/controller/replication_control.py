"""Topics and partitions as the active KRaft controller changes them (Kafka's
`ReplicationControlManager`): CreateTopics (replicas placed over the unfenced brokers,
as `assignment.assign_replicas` places them in ZooKeeper mode), DeleteTopics,
CreatePartitions and AlterPartition (an ISR change asked by a partition's leader, checked
against its leader epoch and partition epoch).

Pure functions of the image and the request, each returning a `ControllerResult`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from logbus.controller.assignment import ControllerError, assign_replicas
from logbus.controller.control_result import ControllerResult, record
from logbus.controller.partition_change import partition_change
from logbus.controller.topic_validation import topic_name_error
from logbus.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from logbus.metadata.records import MetadataRecord
from logbus.protocol import ErrorCode

__all__ = [
    "TopicDefaults",
    "alter_partition",
    "create_partitions",
    "create_topics",
    "delete_topics",
]

TOPIC_RESOURCE = 2


@dataclass(frozen=True)
class TopicDefaults:
    """`num.partitions` and `default.replication.factor` of the controller."""

    num_partitions: int = 1
    replication_factor: int = 1


def _placement(
    image: MetadataImage, partitions: int, replication_factor: int, first: int = 0
) -> dict[int, list[int]]:
    brokers = image.unfenced_brokers()
    racks = {b: image.brokers[b].rack for b in brokers}
    return assign_replicas(brokers, partitions, replication_factor, first, racks=racks)


def _partition_records(
    topic_id: uuid.UUID, assignment: dict[int, list[int]]
) -> list[MetadataRecord]:
    return [
        record(
            "PartitionRecord",
            **PartitionRegistration(
                replicas=tuple(replicas), isr=tuple(replicas), leader=replicas[0]
            ).record(topic_id, partition_id),
        )
        for partition_id, replicas in sorted(assignment.items())
    ]


def _explicit_assignment(image: MetadataImage, topic: dict[str, Any]) -> dict[int, list[int]]:
    assignment = {a["partition_index"]: list(a["broker_ids"]) for a in topic["assignments"]}
    if sorted(assignment) != list(range(len(assignment))):
        raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be 0..N-1")
    for replicas in assignment.values():
        if not replicas or len(set(replicas)) != len(replicas):
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica list {replicas}"
            )
        unknown = [r for r in replicas if r not in image.brokers]
        if unknown:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown brokers {unknown} in the assignment"
            )
    return assignment


# Checks a new topic's configs; raises ControllerError (INVALID_CONFIG) naming the setting.
TopicConfigCheck = Callable[[dict[str, str]], None]


def _create_topic(
    image: MetadataImage,
    topic: dict[str, Any],
    defaults: TopicDefaults,
    check_configs: TopicConfigCheck | None,
) -> tuple[list[MetadataRecord], dict[str, Any]]:
    name = topic["name"]
    error = topic_name_error(name)
    if error is not None:
        raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
    if image.topic(name) is not None:
        raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if topic["assignments"]:
        if topic["num_partitions"] != -1 or topic["replication_factor"] != -1:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        assignment = _explicit_assignment(image, topic)
    else:
        partitions = topic["num_partitions"]
        factor = topic["replication_factor"]
        partitions = defaults.num_partitions if partitions == -1 else partitions
        factor = defaults.replication_factor if factor == -1 else factor
        if partitions <= 0:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be positive."
            )
        if factor <= 0:
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        assignment = _placement(image, partitions, factor)
    configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
    if check_configs is not None:
        check_configs(configs)
    topic_id = uuid.uuid4()
    records = [record("TopicRecord", name=name, topic_id=topic_id)]
    records += _partition_records(topic_id, assignment)
    records += [
        record("ConfigRecord", resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
        for k, v in sorted(configs.items())
    ]
    answer = {
        "name": name,
        "topic_id": topic_id,
        "error_code": 0,
        "error_message": None,
        "num_partitions": len(assignment),
        "replication_factor": len(assignment[0]),
        "configs": [
            {"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False}
            for k, v in sorted(configs.items())
        ],
    }
    return records, answer


def create_topics(
    image: MetadataImage,
    body: dict[str, Any],
    defaults: TopicDefaults,
    check_configs: TopicConfigCheck | None = None,
) -> ControllerResult:
    records: list[MetadataRecord] = []
    answers = []
    seen: set[str] = set()
    for topic in body["topics"]:
        name = topic["name"]
        try:
            if name in seen:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name}")
            seen.add(name)
            created, answer = _create_topic(image, topic, defaults, check_configs)
        except ControllerError as exc:
            answers.append(
                {"name": name, "error_code": int(exc.error), "error_message": exc.message,
                 "num_partitions": -1, "replication_factor": -1, "configs": None}
            )  # fmt: skip
            continue
        if not body.get("validate_only"):
            records += created
        answers.append(answer)
    return ControllerResult(records, {"throttle_time_ms": 0, "topics": answers})


def delete_topics(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    """By name (v0-5, and v6 without an id) or by topic id (v6)."""
    wanted = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in body.get("topic_names") or ()]
    wanted += list(body.get("topics") or ())
    records: list[MetadataRecord] = []
    answers = []
    for item in wanted:
        topic: TopicImage | None
        if item.get("topic_id") and item["topic_id"].int != 0:
            topic = image.topics.get(item["topic_id"])
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = image.topic(item.get("name") or "")
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is None:
            answers.append(
                {"name": item.get("name"), "topic_id": item.get("topic_id"),
                 "error_code": int(missing), "error_message": None}
            )  # fmt: skip
            continue
        if all(r.data["topic_id"] != topic.topic_id for r in records):
            records.append(record("RemoveTopicRecord", topic_id=topic.topic_id))
        answers.append(
            {"name": topic.name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}
        )
    return ControllerResult(records, {"throttle_time_ms": 0, "responses": answers})


def create_partitions(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    records: list[MetadataRecord] = []
    answers = []
    for item in body["topics"]:
        try:
            added = _add_partitions(image, item)
        except ControllerError as exc:
            answers.append(
                {"name": item["name"], "error_code": int(exc.error), "error_message": exc.message}
            )
            continue
        if not body.get("validate_only"):
            records += added
        answers.append({"name": item["name"], "error_code": 0, "error_message": None})
    return ControllerResult(records, {"throttle_time_ms": 0, "results": answers})


def _add_partitions(image: MetadataImage, item: dict[str, Any]) -> list[MetadataRecord]:
    topic = image.topic(item["name"])
    if topic is None:
        raise ControllerError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{item['name']}' does not exist."
        )
    current = len(topic.partitions)
    if item["count"] <= current:
        raise ControllerError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{item['count']}.",
        )
    factor = len(topic.partitions[0].replicas)
    if item.get("assignments"):
        assignment = {current + i: list(a["broker_ids"]) for i, a in enumerate(item["assignments"])}
        if len(assignment) != item["count"] - current:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {item['count'] - current} but "
                f"{len(assignment)} assignments provided.",
            )
    else:
        assignment = _placement(image, item["count"] - current, factor, current)
    return _partition_records(topic.topic_id, assignment)


PartitionCheck = Callable[[PartitionRegistration], ErrorCode]


def alter_partition(image: MetadataImage, body: dict[str, Any]) -> ControllerResult:
    """ISR changes asked by partition leaders (KIP-497, KIP-903's epochs in v3)."""
    broker = image.brokers.get(body["broker_id"])
    if broker is None or broker.epoch != body["broker_epoch"]:
        return ControllerResult(
            [],
            {"throttle_time_ms": 0, "error_code": int(ErrorCode.STALE_BROKER_EPOCH), "topics": []},
        )
    records: list[MetadataRecord] = []
    topics = []
    for item in body["topics"]:
        topic = image.topics.get(item.get("topic_id")) if item.get("topic_id") else None
        topic = topic or image.topic(item.get("topic_name") or "")
        answers = []
        for part in item["partitions"]:
            change, answer = _alter_one(image, topic, body["broker_id"], part)
            if change is not None:
                records.append(change)
            answers.append(answer)
        topics.append(
            {"topic_name": item.get("topic_name"), "topic_id": item.get("topic_id"),
             "partitions": answers}
        )  # fmt: skip
    return ControllerResult(records, {"throttle_time_ms": 0, "error_code": 0, "topics": topics})


def _alter_one(
    image: MetadataImage, topic: TopicImage | None, leader: int, part: dict[str, Any]
) -> tuple[MetadataRecord | None, dict[str, Any]]:
    index = part["partition_index"]
    p = None if topic is None else topic.partitions.get(index)
    new_isr = [s["broker_id"] for s in part.get("new_isr_with_epochs") or ()] or list(
        part.get("new_isr") or ()
    )
    error = ErrorCode.NONE
    if topic is None or p is None:
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif p.leader != leader:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif part["leader_epoch"] != p.leader_epoch:
        error = ErrorCode.FENCED_LEADER_EPOCH
    elif part["partition_epoch"] != p.partition_epoch:
        error = ErrorCode.INVALID_UPDATE_VERSION
    elif leader not in new_isr or any(r not in p.replicas for r in new_isr):
        error = ErrorCode.INVALID_REQUEST
    elif any(r not in image.unfenced_brokers() for r in new_isr if r not in p.isr):
        error = ErrorCode.INELIGIBLE_REPLICA
    if error != ErrorCode.NONE or topic is None or p is None:
        return None, {"partition_index": index, "error_code": int(error)}
    change = partition_change(topic.topic_id, index, isr=new_isr)
    after = p.merge(change.data)
    return change, {
        "partition_index": index,
        "error_code": 0,
        "leader_id": after.leader,
        "leader_epoch": after.leader_epoch,
        "isr": list(after.isr),
        "leader_recovery_state": after.leader_recovery_state,
        "partition_epoch": after.partition_epoch,
    }
