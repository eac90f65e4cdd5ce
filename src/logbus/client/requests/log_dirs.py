"""DescribeLogDirs v0-4: one broker's log dirs with the size, offset lag and future flag
of each partition replica they hold, and (v4) their volume's total and usable bytes.
AlterReplicaLogDirs v0-2: move replicas of one broker to other log dirs of it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.common import by_topic, send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from logbus.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from logbus.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from logbus.types import TopicPartition


class ReplicaInfo(NamedTuple):
    """A partition replica in a log dir: its segments' bytes, how far its log end is
    behind (Kafka's offset lag) and whether it is a future log (AlterReplicaLogDirs)."""

    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(NamedTuple):
    """A log dir of a broker: its error (KAFKA_STORAGE_ERROR for an offline dir, else
    None), its replicas, and its volume's total and usable bytes (None before v4)."""

    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


def build_describe_log_dirs(
    version: int, partitions: Iterable[TopicPartition] | None = None
) -> DescribeLogDirsRequest:
    """Describe the given partitions (None: every partition of the broker)."""
    if partitions is None:
        return {"topics": None}
    topics = by_topic((tp, tp.partition) for tp in map(TopicPartition._make, partitions))
    return {"topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}


def _bytes(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


def read_describe_log_dirs(response: DescribeLogDirsResponse) -> dict[str, LogDirDescription]:
    """Each log dir by its path; raises the response's error (v3+:
    CLUSTER_AUTHORIZATION_FAILED). A broker always has a log dir, so no dirs and no error
    is the refusal of a response without an error code (v0-2), as Kafka's admin reads it."""
    check(response.get("error_code", ErrorCode.NONE))
    if not response["results"]:
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no log dirs described")
    dirs: dict[str, LogDirDescription] = {}
    for result in response["results"]:
        code = result["error_code"]
        replicas = {
            TopicPartition(topic["name"], p["partition_index"]): ReplicaInfo(
                p["partition_size"], p["offset_lag"], p["is_future_key"]
            )
            for topic in result["topics"]
            for p in topic["partitions"]
        }
        dirs[result["log_dir"]] = LogDirDescription(
            None if code == ErrorCode.NONE else KafkaError(code, result["log_dir"]),
            replicas,
            _bytes(result.get("total_bytes")),
            _bytes(result.get("usable_bytes")),
        )
    return dirs


async def describe_log_dirs(
    conn: Connection, partitions: Iterable[TopicPartition] | None = None
) -> dict[str, LogDirDescription]:
    """The log dirs of `conn`'s broker (only `partitions`' replicas, if given)."""
    version = conn.choose_version(ApiKey.DESCRIBE_LOG_DIRS)
    body = build_describe_log_dirs(version, partitions)
    response = await send(conn, apis.DESCRIBE_LOG_DIRS, body, version)
    return read_describe_log_dirs(response)


def build_alter_replica_log_dirs(moves: dict[TopicPartition, str]) -> AlterReplicaLogDirsRequest:
    """Each partition's replica to the log dir (absolute path) it maps to."""
    by_path: dict[str, dict[str, list[int]]] = {}
    for tp, path in moves.items():
        by_path.setdefault(path, {}).setdefault(tp.topic, []).append(tp.partition)
    return {
        "dirs": [
            {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            for path, topics in by_path.items()
        ]
    }


async def alter_replica_log_dirs(
    conn: Connection, moves: dict[TopicPartition, str]
) -> dict[TopicPartition, KafkaError | None]:
    """Ask `conn`'s broker to move its replicas: each partition's error (None: moving, or
    there already)."""
    version = conn.choose_version(ApiKey.ALTER_REPLICA_LOG_DIRS)
    response = await send(
        conn, apis.ALTER_REPLICA_LOG_DIRS, build_alter_replica_log_dirs(moves), version
    )
    out: dict[TopicPartition, KafkaError | None] = {}
    for topic in response["results"]:
        for p in topic["partitions"]:
            tp = TopicPartition(topic["topic_name"], p["partition_index"])
            code = p["error_code"]
            where = f"{tp.topic}-{tp.partition}"
            out[tp] = None if code == ErrorCode.NONE else KafkaError(code, where)
    return out
