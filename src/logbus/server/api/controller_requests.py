"""The controller's requests to this broker (Kafka's ZooKeeper mode): LeaderAndIsr v0-7,
UpdateMetadata v0-8, StopReplica v0-4.

Each is decoded into the cluster metadata model and handed to the broker's
`ControllerLink` (`server/controller_link.py`), which owns the epochs below and applies
the request. Fencing, as Kafka's ReplicaManager and KafkaApis do it:
- a broker epoch (KIP-380) older than this broker's current one (the czxid of its
  `/brokers/ids/<id>` registration) is a request meant for an earlier incarnation:
  STALE_BROKER_EPOCH, nothing applied (-1 on either side: not checked);
- a controller epoch older than the newest this broker has seen comes from a deposed
  controller: STALE_CONTROLLER_EPOCH, nothing applied; otherwise it becomes the newest;
- per partition, LeaderAndIsr applies only a leader epoch newer than the replica's
  (otherwise STALE_CONTROLLER_EPOCH for that partition), and only to a replica of the
  partition (otherwise UNKNOWN_TOPIC_OR_PARTITION); StopReplica stops a replica only with
  a newer leader epoch, or none, or the deletion sentinel (otherwise FENCED_LEADER_EPOCH).

A topic name that is not a legal one is refused per partition (INVALID_TOPIC_EXCEPTION):
it would name a directory. The three requests of one broker are handled one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from logbus.client.requests.controller import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    SECURITY_PROTOCOL_NAMES,
    UNKNOWN_BROKER_EPOCH,
)
from logbus.controller.cluster_metadata import (
    BrokerInfo,
    EndPoint,
    PartitionState,
    TopicMetadata,
)
from logbus.controller.controller import stored_topic_configs
from logbus.controller.metadata_store import EmbeddedStore
from logbus.controller.topic_validation import INTERNAL_TOPICS, topic_name_error
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from logbus.protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from logbus.protocol.messages.stop_replica_request import StopReplicaRequest
from logbus.protocol.messages.stop_replica_response import (
    StopReplicaPartitionError,
    StopReplicaResponse,
)
from logbus.protocol.messages.update_metadata_request import UpdateMetadataRequest
from logbus.protocol.messages.update_metadata_response import UpdateMetadataResponse
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import AclOperation, ResourceType
from logbus.storage.errors import InconsistentTopicIdError, StorageError
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.controller.metadata_store import MetadataStore
    from logbus.server.config.broker_config import BrokerConfig
    from logbus.server.services import BrokerServices

log = logging.getLogger(__name__)

ZERO_UUID = UUID(int=0)


async def _stored_configs(store: MetadataStore, topic: str) -> dict[str, str]:
    """A topic's dynamic configs from the metadata store (off the loop unless the store
    is the embedded one, which lives on it)."""
    if isinstance(store, EmbeddedStore):
        return stored_topic_configs(store, topic)
    return await asyncio.to_thread(stored_topic_configs, store, topic)


# --- LeaderAndIsr -------------------------------------------------------------------------


@dataclass(slots=True)
class _TopicStates:
    name: str
    topic_id: UUID
    states: dict[int, LeaderAndIsrPartitionState]


def _leader_and_isr_topics(request: LeaderAndIsrRequest, version: int) -> list[_TopicStates]:
    if version >= 2:
        out: list[_TopicStates] = []
        for topic in request["topic_states"]:
            topic_id = topic["topic_id"] if version >= 5 else ZERO_UUID
            states = {s["partition_index"]: s for s in topic["partition_states"]}
            out.append(_TopicStates(topic["topic_name"], topic_id, states))
        return out
    by_name: dict[str, _TopicStates] = {}
    for state in request["ungrouped_partition_states"]:
        name = state["topic_name"]
        entry = by_name.setdefault(name, _TopicStates(name, ZERO_UUID, {}))
        entry.states[state["partition_index"]] = state
    return list(by_name.values())


def _leader_and_isr_response(
    version: int, error: ErrorCode, errors: dict[str, dict[int, ErrorCode]], ids: dict[str, UUID]
) -> LeaderAndIsrResponse:
    if version >= 5:
        topics: list[LeaderAndIsrTopicError] = [
            {
                "topic_id": ids[name],
                "partition_errors": [
                    {"partition_index": p, "error_code": code} for p, code in parts.items()
                ],
            }
            for name, parts in errors.items()
        ]
        return {"error_code": error, "topics": topics}
    partition_errors: list[LeaderAndIsrPartitionError] = [
        {"topic_name": name, "partition_index": p, "error_code": code}
        for name, parts in errors.items()
        for p, code in parts.items()
    ]
    return {"error_code": error, "partition_errors": partition_errors}


def _known_topic_id(services: BrokerServices, topic: _TopicStates) -> UUID:
    """The request's topic id; before v5 (none sent) the one this broker knows."""
    if topic.topic_id != ZERO_UUID:
        return topic.topic_id
    cached = services.metadata_cache.topics.get(topic.name)
    if cached is not None:
        return cached.topic_id
    for p in topic.states:
        part = services.replica_manager.partition(topic.name, p)
        if part is not None:
            return part.topic_id
    return ZERO_UUID


