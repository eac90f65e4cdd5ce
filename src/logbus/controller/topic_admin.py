"""Topic administration checks of the controller: a CreateTopics or CreatePartitions entry
checked as Kafka checks it (names, counts, replication arithmetic, manual assignments,
`max.broker.partitions`), without changing anything. `Controller` inherits them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from logbus.controller.assignment import (
    ControllerError,
    assign_replicas,
    check_replication_factor,
)
from logbus.controller.cluster_metadata import BrokerInfo, TopicMetadata
from logbus.controller.metadata_store import MetadataStore
from logbus.controller.topic_validation import collision_key, topic_name_error
from logbus.protocol import ErrorCode

ZERO_UUID = UUID(int=0)

# Kafka's controller refuses a CreateTopics or CreatePartitions request that would create
# more partitions than this (`ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`).
MAX_PARTITIONS_PER_REQUEST: Final = 10_000
EXCESSIVE_PARTITIONS_MESSAGE: Final = "Excessively large number of partitions per request."
# Leaders of new partitions are elected (and their logs created) this many at a time, so
# a large creation can hand the event loop back between steps.
START_CHUNK: Final = 500


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int  # -1: the broker default
    replication_factor: int  # -1: the broker default
    assignments: dict[int, list[int]]
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    topic_id: UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(slots=True)
class PartitionCreation:
    """New partitions already written to the store whose leaders are not elected yet.

    `Controller.start_partitions` elects them a chunk at a time (the caller may yield or
    prepare logs between chunks), `Controller.finish_creation` announces the topic.
    """

    topic: TopicMetadata
    new_partitions: range
    result: TopicResult

    def chunks(self, size: int = START_CHUNK) -> Iterator[range]:
        parts = self.new_partitions
        for start in range(0, len(parts), size):
            yield parts[start : start + size]



class TopicChecks:
    """The checks, over the controller's view of topics and live brokers."""

    store: MetadataStore
    topics: dict[str, TopicMetadata]
    default_partitions: int
    default_replication_factor: int
    max_broker_partitions: int
    _validate_configs: object

    def live_brokers(self) -> list[BrokerInfo]:
        raise NotImplementedError

    def validate_new_topic(self, spec: NewTopic) -> TopicResult:
        """Check a CreateTopics entry without changing anything: names, counts, the
        replication arithmetic and the per-broker limit; no assignment is built."""
        error = topic_name_error(spec.name)
        if error is not None:
            return TopicResult(spec.name, ErrorCode.INVALID_TOPIC_EXCEPTION, error)
        if spec.name in self.topics or self.store.exists(f"/admin/delete_topics/{spec.name}"):
            return TopicResult(
                spec.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
            )
        key = collision_key(spec.name)
        for existing in self.topics:
            if collision_key(existing) == key:
                return TopicResult(
                    spec.name,
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{spec.name}' collides with existing topic: {existing}",
                )
        if spec.assignments and (spec.num_partitions != -1 or spec.replication_factor != -1):
            return TopicResult(
                spec.name,
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments "
                "were set. Both cannot be used at the same time.",
            )
        partitions = self.default_partitions if spec.num_partitions == -1 else spec.num_partitions
        rf = (
            self.default_replication_factor
            if spec.replication_factor == -1
            else spec.replication_factor
        )
        if not spec.assignments and partitions <= 0:
            return TopicResult(
                spec.name,
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions must be larger than 0.",
            )
        if not spec.assignments and rf <= 0:
            return TopicResult(
                spec.name,
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0.",
            )
        if spec.assignments:
            partitions = len(spec.assignments)
        if partitions > MAX_PARTITIONS_PER_REQUEST:
            return TopicResult(spec.name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS_MESSAGE)
        try:
            if spec.assignments:
                self._check_assignment(spec.assignments, 0)
                rf = len(next(iter(spec.assignments.values())))
                self._check_broker_limit(Counter(b for r in spec.assignments.values() for b in r))
            else:
                live = len(self.live_brokers())
                check_replication_factor(rf, live)
                self._check_broker_limit(self._spread(partitions, rf, live))
        except ControllerError as exc:
            return TopicResult(spec.name, exc.error, exc.message)
        if self._validate_configs is not None:
            try:
                self._validate_configs(spec.configs)  # type: ignore[operator]
            except ValueError as exc:
                return TopicResult(spec.name, ErrorCode.INVALID_CONFIG, str(exc))
        return TopicResult(spec.name, ErrorCode.NONE, None, UUID(int=0), partitions, rf)

    def assign(
        self, partitions: int, replication_factor: int, first_partition: int = 0
    ) -> dict[int, list[int]]:
        """Replicas for new partitions over the live brokers (rack-aware when they have
        racks)."""
        brokers = self.live_brokers()
        return assign_replicas(
            [b.broker_id for b in brokers],
            partitions,
            replication_factor,
            first_partition=first_partition,
            racks={b.broker_id: b.rack for b in brokers},
        )

    def _spread(self, partitions: int, replication_factor: int, live: int) -> Counter[int]:
        """The most replicas any one live broker can receive from `partitions` new
        partitions, as a count per broker (the assignment spreads them evenly, and the
        broker it starts from is chosen at random)."""
        most = -(-partitions * replication_factor // max(live, 1))
        return Counter({b.broker_id: most for b in self.live_brokers()})

    def replicas_per_broker(self) -> Counter[int]:
        """How many partition replicas each broker hosts."""
        hosted: Counter[int] = Counter()
        for topic in self.topics.values():
            for state in topic.partitions.values():
                hosted.update(state.replicas)
        return hosted

    def _check_broker_limit(self, added: Counter[int]) -> None:
        """POLICY_VIOLATION if the new replicas would put more than max.broker.partitions
        partition replicas on a broker."""
        if not added:
            return
        hosted = self.replicas_per_broker()
        for broker_id, count in sorted(added.items()):
            total = hosted[broker_id] + count
            if total > self.max_broker_partitions:
                raise ControllerError(
                    ErrorCode.POLICY_VIOLATION,
                    f"Broker {broker_id} would host {total} partition replicas, more than "
                    f"max.broker.partitions ({self.max_broker_partitions}); it hosts "
                    f"{hosted[broker_id]}.",
                )

    def _check_assignment(self, assignments: dict[int, list[int]], first: int) -> None:
        live = {b.broker_id for b in self.live_brokers()}
        expected = list(range(first, first + len(assignments)))
        if sorted(assignments) != expected:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "All partitions should have the same number of replicas",
            )
        for p, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica assignment for partition '{p}'",
                )
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unknown broker(s) {unknown} in the assignment of partition {p}",
                )

