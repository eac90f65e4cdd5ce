"""The Admin client: manage topics, partitions, configs, offsets, records and consumer
groups and transactions of a logbus (or Kafka) cluster.

The entry point is `Admin` (asyncio; `logbus.aio.Admin`); `logbus.client.admin.sync.Admin`
(`logbus.Admin`) is its blocking twin. Calls on several items return per-item results and
raise `AdminBatchError` with per-item errors when any fail. ACLs: `AclBinding` (a
`ResourcePattern` and an `AccessControlEntry`) and `AclBindingFilter`.
"""

from logbus.client.admin.client import Admin
from logbus.client.admin.quota_types import ClientQuotaEntity, ClientQuotaFilterComponent
from logbus.client.admin.transactions import (
    AbortTransactionSpec,
    TransactionDescription,
    TransactionListing,
)
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
from logbus.client.requests.log_dirs import LogDirDescription, ReplicaInfo
from logbus.client.requests.transactions import ProducerState
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from logbus.protocol.acl_types import ResourceType as AclResourceType

__all__ = [
    "AbortTransactionSpec",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "Admin",
    "AdminBatchError",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerInfo",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
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
    "LogDirDescription",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "PartitionInfo",
    "PatternType",
    "ProducerState",
    "ReplicaInfo",
    "ResourcePattern",
    "ResourceType",
    "TopicDescription",
    "TopicPartition",
    "TransactionDescription",
    "TransactionListing",
]
