"""What `Admin` takes and returns: new topics and partitions, config resources and entries,
offsets, cluster and group descriptions, and `AdminBatchError` for requests on several
items of which some failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, NamedTuple

from logbus.client.errors import KafkaError
from logbus.client.metadata import BrokerInfo, PartitionInfo, TopicInfo
from logbus.client.requests.group_membership import GroupMemberInfo, ListedGroup
from logbus.client.requests.list_offsets import ListedOffset
from logbus.client.requests.topics import CreatedTopic
from logbus.client.types import TopicPartition

__all__ = [
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "CreatedTopic",
    "GroupMemberInfo",
    "ListedOffset",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionInfo",
    "ResourceType",
    "TopicDescription",
    "TopicPartition",
]

# A topic as Metadata describes it: name, id, internal flag, partitions (leader, replicas,
# ISR); the same value the rest of the client uses.
TopicDescription = TopicInfo
# A group as ListGroups names it: group id, protocol type ("consumer"), state.
ConsumerGroupListing = ListedGroup
# Where `list_offsets` looks: the log start, the log end, the record with the largest
# timestamp, or the first record whose timestamp is at least this many ms since the epoch.
OffsetSpec = Literal["earliest", "latest", "max_timestamp"] | int


@dataclass(frozen=True)
class NewTopic:
    """A topic to create. Leave `num_partitions` / `replication_factor` at -1 for the
    broker's defaults (`num.partitions`, `default.replication.factor`), or give
    `replica_assignment` (partition -> broker ids, the first the preferred leader)
    instead of both. `config` holds topic config overrides (`retention.ms`, ...)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


@dataclass(frozen=True)
class NewPartitions:
    """Grow a topic to `total_count` partitions; `new_assignments` optionally lists the
    broker ids of each new partition's replicas (one list per new partition)."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


class ResourceType(IntEnum):
    """What a config belongs to (Kafka's `ConfigResource.Type` codes)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigResource(NamedTuple):
    """A topic (by name), a broker (by id as a string; "" for the cluster-wide dynamic
    defaults) or a broker's loggers."""

    type: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type.name} {self.name!r}"


class ConfigSource(IntEnum):
    """Where a config value comes from (DescribeConfigs' `config_source`)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, code: int) -> ConfigSource:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


class ConfigSynonym(NamedTuple):
    """One place a config's value could come from, in order of precedence."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One config of a resource as DescribeConfigs reports it. A sensitive value (a
    password) is None. `type` is Kafka's ConfigType code (1 BOOLEAN, 2 STRING, 3 INT, 4
    SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD; 0 unknown)."""

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: int = 0
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


class AlterConfigOpType(IntEnum):
    """How `incremental_alter_configs` changes one config (KIP-339)."""

    SET = 0
    DELETE = 1  # back to the default
    APPEND = 2  # add to a list config
    SUBTRACT = 3  # remove from a list config


class AlterConfigOp(NamedTuple):
    """One change to one config: `AlterConfigOp("retention.ms", "1000")` sets it,
    `AlterConfigOp("retention.ms", None, AlterConfigOpType.DELETE)` restores the default."""

    name: str
    value: str | None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True)
class ClusterDescription:
    """The cluster: its id, its controller (None if there is none) and its brokers."""

    cluster_id: str | None
    controller: BrokerInfo | None
    nodes: list[BrokerInfo]


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A consumer group as its coordinator describes it. `state` is one of Stable,
    PreparingRebalance, CompletingRebalance, Empty; `partition_assignor` the protocol the
    members agreed on ("range", ...); each member's `assignment` maps topics to partitions."""

    group_id: str
    state: str
    protocol_type: str
    partition_assignor: str
    members: list[GroupMemberInfo]
    coordinator: BrokerInfo | None
    group_type: str = "classic"
    """"consumer" for a KIP-848 group: then `state` is Empty, Assigning, Reconciling or
    Stable, `partition_assignor` the server-side assignor, and each member has its
    `member_epoch` and `target_assignment`."""
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def is_simple_consumer_group(self) -> bool:
        """True for a group that only commits offsets (no members ever joined)."""
        return self.protocol_type == ""


def item_label(item: Any) -> str:
    """How an item of a batch request is named in messages: a topic, "topic-partition",
    a config resource or a group id."""
    if isinstance(item, tuple) and not isinstance(item, ConfigResource) and len(item) == 2:
        return f"{item[0]}-{item[1]}"
    return str(item)


class AdminBatchError(KafkaError):
    """Some items of a request on several items failed (`create_topics`,
    `describe_consumer_groups`, `list_offsets`, ...).

    `errors` maps each failed item (topic name, TopicPartition, ConfigResource, group id)
    to its KafkaError; `results` holds what the other items returned, as the method would
    have. `code`, `name` and `message` are those of the first failed item, so
    `except KafkaError as e: e.code == ErrorCode.TOPIC_ALREADY_EXISTS` works for a request
    on one item; `retriable` is true only if every failure is.
    """

    def __init__(self, errors: Mapping[Any, KafkaError], results: Mapping[Any, Any]) -> None:
        if not errors:
            raise ValueError("AdminBatchError needs at least one error")
        self.errors: dict[Any, KafkaError] = dict(errors)
        self.results: dict[Any, Any] = dict(results)
        first = next(iter(self.errors.values()))
        super().__init__(first.code, first.message)

    @property
    def retriable(self) -> bool:
        return all(error.retriable for error in self.errors.values())

    def __str__(self) -> str:
        if len(self.errors) == 1 and not self.results:
            return str(next(iter(self.errors.values())))
        total = len(self.errors) + len(self.results)
        details = "; ".join(f"{item_label(k)}: {e}" for k, e in self.errors.items())
        return f"{len(self.errors)} of {total} failed: {details}"

    def __repr__(self) -> str:
        return f"AdminBatchError({self.errors!r})"
