"""How a voter answers the quorum's requests (KIP-595, KIP-630, KIP-642): Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, each a
function of the `RaftClient` and the decoded request body that returns the response
body. Stale epochs get FENCED_LEADER_EPOCH, another cluster INCONSISTENT_CLUSTER_ID, a
node outside the voters INCONSISTENT_VOTER_SET, and none of them changes any state.

The entry point is `handle`, which `RaftServer` calls for each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from logbus.protocol import ApiKey, ErrorCode
from logbus.raft import raft_messages as msg
from logbus.raft.quorum_state import NO_ID, Role
from logbus.raft.raft_client import RaftClient
from logbus.raft.snapshots import SnapshotId
from logbus.storage.errors import OffsetOutOfRangeError

__all__ = ["handle"]

# Kafka's POSITION_OUT_OF_RANGE (FetchSnapshot), missing from the generated error codes.
POSITION_OUT_OF_RANGE = 99

Handler = Callable[[RaftClient, dict[str, Any]], Awaitable[dict[str, Any]]]


def _epoch_answer(
    client: RaftClient, error: ErrorCode = ErrorCode.NONE, **extra: Any
) -> dict[str, Any]:
    return msg.epoch_response(
        ErrorCode.NONE, client.leader_id, client.epoch, partition_error=error, **extra
    )


def _refusal(
    client: RaftClient, body: dict[str, Any], part: dict[str, Any] | None, voter: int, **extra: Any
) -> dict[str, Any] | None:
    """The answer to a request that must change nothing, else None."""
    if not client.check_cluster(body.get("cluster_id")):
        return msg.epoch_response(ErrorCode.INCONSISTENT_CLUSTER_ID, NO_ID, -1, **extra)
    if part is None:
        return msg.epoch_response(ErrorCode.INVALID_REQUEST, NO_ID, -1, **extra)
    if voter not in client.config.voters or client.node_id not in client.config.voters:
        return _epoch_answer(client, ErrorCode.INCONSISTENT_VOTER_SET, **extra)
    return None


async def handle_vote(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    part = msg.only_partition(body)
    candidate = -1 if part is None else part["candidate_id"]
    refused = _refusal(client, body, part, candidate, vote_granted=False)
    if refused is not None or part is None:
        return refused or {}
    epoch = part["candidate_epoch"]
    if epoch < client.epoch:
        return _epoch_answer(client, ErrorCode.FENCED_LEADER_EPOCH, vote_granted=False)
    if epoch > client.epoch:
        client.observe_epoch(epoch, NO_ID)
    state = client.state
    log = client.metadata_log
    up_to_date = (part["last_offset_epoch"], part["last_offset"]) >= (
        log.last_fetched_epoch,
        log.end_offset,
    )
    granted = False
    if up_to_date and state.role is Role.UNATTACHED:
        client.grant_vote(candidate)
        granted = True
    elif up_to_date and state.role is Role.VOTED and state.voted_id == candidate:
        granted = True
    return _epoch_answer(client, vote_granted=granted)


async def handle_begin_quorum_epoch(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    part = msg.only_partition(body)
    leader = -1 if part is None else part["leader_id"]
    refused = _refusal(client, body, part, leader)
    if refused is not None or part is None:
        return refused or {}
    epoch = part["leader_epoch"]
    if epoch < client.epoch:
        return _epoch_answer(client, ErrorCode.FENCED_LEADER_EPOCH)
    if epoch == client.epoch and client.leader_id not in (NO_ID, leader):
        return _epoch_answer(client, ErrorCode.INCONSISTENT_VOTER_SET)
    client.observe_epoch(epoch, leader)
    return _epoch_answer(client)


async def handle_end_quorum_epoch(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    part = msg.only_partition(body)
    leader = -1 if part is None else part["leader_id"]
    refused = _refusal(client, body, part, leader)
    if refused is not None or part is None:
        return refused or {}
    epoch = part["leader_epoch"]
    if epoch < client.epoch:
        return _epoch_answer(client, ErrorCode.FENCED_LEADER_EPOCH)
    if epoch > client.epoch:
        client.observe_epoch(epoch, NO_ID)
    elif client.state.role is Role.FOLLOWER and client.state.leader_id == leader:
        client.leader_resigned(part.get("preferred_successors") or [])
    return _epoch_answer(client)


def _fetch_error(client: RaftClient, error: ErrorCode) -> dict[str, Any]:
    log = client.metadata_log
    return msg.fetch_response(
        ErrorCode.NONE,
        msg.fetch_partition_response(
            error, client.leader_id, client.epoch, log.high_watermark, log.start_offset
        ),
    )


def _fetch_partition(body: dict[str, Any]) -> dict[str, Any] | None:
    for topic in body.get("topics") or ():
        if (
            topic.get("topic") == msg.METADATA_TOPIC_NAME
            or topic.get("topic_id") == msg.METADATA_TOPIC_ID
        ):
            for partition in topic.get("partitions") or ():
                if partition.get("partition") == 0:
                    return dict(partition)
    return None


async def handle_fetch(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    if not client.check_cluster(body.get("cluster_id")):
        return msg.fetch_response(ErrorCode.INCONSISTENT_CLUSTER_ID, None)
    part = _fetch_partition(body)
    if part is None:
        return msg.fetch_response(ErrorCode.INVALID_REQUEST, None)
    replica_id = body.get("replica_id", -1)
    if replica_id < 0:  # v15+: inside ReplicaState
        replica_id = (body.get("replica_state") or {}).get("replica_id", -1)
    epoch = part.get("current_leader_epoch", -1)
    if epoch < client.epoch:
        return _fetch_error(client, ErrorCode.FENCED_LEADER_EPOCH)
    if epoch > client.epoch:
        return _fetch_error(client, ErrorCode.UNKNOWN_LEADER_EPOCH)
    if not client.is_leader:
        return _fetch_error(client, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    log = client.metadata_log
    fetch_offset = part["fetch_offset"]
    answer = msg.fetch_partition_response(
        ErrorCode.NONE, client.leader_id, client.epoch, log.high_watermark, log.start_offset
    )
    last_epoch = part.get("last_fetched_epoch", -1)
    if fetch_offset < log.start_offset or fetch_offset > log.end_offset:
        return _with_snapshot_or_divergence(client, answer, fetch_offset, last_epoch)
    if fetch_offset > 0 and last_epoch >= 0:
        found = log.end_offset_for_epoch(last_epoch)
        if found.epoch != last_epoch or found.end_offset < fetch_offset:
            return _with_snapshot_or_divergence(client, answer, fetch_offset, last_epoch)
    high_watermark = log.high_watermark
    client.follower_fetched(replica_id, fetch_offset)
    wait_ms = part.get("max_wait_ms", body.get("max_wait_ms", 0))
    if fetch_offset >= log.end_offset and log.high_watermark == high_watermark and wait_ms > 0:
        await client.wait_change(wait_ms / 1000)
        if not client.is_leader or client.epoch != epoch:
            return _fetch_error(client, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    try:
        records = log.read(fetch_offset, 1024 * 1024) if fetch_offset < log.end_offset else b""
    except OffsetOutOfRangeError:
        return _with_snapshot_or_divergence(client, answer, fetch_offset, last_epoch)
    answer.update(
        records=records, high_watermark=log.high_watermark, log_start_offset=log.start_offset
    )
    return msg.fetch_response(ErrorCode.NONE, answer)


def _with_snapshot_or_divergence(
    client: RaftClient, answer: dict[str, Any], fetch_offset: int, last_epoch: int
) -> dict[str, Any]:
    log = client.metadata_log
    snapshot = log.snapshot_id
    found = log.end_offset_for_epoch(max(last_epoch, 0))
    if snapshot is not None and (
        fetch_offset < log.start_offset or found.end_offset < log.start_offset
    ):
        answer["snapshot_id"] = {"end_offset": snapshot.end_offset, "epoch": snapshot.epoch}
    else:
        end = min(found.end_offset, log.end_offset)
        answer["diverging_epoch"] = {"epoch": found.epoch, "end_offset": end}
    return msg.fetch_response(ErrorCode.NONE, answer)


async def handle_fetch_snapshot(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    if not client.check_cluster(body.get("cluster_id")):
        return msg.fetch_snapshot_response(ErrorCode.INCONSISTENT_CLUSTER_ID, None)
    part = msg.only_partition(body)
    if part is None:
        return msg.fetch_snapshot_response(ErrorCode.INVALID_REQUEST, None)
    answer: dict[str, Any] = {
        "index": 0,
        "error_code": 0,
        "snapshot_id": part["snapshot_id"],
        "current_leader": {"leader_id": client.leader_id, "leader_epoch": client.epoch},
        "size": 0,
        "position": part["position"],
        "unaligned_records": b"",
    }
    epoch = part["current_leader_epoch"]
    error = ErrorCode.NONE
    if epoch < client.epoch:
        error = ErrorCode.FENCED_LEADER_EPOCH
    elif epoch > client.epoch:
        error = ErrorCode.UNKNOWN_LEADER_EPOCH
    elif not client.is_leader:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    wanted = SnapshotId(part["snapshot_id"]["end_offset"], part["snapshot_id"]["epoch"])
    if error == ErrorCode.NONE and wanted != client.metadata_log.snapshot_id:
        error = ErrorCode.SNAPSHOT_NOT_FOUND
    if error != ErrorCode.NONE:
        answer["error_code"] = int(error)
        return msg.fetch_snapshot_response(ErrorCode.NONE, answer)
    data = client.metadata_log.snapshot_bytes(wanted)
    position = part["position"]
    if not 0 <= position <= len(data):
        answer["error_code"] = POSITION_OUT_OF_RANGE
        return msg.fetch_snapshot_response(ErrorCode.NONE, answer)
    limit = max(1, body.get("max_bytes", 1024 * 1024))
    answer.update(size=len(data), unaligned_records=data[position : position + limit])
    return msg.fetch_snapshot_response(ErrorCode.NONE, answer)


async def handle_describe_quorum(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    partition: dict[str, Any] = {"partition_index": 0, "error_code": 0}
    if not client.is_leader:
        partition["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        partition.update(leader_id=client.leader_id, leader_epoch=client.epoch, high_watermark=-1)
    else:

        def replica(node: int) -> dict[str, Any]:
            p = client.progress[node]
            return {
                "replica_id": node,
                "log_end_offset": p.end_offset,
                "last_fetch_timestamp": p.last_fetch_ms,
                "last_caught_up_timestamp": p.last_caught_up_ms,
            }

        partition.update(
            leader_id=client.node_id,
            leader_epoch=client.epoch,
            high_watermark=client.high_watermark,
            current_voters=[replica(v) for v in client.voters],
            observers=[
                replica(n) for n in sorted(client.progress) if n not in client.config.voters
            ],
        )
    return {
        "error_code": 0,
        "topics": [{"topic_name": msg.METADATA_TOPIC_NAME, "partitions": [partition]}],
    }


CONTROLLER_ENDPOINTS = 2  # DescribeCluster's endpoint type of controllers (KIP-919)


async def handle_describe_cluster(client: RaftClient, body: dict[str, Any]) -> dict[str, Any]:
    """The controllers (the voters, at the addresses this voter knows) and the active
    one, as Kafka's controllers answer an admin client given --bootstrap-controller."""
    answer: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": CONTROLLER_ENDPOINTS,
        "cluster_id": client.config.cluster_id,
        "controller_id": client.leader_id,
        "brokers": [
            {"broker_id": v.node_id, "host": v.host, "port": v.port, "rack": None}
            for v in client.config.voters.values()
        ],
    }
    if body.get("endpoint_type", CONTROLLER_ENDPOINTS) != CONTROLLER_ENDPOINTS:
        answer.update(
            error_code=int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
            error_message="The request was sent to a controller endpoint, not a broker's",
            brokers=[],
        )
    return answer


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.VOTE: handle_vote,
    ApiKey.BEGIN_QUORUM_EPOCH: handle_begin_quorum_epoch,
    ApiKey.END_QUORUM_EPOCH: handle_end_quorum_epoch,
    ApiKey.FETCH: handle_fetch,
    ApiKey.FETCH_SNAPSHOT: handle_fetch_snapshot,
    ApiKey.DESCRIBE_QUORUM: handle_describe_quorum,
}


async def handle(client: RaftClient, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
    """The response body to one Raft request."""
    return await HANDLERS[api_key](client, body)
