"""The Admin client: manage topics, partitions, configs, offsets, records and consumer
groups of a logbus (or Kafka) cluster.

The entry point is `Admin` (asyncio; `logbus.aio.Admin`); `logbus.client.admin.sync.Admin`
(`logbus.Admin`) is its blocking twin. Calls on several items return per-item results and
raise `AdminBatchError` with per-item errors when any fail.
"""

from logbus.client.admin.client import Admin
from logbus.client.admin.types import (
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    CreatedTopic,
    GroupMemberInfo,
    ListedOffset,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    PartitionInfo,
    ResourceType,
    TopicDescription,
    TopicPartition,
)

__all__ = [
    "Admin",
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
