"""OffsetForLeaderEpoch v0-4 (KIP-101, KIP-279, KIP-320): for each partition this broker
leads, the largest leader epoch <= the one asked for that its log knows and the offset
where that epoch ended (the log end for the current epoch); UNDEFINED_EPOCH (-1) and
UNDEFINED_EPOCH_OFFSET (-1) when it knows none. Followers ask it to find where their log
diverged; `current_leader_epoch` (v2+) is fenced as Fetch does (FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH). A broker that does not lead the partition answers
NOT_LEADER_OR_FOLLOWER, one that does not know it UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
)
from logbus.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.replica.partition import PartitionError
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    cache = ctx.services.metadata_cache
    replica_manager = ctx.services.replica_manager
    topics: list[OffsetForLeaderTopicResult] = []
    names = [t["topic"] for t in request["topics"]]
    # a follower (replica id >= 0, v3+) needs ClusterAction, a client Describe on the topic
    if request.get("replica_id", -1) >= 0:
        allowed = (
            set(names)
            if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
            else set()
        )
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    for topic in request["topics"]:
        name = topic["topic"]
        answers: list[EpochEndOffset] = []
        for p in topic["partitions"]:
            index = p["partition"]
            answer: EpochEndOffset = {
                "error_code": ErrorCode.NONE,
                "partition": index,
                "leader_epoch": UNDEFINED_EPOCH,
                "end_offset": UNDEFINED_EPOCH_OFFSET,
            }
            part = replica_manager.partition(name, index)
            if name not in allowed:
                answer["error_code"] = refused
            elif part is None:
                answer["error_code"] = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if cache.partition(name, index) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            else:
                try:
                    epoch, end = part.last_offset_for_leader_epoch(
                        p["current_leader_epoch"], p["leader_epoch"]
                    )
                except PartitionError as exc:
                    answer["error_code"] = exc.error
                else:
                    answer["leader_epoch"], answer["end_offset"] = epoch, end
            answers.append(answer)
        topics.append({"topic": name, "partitions": answers})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS = [ApiHandler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4, handle_offset_for_leader_epoch)]
