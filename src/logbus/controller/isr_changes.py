"""ISR changes proposed by partition leaders (AlterPartition), as Kafka's ZooKeeper-mode
controller handles them (2.7+, KIP-497, KIP-841).

`alter_partition` checks that this broker is the active controller (NOT_CONTROLLER) and
that the request comes from a live broker with its current broker epoch
(STALE_BROKER_EPOCH; -1, from a broker that does not know its epoch, is not checked);
then, for each partition: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION; a leader
epoch or partition epoch newer than the controller's means this controller is stale
(NOT_CONTROLLER); an older leader epoch is
FENCED_LEADER_EPOCH; a change already applied is answered with the current state (a
retry is idempotent); an older partition epoch is INVALID_UPDATE_VERSION; an ISR member
that is not an assigned replica is INVALID_REQUEST, one that is not a live broker
INELIGIBLE_REPLICA. Accepted changes are written with the controller's compare-and-set of
the partition state (a concurrent write answers INVALID_UPDATE_VERSION), and every live
broker is sent UpdateMetadata with the new ISR.

Runs where the controller's work runs (the controller's thread in a cluster, the event
loop of a stand-alone broker).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from logbus.controller.cluster_metadata import PartitionState, TopicMetadata
from logbus.controller.metadata_store import BadVersion, NoNode
from logbus.controller.reassignment import maybe_complete
from logbus.protocol import ErrorCode

if TYPE_CHECKING:
    from logbus.controller.controller import Controller

logger = logging.getLogger(__name__)

RECOVERED = 0
UNKNOWN_BROKER_EPOCH = -1  # a broker that does not know its epoch: not checked


@dataclass(frozen=True, slots=True)
class IsrChangeRequest:
    topic: str | None  # None: a topic id the controller does not know
    topic_id: UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True, slots=True)
class IsrChangeResult:
    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1

    @classmethod
    def of(cls, state: PartitionState) -> IsrChangeResult:
        return cls(ErrorCode.NONE, state.leader, state.leader_epoch, state.isr, state.version)


def is_active(controller: Controller) -> bool:
    """Whether `controller` holds `/controller` (a cluster's controller knows)."""
    active = getattr(controller, "active", None)
    if active is not None:
        return bool(active)
    try:
        value = json.loads(controller.store.get("/controller")[0])
    except NoNode:
        return False
    return bool(value.get("brokerid") == controller.broker.broker_id)


def registered_broker_epoch(controller: Controller, broker_id: int) -> int | None:
    """The broker epoch of a registered broker (its `/brokers/ids/<id>` node's creation
    txid), or None when the store does not tell it."""
    stat: Any = getattr(controller.store, "stat", None)
    if stat is None:
        return None
    try:
        return int(stat(f"/brokers/ids/{broker_id}").czxid)
    except NoNode:
        return None


def alter_partition(
    controller: Controller,
    broker_id: int,
    broker_epoch: int,
    changes: Sequence[IsrChangeRequest],
) -> tuple[ErrorCode, list[IsrChangeResult]]:
    """Apply the ISR changes a leader proposed: the request-wide error and each
    partition's result (in the order of `changes`)."""
    if not is_active(controller):
        return ErrorCode.NOT_CONTROLLER, [IsrChangeResult(ErrorCode.NOT_CONTROLLER)] * len(changes)
    live = {b.broker_id for b in controller.live_brokers()}
    known_epoch = registered_broker_epoch(controller, broker_id)
    checked = known_epoch is not None and broker_epoch != UNKNOWN_BROKER_EPOCH
    if broker_id not in live or (checked and broker_epoch < (known_epoch or 0)):
        logger.info(
            "AlterPartition from broker %d at epoch %d refused: its epoch is %s",
            broker_id, broker_epoch, known_epoch,
        )
        stale = IsrChangeResult(ErrorCode.STALE_BROKER_EPOCH)
        return ErrorCode.STALE_BROKER_EPOCH, [stale] * len(changes)
    results: list[IsrChangeResult] = []
    changed: dict[str, TopicMetadata] = {}
    for change in changes:
        result = _alter_one(controller, broker_id, change, live)
        results.append(result)
        if result.error == ErrorCode.NONE and change.topic is not None:
            topic = controller.topics[change.topic]
            changed[change.topic] = topic
            # A reassignment completes once its target replicas joined the ISR.
            maybe_complete(controller, topic, change.partition)
    if changed:
        controller.channel.send_update_metadata(
            controller.live_brokers(), list(changed.values()), []
        )
    return ErrorCode.NONE, results


def _alter_one(
    controller: Controller, broker_id: int, change: IsrChangeRequest, live: set[int]
) -> IsrChangeResult:
    topic = controller.topics.get(change.topic) if change.topic is not None else None
    state = topic.partitions.get(change.partition) if topic is not None else None
    if topic is None or state is None or state.leader_epoch < 0:
        return IsrChangeResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if change.partition_epoch > state.version or change.leader_epoch > state.leader_epoch:
        # The leader knows a newer state than this controller: it is likely not the
        # active controller any more.
        return IsrChangeResult(ErrorCode.NOT_CONTROLLER)
    if change.leader_epoch < state.leader_epoch or broker_id != state.leader:
        return IsrChangeResult(ErrorCode.FENCED_LEADER_EPOCH)
    if change.new_isr == state.isr:
        return IsrChangeResult.of(state)  # already applied: a retry
    if change.partition_epoch < state.version:
        return IsrChangeResult(ErrorCode.INVALID_UPDATE_VERSION)
    if change.leader_recovery_state != RECOVERED and len(change.new_isr) > 1:
        return IsrChangeResult(ErrorCode.INVALID_REQUEST)
    if not change.new_isr or any(r not in state.replicas for r in change.new_isr):
        return IsrChangeResult(ErrorCode.INVALID_REQUEST)
    if any(r not in live or r in controller.shutting_down for r in change.new_isr):
        return IsrChangeResult(ErrorCode.INELIGIBLE_REPLICA)
    proposed = PartitionState(
        state.leader,
        state.leader_epoch,
        change.new_isr,
        state.replicas,
        controller.epoch,
        state.version,
    )
    try:
        written = controller._write_state(topic.name, change.partition, proposed, create=False)
    except (BadVersion, NoNode):
        return IsrChangeResult(ErrorCode.INVALID_UPDATE_VERSION)
    topic.partitions[change.partition] = written
    logger.info(
        "ISR of %s-%d: %s -> %s (partition epoch %d)",
        topic.name, change.partition, list(state.isr), list(written.isr), written.version,
    )
    return IsrChangeResult.of(written)
