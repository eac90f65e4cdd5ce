"""The controller's requests to brokers (Kafka's ZooKeeper mode): LeaderAndIsr v0-7,
UpdateMetadata v0-8 and StopReplica v0-4, each stamped with the controller's id and epoch
and the destination broker's epoch (KIP-380).

Builders take the cluster metadata model (`logbus.controller.cluster_metadata`) through
the read-only views below (`BrokerView`, `TopicView`, ...): the client does not import the
controller, which sits above it; readers turn a response into its request-level error and
one error per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from logbus.protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
)
from logbus.protocol.messages.stop_replica_request import StopReplicaRequest
from logbus.protocol.messages.stop_replica_response import StopReplicaResponse
from logbus.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from logbus.protocol.messages.update_metadata_response import UpdateMetadataResponse
from logbus.types import TopicPartition

UNKNOWN_BROKER_EPOCH: Final = -1
LEADER_DURING_DELETE: Final = -2
"""The leader an UpdateMetadata gives the partitions of a topic being deleted."""
EPOCH_DURING_DELETE: Final = -2
"""StopReplica's leader epoch for a deleted topic: stops the replica whatever its epoch."""
NO_EPOCH: Final = -1
"""StopReplica's leader epoch when the controller knows none: no epoch check."""
# LeaderAndIsr v5+ request types (AbstractControlRequest.Type).
INCREMENTAL: Final = 1
FULL: Final = 2
SECURITY_PROTOCOL_IDS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES: Final = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}

_GROUPED_LEADER_AND_ISR = 2  # topic_states instead of ungrouped partition states
_LEADER_AND_ISR_TOPIC_IDS = 5
_GROUPED_UPDATE_METADATA = 5
_STOP_REPLICA_TOPICS = 1
_STOP_REPLICA_STATES = 3


class EndpointView(Protocol):
    """One listener of a broker (the controller's `EndPoint`)."""

    @property
    def listener(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def security_protocol(self) -> str: ...


class BrokerView(Protocol):
    """A live broker (the controller's `BrokerView`)."""

    @property
    def broker_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def rack(self) -> str | None: ...
    def all_endpoints(self) -> tuple[EndpointView, ...]: ...
    def endpoint(self, listener: str | None) -> EndpointView: ...


class PartitionStateView(Protocol):
    """A partition's leadership (the controller's `PartitionStateView`); `version` is its
    node's version, sent as the partition epoch."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def version(self) -> int: ...


class TopicView(Protocol):
    """A topic and its partitions' states (the controller's `TopicView`)."""

    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> UUID: ...
    @property
    def partitions(self) -> Mapping[int, PartitionStateView]: ...


@dataclass(frozen=True, slots=True)
class ControlHeader:
    """What every controller request carries: who sent it, in which controller epoch,
    to which incarnation (broker epoch) of the destination."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


@dataclass(slots=True)
class ControlResult:
    """A controller request's answer: its error, and each partition's."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)

    def failed(self) -> dict[TopicPartition, ErrorCode]:
        return {tp: e for tp, e in self.partitions.items() if e != ErrorCode.NONE}


def error_code(code: int) -> ErrorCode:
    """A response's error code; one this client does not know is UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


# --- LeaderAndIsr -------------------------------------------------------------------------


def _leader_and_isr_state(
    topic: str, index: int, state: PartitionStateView, grouped: bool
) -> LeaderAndIsrPartitionState:
    entry: LeaderAndIsrPartitionState = {
        "partition_index": index,
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "partition_epoch": state.version,
        "replicas": list(state.replicas),
        "adding_replicas": [],
        "removing_replicas": [],
        "is_new": False,
        "leader_recovery_state": 0,
    }
    if not grouped:
        entry["topic_name"] = topic
    return entry


