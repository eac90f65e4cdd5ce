"""Leadership moves the controller makes on request (Kafka's ZooKeeper-mode
`KafkaController`): a broker's controlled shutdown, preferred and unclean elections asked
for by an admin (ElectLeaders), and the periodic preferred-leader rebalance.

Each function runs where the controller's work runs (the controller thread in a cluster,
the event loop of a stand-alone broker), decides with the values of `election.py`, writes
every new state with the controller's fenced compare-and-set (`_write_state`; a controller
that lost its epoch raises `ControllerMovedError`) and tells the brokers: LeaderAndIsr to
the replicas concerned, UpdateMetadata to every live broker.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logbus.controller.cluster_metadata import PartitionState, TopicMetadata
from logbus.controller.election import (
    NO_LEADER,
    controlled_shutdown_leader,
    has_preferred_leader,
    imbalanced_brokers,
    offline_leader,
    preferred_leader,
    without_follower,
)
from logbus.controller.isr_changes import UNKNOWN_BROKER_EPOCH, is_active, registered_broker_epoch
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

if TYPE_CHECKING:
    from logbus.controller.controller import Controller

log = logging.getLogger(__name__)


class ElectionType(enum.IntEnum):
    """ElectLeaders' election types (Kafka's `ElectionType`)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    leader: int = NO_LEADER  # the leader elected (NONE only)


@dataclass(slots=True)
class _Changes:
    """New partition states to write, then whom to tell."""

    controller: Controller
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    leader_and_isr: dict[tuple[int, str], list[int]] = field(default_factory=dict)

    def write(self, topic: TopicMetadata, p: int, new: PartitionState) -> bool:
        """Write one partition's new state; False when the write lost a race (the
        controller's view is stale for it: left for a later attempt)."""
        return self.write_all([(topic, p, new)])[0]

    def write_all(self, writes: list[tuple[TopicMetadata, int, PartitionState]]) -> list[bool]:
        """`write` for several partitions at once (one round trip to the store)."""
        written = self.controller._write_states([(t.name, p, new) for t, p, new in writes])
        done = []
        for (topic, p, _new), state in zip(writes, written, strict=True):
            if state is None:
                log.warning(
                    "partition %s-%d changed under the controller: not moved", topic.name, p
                )
                done.append(False)
                continue
            self.controller.count_election(topic.partitions[p], state)
            topic.partitions[p] = state
            self.topics[topic.name] = topic
            done.append(True)
        return done

    def tell(self, broker: int, topic: str, p: int) -> None:
        self.leader_and_isr.setdefault((broker, topic), []).append(p)

    def send(self) -> None:
        """LeaderAndIsr to each replica told, then UpdateMetadata with the changed topics
        to every live broker."""
        controller = self.controller
        for (broker, name), parts in self.leader_and_isr.items():
            controller.channel.send_leader_and_isr(broker, self.topics[name], sorted(parts))
        if self.topics:
            controller.channel.send_update_metadata(
                controller.live_brokers(), list(self.topics.values()), []
            )


def _electable_live(controller: Controller) -> set[int]:
    """Brokers that may lead: registered and not shutting down."""
    return {b.broker_id for b in controller.live_brokers()} - controller.shutting_down


# --- controlled shutdown ------------------------------------------------------------------


def controlled_shutdown(
    controller: Controller, broker_id: int, broker_epoch: int
) -> tuple[ErrorCode, list[TopicPartition]]:
    """A broker asks to stop (Kafka's `doControlledShutdown`): it is marked as shutting
    down (never elected again until it registers anew); partitions it leads with another
    live ISR member move to the first such replica, the ISR without it; it leaves the ISR
    of partitions it follows; the replicas that changed are stopped on it (their logs
    are kept) once the other replicas were told.
    Answers the partitions it still leads that have other replicas (a single-replica
    partition cannot move, so it is never named)."""
    if not is_active(controller):
        return ErrorCode.NOT_CONTROLLER, []
    registered = {b.broker_id for b in controller.live_brokers()}
    if broker_id not in registered:
        return ErrorCode.BROKER_NOT_AVAILABLE, []
    known_epoch = registered_broker_epoch(controller, broker_id)
    checked = broker_epoch != UNKNOWN_BROKER_EPOCH and known_epoch is not None
    if checked and broker_epoch < (known_epoch or 0):
        log.info(
            "controlled shutdown of broker %d refused: epoch %d older than %d",
            broker_id, broker_epoch, known_epoch,
        )  # fmt: skip
        return ErrorCode.STALE_BROKER_EPOCH, []
    controller.shutting_down.add(broker_id)
    live = _electable_live(controller)
    moves = _shutdown_moves(controller, broker_id, live)
    changes = _Changes(controller)
    stop: dict[str, list[int]] = {}
    for (topic, p, new), written in zip(moves, changes.write_all(moves), strict=True):
        if not written:
            continue
        for replica in new.replicas:
            if replica in live:
                changes.tell(replica, topic.name, p)
        # Its replica stops (with the new leader epoch; its log stays).
        stop.setdefault(topic.name, []).append(p)
    changes.send()
    for name, parts in stop.items():
        controller.channel.send_stop_replica(broker_id, name, sorted(parts), False)
    remaining = [
        TopicPartition(topic.name, p)
        for topic in controller.topics.values()
        for p, state in sorted(topic.partitions.items())
        if state.leader == broker_id and len(state.replicas) > 1
    ]
    log.info(
        "controlled shutdown of broker %d: %d partitions it leads could not move",
        broker_id, len(remaining),
    )  # fmt: skip
    return ErrorCode.NONE, remaining


