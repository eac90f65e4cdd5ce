"""The JSON documents of `logbus reassign-partitions`, as kafka-reassign-partitions reads
and writes them.

Topics to move (`--topics-to-move-json-file`):
    {"version": 1, "topics": [{"topic": "foo"}, {"topic": "bar"}]}
A reassignment (`--reassignment-json-file`, and what `--generate` proposes):
    {"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}
where a path instead of "any" moves that replica to that log dir of its broker
(AlterReplicaLogDirs).
Every malformed or contradictory document is a `CommandError` naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from logbus.cli.common import CommandError
from logbus.types import TopicPartition

ANY_LOG_DIR = "any"


class ReplicaLogDir(NamedTuple):
    """One replica (a partition on a broker), as Kafka's TopicPartitionReplica."""

    topic: str
    partition: int
    broker: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}-{self.broker}"


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError(f"{what} must be a JSON object")
    version = data.get("version", 1)
    if version != 1:
        raise CommandError(f"{what}: unsupported version {version!r} (only 1 is)")
    return data


def _whole(value: object) -> bool:
    return type(value) is int


def parse_topics_to_move(text: str) -> list[str]:
    """The topic names of a topics-to-move document."""
    data = _load(text, "The topics-to-move JSON")
    entries = data.get("topics")
    if not isinstance(entries, list) or not entries:
        raise CommandError('The topics-to-move JSON needs a non-empty "topics" list')
    topics: list[str] = []
    for entry in entries:
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CommandError(f'Each topic to move needs a "topic" name: {json.dumps(entry)}')
        topics.append(name)
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise CommandError(
            f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}"
        )
    return topics


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """The target replicas of each partition of a reassignment document, checked as
    kafka-reassign-partitions checks them (empty list, duplicate partitions, duplicate
    replicas, log dirs not matching the replicas)."""
    data = _load(text, "The reassignment JSON")
    entries = data.get("partitions")
    if not isinstance(entries, list):
        raise CommandError('The reassignment JSON needs a "partitions" list')
    if not entries:
        raise CommandError("Partition reassignment list cannot be empty")
    out: dict[TopicPartition, list[int]] = {}
    duplicates: list[str] = []
    for entry in entries:
        tp, replicas = _partition_entry(entry)
        if tp in out:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        out[tp] = replicas
    if duplicates:
        raise CommandError(
            f"Partition reassignment contains duplicate topic partitions: {','.join(duplicates)}"
        )
    repeated = [
        f"{tp.topic}-{tp.partition} contains {', '.join(map(str, twice))}"
        for tp, rs in out.items()
        if (twice := sorted({r for r in rs if rs.count(r) > 1}))
    ]
    if repeated:
        raise CommandError(
            f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}"
        )
    return out


def _partition_entry(entry: object) -> tuple[TopicPartition, list[int]]:
    if not isinstance(entry, dict):
        raise CommandError(f"Each partition of the reassignment must be an object: {entry!r}")
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    shown = json.dumps(entry)
    if not isinstance(topic, str) or not topic:
        raise CommandError(f'A partition of the reassignment has no "topic": {shown}')
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise CommandError(f'A partition of the reassignment has no valid "partition": {shown}')
    if not isinstance(replicas, list) or not all(_whole(r) and r >= 0 for r in replicas):
        raise CommandError(f'"replicas" must be a list of broker ids: {shown}')
    if not replicas:
        raise CommandError(f"Partition {topic}-{partition} has an empty replica list")
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None:
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise CommandError(f'"log_dirs" must be a list of paths: {shown}')
        if len(log_dirs) != len(replicas):
            raise CommandError(
                f"Size of replicas list {replicas} is different from size of log dirs list "
                f"{log_dirs} for partition {topic}-{partition}"
            )
        if any(d != ANY_LOG_DIR and not d.startswith("/") for d in log_dirs):
            raise CommandError(
                f'"log_dirs" of partition {topic}-{partition} must be "any" or absolute '
                f"paths: {log_dirs}"
            )
    return TopicPartition(topic, partition), list(replicas)


def parse_replica_log_dirs(text: str) -> dict[ReplicaLogDir, str]:
    """The log dir moves of a reassignment document (checked by `parse_reassignment`
    first): the replicas whose `log_dirs` entry is a path rather than "any"."""
    moves: dict[ReplicaLogDir, str] = {}
    for entry in _load(text, "The reassignment JSON")["partitions"]:
        for broker, log_dir in zip(entry["replicas"], entry.get("log_dirs") or (), strict=False):
            if log_dir != ANY_LOG_DIR:
                moves[ReplicaLogDir(entry["topic"], entry["partition"], broker)] = log_dir
    return moves


def format_reassignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """A reassignment document, partitions sorted, as Kafka prints it (one line)."""
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(replicas),
            "log_dirs": [ANY_LOG_DIR] * len(replicas),
        }
        for tp, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))