def build_leader_and_isr(
    version: int,
    header: ControlHeader,
    topics: Iterable[tuple[TopicView, Iterable[int]]],
    live_leaders: Iterable[BrokerView] = (),
    *,
    listener: str | None = None,
    request_type: int = INCREMENTAL,
) -> LeaderAndIsrRequest:
    """Leadership of the given partitions of each topic; `live_leaders` are the brokers
    leading them (their `listener` endpoint: the inter-broker one). The partition states
    go under their topic (with its id) from the grouped versions on, in one flat list
    before."""
    grouped = version >= _GROUPED_LEADER_AND_ISR
    body: LeaderAndIsrRequest = {
        "controller_id": header.controller_id,
        "controller_epoch": header.controller_epoch,
    }
    if version >= _GROUPED_LEADER_AND_ISR:
        body["broker_epoch"] = header.broker_epoch
    if version >= _LEADER_AND_ISR_TOPIC_IDS:
        body["type"] = request_type

    def states(topic: TopicView, ps: Iterable[int]) -> list[LeaderAndIsrPartitionState]:
        return [_leader_and_isr_state(topic.name, p, topic.partitions[p], grouped) for p in ps]

    if grouped:
        body["topic_states"] = [
            {
                "topic_name": topic.name,
                "topic_id": topic.topic_id,
                "partition_states": states(topic, ps),
            }
            for topic, ps in topics
        ]
    else:
        body["ungrouped_partition_states"] = [
            state for topic, ps in topics for state in states(topic, ps)
        ]
    leaders: list[LeaderAndIsrLiveLeader] = []
    for broker in live_leaders:
        ep = broker.endpoint(listener)
        leaders.append({"broker_id": broker.broker_id, "host_name": ep.host, "port": ep.port})
    body["live_leaders"] = leaders
    return body


def _control_result(
    response: LeaderAndIsrResponse | StopReplicaResponse,
    errors: Iterable[tuple[str, LeaderAndIsrPartitionError]] | None = None,
) -> ControlResult:
    """A controller request's answer: its error and each partition's, from (topic name,
    partition error) pairs; by default the response's named `partition_errors`."""
    if errors is None:
        errors = ((p["topic_name"], p) for p in response["partition_errors"])
    result = ControlResult(error_code(response["error_code"]))
    for topic, p in errors:
        result.partitions[TopicPartition(topic, p["partition_index"])] = error_code(p["error_code"])
    return result


def read_leader_and_isr(
    response: LeaderAndIsrResponse, version: int, topic_names: Mapping[UUID, str] | None = None
) -> ControlResult:
    """v5+ names topics by id: `topic_names` maps them back (an unknown id is kept as its
    string form)."""
    if version < _LEADER_AND_ISR_TOPIC_IDS:
        return _control_result(response)
    names = topic_names or {}
    errors = (
        (names.get(topic["topic_id"], str(topic["topic_id"])), p)
        for topic in response["topics"]
        for p in topic["partition_errors"]
    )
    return _control_result(response, errors)


async def leader_and_isr(
    conn: Connection,
    header: ControlHeader,
    topics: Sequence[tuple[TopicView, list[int]]],
    live_leaders: Iterable[BrokerView] = (),
    *,
    listener: str | None = None,
) -> ControlResult:
    version = conn.choose_version(ApiKey.LEADER_AND_ISR)
    body = build_leader_and_isr(version, header, topics, live_leaders, listener=listener)
    response = await send(conn, apis.LEADER_AND_ISR, body, version)
    return read_leader_and_isr(response, version, {t.topic_id: t.name for t, _ in topics})


# --- UpdateMetadata -----------------------------------------------------------------------


def _update_metadata_state(
    topic: str, index: int, state: PartitionStateView, live: set[int], grouped: bool, leader: int
) -> UpdateMetadataPartitionState:
    entry: UpdateMetadataPartitionState = {
        "partition_index": index,
        "controller_epoch": state.controller_epoch,
        "leader": leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "zk_version": state.version,
        "replicas": list(state.replicas),
        "offline_replicas": [r for r in state.replicas if r not in live],
    }
    if not grouped:
        entry["topic_name"] = topic
    return entry


def _live_broker(version: int, broker: BrokerView) -> UpdateMetadataBroker:
    if version == 0:
        return {"id": broker.broker_id, "v0_host": broker.host, "v0_port": broker.port}
    return {
        "id": broker.broker_id,
        "endpoints": [
            {
                "port": ep.port,
                "host": ep.host,
                "listener": ep.listener,
                "security_protocol": SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0),
            }
            for ep in broker.all_endpoints()
        ],
        "rack": broker.rack,
    }


