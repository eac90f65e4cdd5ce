"""A client's view of the cluster: brokers, controller, topics and their partitions, as one
Metadata response described them (read by `logbus.client.requests.metadata`).
Immutable values; refresh by asking again."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from uuid import UUID

from logbus.client.errors import KafkaError
from logbus.protocol import ErrorCode

NO_LEADER = -1
# Topic errors that mean "not there yet": auto-creation or leader election under way.
_NOT_YET = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})
ZERO_UUID = UUID(int=0)


def topic_id_string(topic_id: UUID) -> str:
    """A topic id as Kafka prints it: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: int = ErrorCode.NONE

    @property
    def replication_factor(self) -> int:
        if not self.partitions:
            return 0
        return len(self.partitions[min(self.partitions)].replicas)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]

    def topic(self, name: str) -> TopicInfo:
        """The topic, or KafkaError if the broker reported it missing or failed."""
        info = self.topics.get(name)
        if info is None or info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        if info.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION:
            raise KafkaError(
                info.error_code,
                f"'{name}' is not a valid topic name (1 to 249 characters among ASCII "
                "letters, digits, '.', '_' and '-'; not '.' or '..')",
            )
        if info.error_code != ErrorCode.NONE:
            raise KafkaError(info.error_code, f"no usable metadata for topic '{name}'")
        return info

    def ready_partition_count(self, topic: str) -> int | None:
        """The topic's partition count once every partition has a leader; None while it
        is missing or being created (the caller waits and asks again); KafkaError for any
        other error the broker reported for it (e.g. INVALID_TOPIC_EXCEPTION)."""
        info = self.topics.get(topic)
        if info is None or info.error_code in _NOT_YET:
            return None
        if info.error_code != ErrorCode.NONE:
            self.topic(topic)  # raises the topic's error
        if info.partitions and all(p.leader != NO_LEADER for p in info.partitions.values()):
            return len(info.partitions)
        return None

    def leader(self, topic: str, partition: int) -> int:
        info = self.topic(topic)
        part = info.partitions.get(partition)
        if part is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic '{topic}' has no partition {partition} "
                f"(it has {len(info.partitions)})",
            )
        if part.leader == NO_LEADER or part.error_code == ErrorCode.LEADER_NOT_AVAILABLE:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"partition {topic}-{partition} has no leader"
            )
        return part.leader
