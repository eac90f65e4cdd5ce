"""DescribeLogDirs v0-4 and AlterReplicaLogDirs v0-2: each entry of this broker's
`log.dirs` with the partitions it holds (kafka-log-dirs.sh, the admin's
`describe_log_dirs`), and moving a replica between them (KIP-113,
`kafka-reassign-partitions` with log dirs, the admin's `alter_replica_log_dirs`).

DescribeLogDirs, as Kafka answers: a partition's size is the bytes of all its segments
(the segments' sizes kept in memory, so nothing here walks a directory or blocks the
loop); a current replica's offset lag is how far its log end is behind its high watermark
(never negative, so 0 for a leader and a follower alike); a replica moving to this dir is
listed there too with `is_future_key` true and, as its lag, how far its future log is
behind the current one. v4 adds the volume's total and usable bytes (`os.statvfs`). Null
topics means every partition; partitions this broker holds no log of are left out, not
errors (and, as in Kafka, a dir names each topic it holds, with no partitions when none
was asked for). The whole request needs DESCRIBE on the cluster: refused, it answers no
dirs and, from v3, CLUSTER_AUTHORIZATION_FAILED. A dir whose volume cannot be read (gone,
unreadable) is answered KAFKA_STORAGE_ERROR with no partitions, as Kafka answers an
offline dir, and so is a dir that failed while the broker ran (LogDirFailureChannel).

AlterReplicaLogDirs needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition otherwise). Per partition, as Kafka's ReplicaManager answers: a path that is
not one of `log.dirs` LOG_DIR_NOT_FOUND; a partition this broker holds no replica of
REPLICA_NOT_AVAILABLE; a future log that cannot be created KAFKA_STORAGE_ERROR; otherwise
NONE and the move starts (`replica/alter_log_dirs.py`), or nothing happens when the
replica is in that dir already.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from logbus.protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
)
from logbus.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from logbus.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.errors import KafkaStorageError
from logbus.storage.log import Log
from logbus.storage.log_manager import LogManager
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)

_INT64_MAX = (1 << 63) - 1


def _volume(path: Path) -> tuple[int, int]:
    """The total and usable bytes of the file system holding `path` (OSError when it
    cannot be read)."""
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    return min(total, _INT64_MAX), min(usable, _INT64_MAX)


def _partition(tp: TopicPartition, log: Log) -> DescribeLogDirsPartition:
    return {
        "partition_index": tp.partition,
        "partition_size": log.size_in_bytes,
        "offset_lag": max(log.high_watermark - log.log_end_offset, 0),
        "is_future_key": False,
    }


def _future_partition(
    tp: TopicPartition, future: Log, current: Log | None
) -> DescribeLogDirsPartition:
    behind = 0 if current is None else current.log_end_offset - future.log_end_offset
    return {
        "partition_index": tp.partition,
        "partition_size": future.size_in_bytes,
        "offset_lag": max(behind, 0),
        "is_future_key": True,
    }


def describe_dir(
    path: Path,
    logs: Iterable[tuple[TopicPartition, Log]],
    wanted: set[TopicPartition] | None,
    futures: Iterable[tuple[TopicPartition, Log, Log | None]] = (),
    *,
    offline: bool = False,
) -> DescribeLogDirsResult:
    """One log dir's answer: its partitions (those in `wanted`, or all) by topic, and
    the future logs of replicas moving to it (with their current logs, for the lag)."""
    result: DescribeLogDirsResult = {
        "error_code": ErrorCode.NONE,
        "log_dir": str(path),
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
    }
    try:
        if offline:
            raise OSError(f"{path} is offline (it failed while the broker ran)")
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
        result["total_bytes"], result["usable_bytes"] = _volume(path)
    except OSError as exc:
        logger.warning("log dir %s cannot be described: %s", path, exc)
        result["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return result
    # Every topic the dir holds is named, as Kafka answers, even one none of whose
    # partitions was asked for (its list is then empty).
    topics: dict[str, list[DescribeLogDirsPartition]] = {}
    for tp, log in sorted(logs, key=lambda entry: entry[0]):
        partitions = topics.setdefault(tp.topic, [])
        if wanted is None or tp in wanted:
            partitions.append(_partition(tp, log))
    for tp, future, current in sorted(futures, key=lambda entry: entry[0]):
        partitions = topics.setdefault(tp.topic, [])
        if wanted is None or tp in wanted:
            partitions.append(_future_partition(tp, future, current))
    result["topics"] = [
        DescribeLogDirsTopic(name=name, partitions=partitions)
        for name, partitions in topics.items()
    ]
    return result


async def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results": [],
        }
    topics = request.get("topics")
    wanted = (
        None
        if topics is None
        else {TopicPartition(t["topic"], p) for t in topics for p in t["partitions"]}
    )
    manager = ctx.services.log_manager
    futures = manager.future_logs_by_dir()
    results = [
        describe_dir(
            path,
            logs,
            wanted,
            _with_current(manager, futures.get(path, [])),
            offline=path in manager.offline_dirs,
        )
        for path, logs in manager.logs_by_dir()
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def _with_current(
    manager: LogManager, futures: list[tuple[TopicPartition, Log]]
) -> list[tuple[TopicPartition, Log, Log | None]]:
    return [(tp, future, manager.get_log(tp.topic, tp.partition)) for tp, future in futures]


async def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER)
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for entry in request.get("dirs") or []:
        for topic in entry.get("topics") or []:
            for partition in topic.get("partitions") or []:
                code = (
                    _alter_one(ctx, TopicPartition(topic["name"], partition), entry["path"])
                    if allowed
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                results.setdefault(topic["name"], []).append(
                    {"partition_index": partition, "error_code": code}
                )
    return {
        "throttle_time_ms": 0,
        "results": [
            {"topic_name": name, "partitions": partitions} for name, partitions in results.items()
        ],
    }


def _alter_one(ctx: RequestContext, tp: TopicPartition, path: str) -> ErrorCode:
    replicas = ctx.services.replica_manager
    if not ctx.services.log_manager.has_log_dir(path):
        return ErrorCode.LOG_DIR_NOT_FOUND
    if replicas.partition(tp.topic, tp.partition) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    try:
        replicas.log_dir_mover.move(tp, path)
    except KafkaStorageError as exc:
        logger.warning("cannot move %s-%d to %s: %s", tp.topic, tp.partition, path, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


HANDLERS = [
    ApiHandler(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, handle_describe_log_dirs),
    ApiHandler(ApiKey.ALTER_REPLICA_LOG_DIRS, 0, 2, handle_alter_replica_log_dirs),
]