def build_update_metadata(
    version: int,
    header: ControlHeader,
    brokers: Iterable[BrokerView],
    topics: Iterable[TopicView],
    deleted: Iterable[TopicView] = (),
) -> UpdateMetadataRequest:
    """Every live broker and the state of every partition of `topics`; the partitions of
    `deleted` topics go with leader LEADER_DURING_DELETE, which makes brokers forget them.
    The partition states go under their topic (with its id) from the grouped versions on,
    in one flat list before."""
    live_brokers = list(brokers)
    live = {b.broker_id for b in live_brokers}
    grouped = version >= _GROUPED_UPDATE_METADATA
    body: UpdateMetadataRequest = {
        "controller_id": header.controller_id,
        "controller_epoch": header.controller_epoch,
    }
    if version >= _GROUPED_UPDATE_METADATA:
        body["broker_epoch"] = header.broker_epoch

    def states(topic: TopicView, deleting: bool) -> list[UpdateMetadataPartitionState]:
        return [
            _update_metadata_state(
                topic.name,
                p,
                state,
                live,
                grouped,
                LEADER_DURING_DELETE if deleting else state.leader,
            )
            for p, state in sorted(topic.partitions.items())
        ]

    per_topic = [
        (topic, states(topic, deleting))
        for topics_of, deleting in ((topics, False), (deleted, True))
        for topic in topics_of
    ]
    if grouped:
        body["topic_states"] = [
            {"topic_name": topic.name, "topic_id": topic.topic_id, "partition_states": ps}
            for topic, ps in per_topic
        ]
    else:
        body["ungrouped_partition_states"] = [state for _, ps in per_topic for state in ps]
    body["live_brokers"] = [_live_broker(version, b) for b in live_brokers]
    return body


def read_update_metadata(response: UpdateMetadataResponse) -> ControlResult:
    return ControlResult(error_code(response["error_code"]))


async def update_metadata(
    conn: Connection,
    header: ControlHeader,
    brokers: Iterable[BrokerView],
    topics: Iterable[TopicView],
    deleted: Iterable[TopicView] = (),
) -> ControlResult:
    version = conn.choose_version(ApiKey.UPDATE_METADATA)
    body = build_update_metadata(version, header, brokers, topics, deleted)
    response = await send(conn, apis.UPDATE_METADATA, body, version)
    return read_update_metadata(response)


# --- StopReplica --------------------------------------------------------------------------


def build_stop_replica(
    version: int,
    header: ControlHeader,
    partitions: Mapping[str, Iterable[tuple[int, int]]],
    delete: bool,
) -> StopReplicaRequest:
    """Stop (and with `delete`, delete) replicas: `partitions` maps each topic to
    (partition, leader epoch) pairs; the epochs travel from v3 (EPOCH_DURING_DELETE for a
    deleted topic, NO_EPOCH when unknown)."""
    body: StopReplicaRequest = {
        "controller_id": header.controller_id,
        "controller_epoch": header.controller_epoch,
    }
    if version >= _STOP_REPLICA_TOPICS:
        body["broker_epoch"] = header.broker_epoch
    if version < _STOP_REPLICA_STATES:
        body["delete_partitions"] = delete
    if version < _STOP_REPLICA_TOPICS:
        body["ungrouped_partitions"] = [
            {"topic_name": topic, "partition_index": p}
            for topic, entries in partitions.items()
            for p, _ in entries
        ]
    elif version < _STOP_REPLICA_STATES:
        body["topics"] = [
            {"name": topic, "partition_indexes": [p for p, _ in entries]}
            for topic, entries in partitions.items()
        ]
    else:
        body["topic_states"] = [
            {
                "topic_name": topic,
                "partition_states": [
                    {"partition_index": p, "leader_epoch": epoch, "delete_partition": delete}
                    for p, epoch in entries
                ],
            }
            for topic, entries in partitions.items()
        ]
    return body


def read_stop_replica(response: StopReplicaResponse) -> ControlResult:
    return _control_result(response)


async def stop_replica(
    conn: Connection,
    header: ControlHeader,
    partitions: Mapping[str, Iterable[tuple[int, int]]],
    delete: bool,
) -> ControlResult:
    version = conn.choose_version(ApiKey.STOP_REPLICA)
    body = build_stop_replica(version, header, partitions, delete)
    response = await send(conn, apis.STOP_REPLICA, body, version)
    return read_stop_replica(response)