def _shutdown_moves(
    controller: Controller, broker_id: int, live: set[int]
) -> list[tuple[TopicMetadata, int, PartitionState]]:
    """The new state of each partition a stopping broker replicates with others: the
    ones it leads move to another in-sync replica, it leaves the ISR of the others."""
    moves = []
    for topic in list(controller.topics.values()):
        for p, state in list(topic.partitions.items()):
            if broker_id not in state.replicas or len(state.replicas) < 2:
                continue
            if state.leader == broker_id:
                new = controlled_shutdown_leader(
                    state, live, controller.shutting_down, controller.epoch
                )
            elif state.leader != NO_LEADER:
                new = without_follower(state, broker_id, controller.epoch)
            else:
                continue
            if new is not None:
                moves.append((topic, p, new))
    return moves


# --- ElectLeaders -------------------------------------------------------------------------


def elect_leaders(
    controller: Controller,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None,
) -> dict[TopicPartition, ElectionResult]:
    """ElectLeaders (Kafka's `processReplicaLeaderElection`, admin-triggered): for each
    partition (every partition when None) ELECTION_NOT_NEEDED when its leader is already
    the one the election would keep (PREFERRED: the first assigned replica; UNCLEAN: any
    live leader), UNKNOWN_TOPIC_OR_PARTITION when it does not exist, otherwise the
    election's outcome: PREFERRED_LEADER_NOT_AVAILABLE when the preferred replica is not
    live and in the ISR, ELIGIBLE_LEADERS_NOT_AVAILABLE when no live replica can lead."""
    if partitions is None:
        wanted = [
            TopicPartition(t.name, p)
            for t in controller.topics.values()
            for p in sorted(t.partitions)
        ]
    else:
        wanted = list(dict.fromkeys(partitions))
    live = _electable_live(controller)
    changes = _Changes(controller)
    results: dict[TopicPartition, ElectionResult] = {}
    for tp in wanted:
        topic = controller.topics.get(tp.topic)
        state = topic.partitions.get(tp.partition) if topic is not None else None
        if topic is None or state is None or state.leader_epoch < 0:
            results[tp] = ElectionResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            )
            continue
        results[tp] = _elect_one(changes, topic, tp.partition, state, election_type, live)
    changes.send()
    return results


def _elect_one(
    changes: _Changes,
    topic: TopicMetadata,
    p: int,
    state: PartitionState,
    election_type: ElectionType,
    live: set[int],
) -> ElectionResult:
    controller = changes.controller
    if election_type is ElectionType.PREFERRED:
        if has_preferred_leader(state) and state.leader in live:
            return ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED)
        new = preferred_leader(state, live, controller.epoch)
        failure = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
    else:
        if state.leader in live:
            return ElectionResult(ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED)
        chosen = offline_leader(state, live, unclean=True)
        new = None
        if chosen is not None:
            new = PartitionState(
                chosen[0], state.leader_epoch + 1, chosen[1], state.replicas,
                controller.epoch, state.version,
            )  # fmt: skip
        failure = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        strategy = "OfflinePartitionLeaderElectionStrategy(true)"
    if new is None or not changes.write(topic, p, new):
        return ElectionResult(
            failure,
            f"Failed to elect leader for partition {topic.name}-{p} under strategy {strategy}",
        )
    for replica in new.replicas:
        if replica in live:
            changes.tell(replica, topic.name, p)
    log.info(
        "%s election of %s-%d: leader %d -> %d",
        election_type.name.lower(), topic.name, p, state.leader, new.leader,
    )  # fmt: skip
    return ElectionResult(leader=new.leader)


_NOT_NEEDED = "Leader election not needed for topic partition."


# --- auto leader rebalance ----------------------------------------------------------------


def rebalance_preferred_leaders(
    controller: Controller, per_broker_percentage: int
) -> list[TopicPartition]:
    """Kafka's `checkAndTriggerAutoLeaderRebalance`: for each broker whose share of
    partitions preferring it but led by another is above `per_broker_percentage`, move
    those partitions back where the preferred replica is live and in the ISR. Returns
    the partitions moved."""
    if not is_active(controller):
        return []
    live = _electable_live(controller)
    states = {
        TopicPartition(t.name, p): s
        for t in controller.topics.values()
        for p, s in t.partitions.items()
        if s.leader_epoch >= 0
    }
    brokers = imbalanced_brokers(list(states.values()), per_broker_percentage)
    candidates = _movable(states, brokers, live)
    if not candidates:
        return []
    log.info(
        "leader imbalance on brokers %s: electing preferred leaders of %d partitions",
        sorted(brokers), len(candidates),
    )  # fmt: skip
    results = elect_leaders(controller, ElectionType.PREFERRED, candidates)
    return [tp for tp, r in results.items() if r.error == ErrorCode.NONE]


def _movable(
    states: dict[TopicPartition, PartitionState], brokers: Collection[int], live: set[int]
) -> list[TopicPartition]:
    return [
        tp
        for tp, s in sorted(states.items())
        if s.replicas
        and s.replicas[0] in brokers
        and not has_preferred_leader(s)
        and s.replicas[0] in live
        and s.replicas[0] in s.isr
    ]
