"""DescribeLogDirs v0-4: each entry of this broker's `log.dirs` with the partitions it
holds (kafka-log-dirs.sh, the admin's `describe_log_dirs`).

As Kafka answers: a partition's size is the bytes of all its segments (the segments'
sizes kept in memory, so nothing here walks a directory or blocks the loop); its offset
lag is how far its log end is behind its high watermark (never negative, so 0 for a
leader and a follower alike: Kafka's non-zero lags are those of future logs, which
AlterReplicaLogDirs creates and logbus does not serve); `is_future_key` is false. v4
adds the volume's total and usable bytes (`os.statvfs`). Null topics means every
partition; partitions this broker holds no log of are left out, not errors (and, as in
Kafka, a dir names each topic it holds, with no partitions when none was asked for). The whole
request needs DESCRIBE on the cluster: refused, it answers no dirs and, from v3,
CLUSTER_AUTHORIZATION_FAILED. A dir whose volume cannot be read (gone, unreadable) is
answered KAFKA_STORAGE_ERROR with no partitions, as Kafka answers an offline dir.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from logbus.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.log import Log
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


def describe_dir(
    path: Path,
    logs: Iterable[tuple[TopicPartition, Log]],
    wanted: set[TopicPartition] | None,
) -> DescribeLogDirsResult:
    """One log dir's answer: its partitions (those in `wanted`, or all) by topic."""
    result: DescribeLogDirsResult = {
        "error_code": ErrorCode.NONE,
        "log_dir": str(path),
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
    }
    try:
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
    results = [
        describe_dir(path, logs, wanted)
        for path, logs in ctx.services.log_manager.logs_by_dir()
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


HANDLERS = [ApiHandler(ApiKey.DESCRIBE_LOG_DIRS, 0, 4, handle_describe_log_dirs)]