def _check_partition(
    services: BrokerServices, topic: str, topic_id: UUID, state: LeaderAndIsrPartitionState
) -> ErrorCode:
    index = state["partition_index"]
    if index < 0:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if TopicPartition(topic, index) in services.replica_manager.offline_partitions:
        # Its log dir failed: the controller takes this replica offline on this answer.
        return ErrorCode.KAFKA_STORAGE_ERROR
    current_epoch = -1
    part = services.replica_manager.partition(topic, index)
    existing = services.log_manager.get_log(topic, index)
    stored_id = part.topic_id if part is not None else None
    if stored_id is None and existing is not None:
        stored_id = existing.topic_id
    if stored_id is not None and topic_id not in (ZERO_UUID, stored_id):
        return ErrorCode.INCONSISTENT_TOPIC_ID
    if part is not None:
        current_epoch = part.leader_epoch
    if state["leader_epoch"] <= current_epoch:
        log.info(
            "ignoring LeaderAndIsr for %s-%d: leader epoch %d is not newer than %d",
            topic,
            index,
            state["leader_epoch"],
            current_epoch,
        )
        return ErrorCode.STALE_CONTROLLER_EPOCH
    if services.broker_id not in state["replicas"]:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def _create_logs(
    services: BrokerServices, topic: TopicMetadata, partitions: list[int]
) -> dict[int, ErrorCode]:
    """The logs of partitions new to this broker, created off the loop; what failed."""
    config = services.replica_manager.log_config_for(topic)
    failed: dict[int, ErrorCode] = {}
    topic_id = topic.topic_id if topic.topic_id != ZERO_UUID else None
    for p in partitions:
        try:
            services.log_manager.get_or_create_log(topic.name, p, config, topic_id)
        except InconsistentTopicIdError as exc:
            log.warning("LeaderAndIsr for %s-%d: %s", topic.name, p, exc)
            failed[p] = ErrorCode.INCONSISTENT_TOPIC_ID
        except (StorageError, OSError) as exc:
            log.warning("LeaderAndIsr for %s-%d: cannot create the log: %s", topic.name, p, exc)
            failed[p] = ErrorCode.KAFKA_STORAGE_ERROR
    return failed


