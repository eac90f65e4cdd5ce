"""Partition reassignment (KIP-455), as Kafka's ZooKeeper-mode `KafkaController` runs it.

A reassignment moves a partition from its original replicas (ORS) to target replicas
(TRS) without a moment where fewer replicas hold the data than before:

1. The full replica set RS = TRS + ORS (target first, no duplicates) is written to the
   topic's znode with `adding_replicas` (TRS - ORS) and `removing_replicas` (ORS - TRS),
   as Kafka 2.4+ keeps them; every replica of RS is sent LeaderAndIsr, so the adding
   replicas create their logs and fetch from the leader.
2. Each adding replica joins the ISR when it caught up (the leader's AlterPartition).
3. Once every target replica is in the ISR the partition completes: a leader in TRS is
   elected if the current one is not, the ISR shrinks to TRS and the leader epoch is
   bumped (partition state first), then the topic znode holds TRS alone, the removed
   replicas are stopped and their logs deleted (StopReplica with delete).

The state lives in ZooKeeper only (the topic znode and the partition state), so a new
controller resumes a reassignment where the old one left it (`resume_reassignments`).
A reassignment that replaces or cancels a running one reverts to the origin replicas:
replicas no longer wanted leave the ISR and are stopped at once.

Runs where the controller's work runs (its thread in a cluster, the event loop of a
stand-alone broker); every write is the controller's fenced compare-and-set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logbus.controller.cluster_metadata import PartitionState, TopicMetadata
from logbus.controller.election import NO_LEADER
from logbus.controller.metadata_store import BadVersion, NoNode
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.controller.controller import Controller

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas as the topic znode holds them (Kafka's
    `ReplicaAssignment`): the full replica set and, during a reassignment, the replicas
    being added and removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment moving this one's origin replicas to `target`."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in target),
        )


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


_NO_PARTITION = ReassignmentResult(
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
)


def assignment_of(controller: Controller, tp: TopicPartition) -> ReplicaAssignment | None:
    topic = controller.topics.get(tp.topic)
    state = topic.partitions.get(tp.partition) if topic is not None else None
    if state is None:
        return None
    ongoing = controller.reassignments.get(tp)
    return ongoing if ongoing is not None else ReplicaAssignment(state.replicas)


def _live(controller: Controller) -> set[int]:
    return {b.broker_id for b in controller.live_brokers()}


def validate_target(
    current: ReplicaAssignment, target: Sequence[int], live: set[int]
) -> ReassignmentResult | None:
    """Kafka's checks of a target replica list (`validateReplicas`); None when valid."""
    if not target:
        return ReassignmentResult(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        )
    if len(set(target)) != len(target):
        return ReassignmentResult(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
        )
    if any(r < 0 for r in target):
        return ReassignmentResult(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Invalid broker id in replica list: {list(target)}",
        )
    adding = current.reassign_to(target).adding
    if not set(adding) <= live:
        return ReassignmentResult(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment has brokers that are not alive. Replica list: "
            f"{list(adding)}, live broker list: {sorted(live)}",
        )
    return None


# --- AlterPartitionReassignments ----------------------------------------------------------


def alter_reassignments(
    controller: Controller, wanted: Mapping[TopicPartition, Sequence[int] | None]
) -> dict[TopicPartition, ReassignmentResult]:
    """Start, replace (a target) or cancel (None) the reassignment of each partition."""
    live = _live(controller)
    results: dict[TopicPartition, ReassignmentResult] = {}
    for tp, target in wanted.items():
        current = assignment_of(controller, tp)
        topic = controller.topics.get(tp.topic)
        if current is None or topic is None or topic.partitions[tp.partition].leader_epoch < 0:
            results[tp] = _NO_PARTITION
            continue
        if controller.store.exists(f"/admin/delete_topics/{tp.topic}"):
            results[tp] = ReassignmentResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{tp.topic}' is being deleted."
            )
            continue
        if target is None:
            if not current.is_being_reassigned:
                results[tp] = ReassignmentResult(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    f"No reassignment is in progress for partition {tp.topic}-{tp.partition}.",
                )
                continue
            target = current.origin
        invalid = validate_target(current, target, live)
        if invalid is not None:
            results[tp] = invalid
            continue
        results[tp] = _start(controller, topic, tp.partition, current, current.reassign_to(target))
    return results


def _start(
    controller: Controller,
    topic: TopicMetadata,
    p: int,
    current: ReplicaAssignment,
    new: ReplicaAssignment,
) -> ReassignmentResult:
    """Phase one: write RS with the adding and removing replicas, tell every replica; a
    replaced reassignment's replicas no longer wanted leave at once."""
    state = topic.partitions[p]
    unneeded = [r for r in current.replicas if r not in new.replicas]
    isr = tuple(r for r in state.isr if r in new.replicas)
    # A new leader epoch, as Kafka's phase A: brokers apply only LeaderAndIsr requests
    # with a newer one, and the leader must learn the full replica set.
    leader, epoch = state.leader, state.leader_epoch + 1
    if leader in unneeded:
        live = _live(controller) - controller.shutting_down
        candidates = [r for r in new.replicas if r in isr and r in live]
        if not candidates:
            return ReassignmentResult(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"No replica of {list(new.replicas)} is alive and in sync "
                f"(ISR {list(state.isr)}): the leader cannot move there.",
            )
        leader = candidates[0]
    proposed = PartitionState(
        leader, epoch, isr or state.isr, new.replicas, controller.epoch, state.version
    )
    if not _write(controller, topic, p, proposed):
        return ReassignmentResult(
            ErrorCode.UNKNOWN_SERVER_ERROR, "The partition changed meanwhile; try again."
        )
    _record(controller, topic, {p: new})
    log.info(
        "reassignment of %s-%d: replicas %s, adding %s, removing %s",
        topic.name, p, list(new.replicas), list(new.adding), list(new.removing),
    )  # fmt: skip
    _tell(controller, topic, p, stopped=unneeded)
    maybe_complete(controller, topic, p)
    return ReassignmentResult()


def _write(controller: Controller, topic: TopicMetadata, p: int, new: PartitionState) -> bool:
    old = topic.partitions[p]
    try:
        written = controller._write_state(topic.name, p, new, create=False)
    except (BadVersion, NoNode):
        log.warning("partition %s-%d changed under the controller", topic.name, p)
        return False
    controller.count_election(old, written)
    topic.partitions[p] = written
    return True


def _record(
    controller: Controller, topic: TopicMetadata, changes: Mapping[int, ReplicaAssignment]
) -> None:
    """Write the assignments to the topic znode and remember the ongoing ones."""
    controller.write_assignment(topic.name, changes)
    for p, assignment in changes.items():
        tp = TopicPartition(topic.name, p)
        if assignment.is_being_reassigned:
            controller.reassignments[tp] = assignment
        else:
            controller.reassignments.pop(tp, None)


def _tell(controller: Controller, topic: TopicMetadata, p: int, stopped: Iterable[int]) -> None:
    """LeaderAndIsr to the live replicas, StopReplica (delete) to the removed ones, then
    UpdateMetadata everywhere."""
    live = _live(controller)
    state = topic.partitions[p]
    for replica in state.replicas:
        if replica in live:
            controller.channel.send_leader_and_isr(replica, topic, [p])
    for replica in stopped:
        controller.channel.send_stop_replica(replica, topic.name, [p], True)
    controller.channel.send_update_metadata(controller.live_brokers(), [topic], [])


def maybe_complete(controller: Controller, topic: TopicMetadata, p: int) -> bool:
    """Phase three, once every target replica is in the ISR: leader in TRS, ISR and
    assignment shrunk to TRS, removed replicas stopped and deleted. False while waiting."""
    tp = TopicPartition(topic.name, p)
    ongoing = controller.reassignments.get(tp)
    state = topic.partitions.get(p)
    if ongoing is None or state is None:
        return False
    target = ongoing.target
    if not all(r in state.isr for r in target):
        return False
    live = _live(controller) - controller.shutting_down
    leader = state.leader
    if leader not in target or leader not in live:
        leader = next((r for r in target if r in state.isr and r in live), NO_LEADER)
        if leader == NO_LEADER:
            return False  # no target replica can lead yet: wait for one to come back
    isr = tuple(r for r in state.isr if r in target)
    proposed = PartitionState(
        leader, state.leader_epoch + 1, isr, target, controller.epoch, state.version
    )
    if not _write(controller, topic, p, proposed):
        return False
    _record(controller, topic, {p: ReplicaAssignment(target)})
    log.info(
        "reassignment of %s-%d complete: replicas %s (removed %s), leader %d",
        topic.name, p, list(target), list(ongoing.removing), leader,
    )  # fmt: skip
    _tell(controller, topic, p, stopped=ongoing.removing)
    return True


def resume_reassignments(controller: Controller) -> None:
    """A new controller: complete the reassignments whose targets caught up while no
    controller watched (the others complete on the leaders' ISR changes)."""
    for tp in sorted(controller.reassignments):
        topic = controller.topics.get(tp.topic)
        if topic is not None:
            log.info("resuming the reassignment of %s-%d", tp.topic, tp.partition)
            maybe_complete(controller, topic, tp.partition)


# --- ListPartitionReassignments -----------------------------------------------------------


def list_reassignments(
    controller: Controller, wanted: Iterable[TopicPartition] | None
) -> dict[TopicPartition, ReplicaAssignment]:
    """The ongoing reassignments among `wanted` (all when None); unknown partitions and
    those not being reassigned are left out, as Kafka does."""
    if wanted is None:
        return dict(sorted(controller.reassignments.items()))
    return {tp: a for tp in wanted if (a := controller.reassignments.get(tp)) is not None}