async def handle_leader_and_isr(
    ctx: RequestContext, request: LeaderAndIsrRequest
) -> LeaderAndIsrResponse:
    services, version = ctx.services, ctx.version
    link = services.controller_link
    topics = _leader_and_isr_topics(request, version)
    ids = {t.name: t.topic_id for t in topics}
    async with link.lock:
        refused = link.fencing_error(
            "LeaderAndIsr",
            request["controller_id"],
            request["controller_epoch"],
            request["broker_epoch"] if version >= 2 else UNKNOWN_BROKER_EPOCH,
        )
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if refused is not None:
            every = {t.name: dict.fromkeys(t.states, refused) for t in topics}
            return _leader_and_isr_response(version, refused, every, ids)
        link.accept_controller_epoch(request["controller_epoch"])
        errors: dict[str, dict[int, ErrorCode]] = {}
        for topic in topics:
            codes = errors.setdefault(topic.name, {})
            if topic_name_error(topic.name) is not None:
                codes.update(dict.fromkeys(topic.states, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            topic_id = _known_topic_id(services, topic)
            checked = {
                p: _check_partition(services, topic.name, topic_id, state)
                for p, state in topic.states.items()
            }
            codes.update(checked)
            accepted = sorted(p for p, code in checked.items() if code == ErrorCode.NONE)
            if not accepted:
                continue
            cached = services.metadata_cache.topics.get(topic.name)
            configs = (
                dict(cached.configs)
                if cached is not None and cached.topic_id == topic_id
                else await _stored_configs(services.store, topic.name)
            )
            metadata = TopicMetadata(
                topic.name,
                topic_id,
                {p: _partition_state(topic.states[p]) for p in accepted},
                configs,
                is_internal=topic.name in INTERNAL_TOPICS,
            )
            replica_manager = services.replica_manager
            new = [p for p in accepted if replica_manager.partition(topic.name, p) is None]
            if new:
                failed = await asyncio.to_thread(_create_logs, services, metadata, new)
                codes.update(failed)
                accepted = [p for p in accepted if p not in failed]
            if accepted:
                link.apply_leader_and_isr(metadata, accepted)
        return _leader_and_isr_response(version, ErrorCode.NONE, errors, ids)


def _partition_state(state: LeaderAndIsrPartitionState) -> PartitionState:
    return PartitionState(
        state["leader"],
        state["leader_epoch"],
        tuple(state["isr"]),
        tuple(state["replicas"]),
        state["controller_epoch"],
        state["partition_epoch"],
    )


# --- UpdateMetadata -----------------------------------------------------------------------


def _live_brokers(
    config: BrokerConfig, request: UpdateMetadataRequest, version: int
) -> list[BrokerInfo]:
    """The live brokers; each one's client-facing endpoint is that of this broker's own
    first listener name where it has one (Kafka answers with the listener asked on)."""
    ours = config.listeners[0].name if config.listeners else "PLAINTEXT"
    out: list[BrokerInfo] = []
    for entry in request["live_brokers"]:
        if version == 0:
            out.append(BrokerInfo(entry["id"], entry["v0_host"], entry["v0_port"]))
            continue
        endpoints = tuple(
            EndPoint(
                ep["listener"] if version >= 3 else _protocol(ep["security_protocol"]),
                ep["host"],
                ep["port"],
                _protocol(ep["security_protocol"]),
            )
            for ep in entry["endpoints"]
        )
        rack = entry["rack"] if version >= 2 else None
        if not endpoints:
            out.append(BrokerInfo(entry["id"], "", -1, rack))
            continue
        main = next((ep for ep in endpoints if ep.listener == ours), endpoints[0])
        out.append(BrokerInfo(entry["id"], main.host, main.port, rack, main.listener, endpoints))
    return out


def _protocol(code: int) -> str:
    return SECURITY_PROTOCOL_NAMES.get(code, "PLAINTEXT")


def _update_metadata_states(
    request: UpdateMetadataRequest, version: int
) -> list[tuple[str, UUID, list[dict[str, Any]]]]:
    if version >= 5:
        return [
            (
                t["topic_name"],
                t["topic_id"] if version >= 7 else ZERO_UUID,
                [dict(s) for s in t["partition_states"]],
            )
            for t in request["topic_states"]
        ]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for state in request["ungrouped_partition_states"]:
        by_name.setdefault(state["topic_name"], []).append(dict(state))
    return [(name, ZERO_UUID, states) for name, states in by_name.items()]


async def _merge_topic(
    services: BrokerServices, name: str, topic_id: UUID, states: list[dict[str, Any]]
) -> TopicMetadata | None:
    """The cached topic with the request's partition states applied (partitions led by
    LEADER_DURING_DELETE removed); None when no partition is left."""
    cached = services.metadata_cache.topics.get(name)
    if cached is not None and topic_id in (ZERO_UUID, cached.topic_id):
        topic = TopicMetadata(
            name, cached.topic_id, dict(cached.partitions), dict(cached.configs), cached.is_internal
        )
    else:
        topic = TopicMetadata(
            name,
            topic_id,
            configs=await _stored_configs(services.store, name),
            is_internal=name in INTERNAL_TOPICS,
        )
    for s in states:
        index = s["partition_index"]
        if index < 0:
            continue
        if s["leader"] == LEADER_DURING_DELETE:
            topic.partitions.pop(index, None)
            continue
        topic.partitions[index] = PartitionState(
            s["leader"],
            s["leader_epoch"],
            tuple(s["isr"]),
            tuple(s["replicas"]),
            s["controller_epoch"],
            s["zk_version"],
        )
    return topic if topic.partitions else None


async def handle_update_metadata(
    ctx: RequestContext, request: UpdateMetadataRequest
) -> UpdateMetadataResponse:
    services, version = ctx.services, ctx.version
    link = services.controller_link
    async with link.lock:
        refused = link.fencing_error(
            "UpdateMetadata",
            request["controller_id"],
            request["controller_epoch"],
            request["broker_epoch"] if version >= 5 else UNKNOWN_BROKER_EPOCH,
        )
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if refused is not None:
            return {"error_code": refused}
        brokers = _live_brokers(ctx.config, request, version)
        topics: list[TopicMetadata] = []
        deleted: list[str] = []
        for name, topic_id, states in _update_metadata_states(request, version):
            if topic_name_error(name) is not None:
                log.warning("UpdateMetadata names an illegal topic %r: left out", name)
                continue
            merged = await _merge_topic(services, name, topic_id, states)
            if merged is not None:
                topics.append(merged)
            elif name in services.metadata_cache.topics:
                deleted.append(name)
        link.accept_controller_epoch(request["controller_epoch"])
        link.apply_update_metadata(brokers, topics, deleted, request["controller_id"])
        return {"error_code": ErrorCode.NONE}


# --- StopReplica --------------------------------------------------------------------------


def _stop_replica_partitions(
    request: StopReplicaRequest, version: int
) -> list[tuple[str, int, int, bool]]:
    """(topic, partition, leader epoch, delete) for every partition named."""
    if version >= 3:
        return [
            (t["topic_name"], p["partition_index"], p["leader_epoch"], p["delete_partition"])
            for t in request["topic_states"]
            for p in t["partition_states"]
        ]
    delete = request["delete_partitions"]
    if version >= 1:
        return [
            (t["name"], p, NO_EPOCH, delete)
            for t in request["topics"]
            for p in t["partition_indexes"]
        ]
    return [
        (p["topic_name"], p["partition_index"], NO_EPOCH, delete)
        for p in request["ungrouped_partitions"]
    ]


async def handle_stop_replica(
    ctx: RequestContext, request: StopReplicaRequest
) -> StopReplicaResponse:
    services, version = ctx.services, ctx.version
    link = services.controller_link
    partitions = _stop_replica_partitions(request, version)
    async with link.lock:
        refused = link.fencing_error(
            "StopReplica",
            request["controller_id"],
            request["controller_epoch"],
            request["broker_epoch"] if version >= 1 else UNKNOWN_BROKER_EPOCH,
        )
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if refused in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
            every: list[StopReplicaPartitionError] = [
                {"topic_name": t, "partition_index": p, "error_code": refused}
                for t, p, _, _ in partitions
            ]
            return {"error_code": refused, "partition_errors": every}
        if refused is not None:
            return {"error_code": refused, "partition_errors": []}
        link.accept_controller_epoch(request["controller_epoch"])
        errors: dict[tuple[str, int], ErrorCode] = {}
        stopped: dict[tuple[str, bool], list[int]] = {}
        for topic, index, epoch, delete in partitions:
            code = ErrorCode.NONE
            part = services.replica_manager.partition(topic, index)
            if topic_name_error(topic) is not None:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif (
                part is not None
                and epoch not in (EPOCH_DURING_DELETE, NO_EPOCH)
                and epoch <= part.leader_epoch
            ):
                log.info(
                    "ignoring StopReplica for %s-%d: leader epoch %d is not newer than %d",
                    topic,
                    index,
                    epoch,
                    part.leader_epoch,
                )
                code = ErrorCode.FENCED_LEADER_EPOCH
            else:
                stopped.setdefault((topic, delete), []).append(index)
            errors[(topic, index)] = code
        for (topic, delete), indexes in stopped.items():
            link.apply_stop_replica(topic, indexes, delete)
        result: list[StopReplicaPartitionError] = [
            {"topic_name": t, "partition_index": p, "error_code": code}
            for (t, p), code in errors.items()
        ]
        return {"error_code": ErrorCode.NONE, "partition_errors": result}


HANDLERS = [
    ApiHandler(ApiKey.LEADER_AND_ISR, 0, 7, handle_leader_and_isr),
    ApiHandler(ApiKey.STOP_REPLICA, 0, 4, handle_stop_replica),
    ApiHandler(ApiKey.UPDATE_METADATA, 0, 8, handle_update_metadata),
]
