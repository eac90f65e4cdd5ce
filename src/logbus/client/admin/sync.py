"""The blocking Admin client (`logbus.Admin`): the asyncio `Admin` run on a background
event loop thread, each call waiting for its result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from logbus.client.admin import client
from logbus.client.admin.quota_types import ClientQuotaEntity, ClientQuotaFilterComponent
from logbus.client.admin.share_groups import ShareGroupDescription
from logbus.client.admin.transactions import (
    AbortTransactionSpec,
    TransactionDescription,
    TransactionListing,
)
from logbus.client.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    TopicDescription,
)
from logbus.client.blocking import BlockingClient
from logbus.client.errors import KafkaError
from logbus.client.requests.leader_elections import ElectionType
from logbus.client.requests.list_offsets import ListedOffset
from logbus.client.requests.log_dirs import LogDirDescription
from logbus.client.requests.reassignments import PartitionReassignment
from logbus.client.requests.share_group_offsets import SharePartitionOffset
from logbus.client.requests.topics import CreatedTopic
from logbus.client.requests.transactions import ProducerState
from logbus.client.types import TopicPartition
from logbus.protocol.acl_types import MATCH_ALL, AclBinding, AclBindingFilter


class Admin(BlockingClient[client.Admin]):
    """A blocking client that manages topics, configs, offsets and consumer groups.

        with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            admin.create_topics([NewTopic("orders", num_partitions=3)])

    Takes the configuration of `logbus.aio.Admin` and has the same methods, which block
    until done and raise the same errors. Creating it connects to a bootstrap server
    (KafkaConnectionError if none answers); `close()` (or leaving `with`) closes the
    connections and stops its event loop thread. Safe to share between threads: calls
    run one after another on its loop.
    """

    _noun = "admin client"

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        super().__init__(client.Admin(config, **overrides), "logbus-admin")

    def _shutdown(self, timeout: float | None) -> None:
        self._run(self._aio.close(), timeout)

    # --- topics -------------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, CreatedTopic]:
        """Create topics; see `logbus.aio.Admin.create_topics`."""
        return self._run(
            self._aio.create_topics(new_topics, validate_only=validate_only, timeout_ms=timeout_ms)
        )

    def delete_topics(self, topics: Sequence[str], *, timeout_ms: int | None = None) -> None:
        """Delete topics; see `logbus.aio.Admin.delete_topics`."""
        self._run(self._aio.delete_topics(topics, timeout_ms=timeout_ms))

    def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """Topic names, sorted; see `logbus.aio.Admin.list_topics`."""
        return self._run(
            self._aio.list_topics(include_internal=include_internal, timeout_ms=timeout_ms)
        )

    def describe_topics(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, TopicDescription]:
        """Topics' partitions; see `logbus.aio.Admin.describe_topics`."""
        return self._run(self._aio.describe_topics(topics, timeout_ms=timeout_ms))

    def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Grow topics; see `logbus.aio.Admin.create_partitions`."""
        self._run(
            self._aio.create_partitions(
                new_partitions, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    # --- configs ------------------------------------------------------------------------

    def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Resources' configs; see `logbus.aio.Admin.describe_configs`."""
        return self._run(
            self._aio.describe_configs(
                resources,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
                timeout_ms=timeout_ms,
            )
        )

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Change some configs; see `logbus.aio.Admin.incremental_alter_configs`."""
        self._run(
            self._aio.incremental_alter_configs(
                changes, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def describe_client_quotas(
        self,
        components: Sequence[ClientQuotaFilterComponent] = (),
        *,
        strict: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Configured client quotas; see `logbus.aio.Admin.describe_client_quotas`."""
        return self._run(
            self._aio.describe_client_quotas(components, strict=strict, timeout_ms=timeout_ms)
        )

    def alter_client_quotas(
        self,
        alterations: Mapping[ClientQuotaEntity, Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Set or remove client quotas; see `logbus.aio.Admin.alter_client_quotas`."""
        self._run(
            self._aio.alter_client_quotas(
                alterations, validate_only=validate_only, timeout_ms=timeout_ms
            )
        )

    def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Replace resources' configs; see `logbus.aio.Admin.alter_configs`."""
        self._run(
            self._aio.alter_configs(configs, validate_only=validate_only, timeout_ms=timeout_ms)
        )

    # --- offsets ------------------------------------------------------------------------

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Partitions' offsets; see `logbus.aio.Admin.list_offsets`."""
        return self._run(
            self._aio.list_offsets(specs, isolation_level=isolation_level, timeout_ms=timeout_ms)
        )

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        """Delete records below offsets; see `logbus.aio.Admin.delete_records`."""
        return self._run(self._aio.delete_records(before, timeout_ms=timeout_ms))

    # --- cluster ------------------------------------------------------------------------

    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """Cluster id, controller, brokers; see `logbus.aio.Admin.describe_cluster`."""
        return self._run(self._aio.describe_cluster(timeout_ms=timeout_ms))

    def describe_log_dirs(
        self,
        brokers: Sequence[int] | None = None,
        *,
        partitions: Sequence[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs; see `logbus.aio.Admin.describe_log_dirs`."""
        return self._run(
            self._aio.describe_log_dirs(brokers, partitions=partitions, timeout_ms=timeout_ms)
        )

    def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str], *, timeout_ms: int | None = None
    ) -> None:
        """Move replicas between their brokers' log dirs; see
        `logbus.aio.Admin.alter_replica_log_dirs`."""
        self._run(self._aio.alter_replica_log_dirs(moves, timeout_ms=timeout_ms))

    def elect_leaders(
        self,
        election_type: ElectionType | str | int,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Preferred or unclean leader elections; see `logbus.aio.Admin.elect_leaders`."""
        return self._run(self._aio.elect_leaders(election_type, partitions, timeout_ms=timeout_ms))

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start or cancel reassignments; see
        `logbus.aio.Admin.alter_partition_reassignments`."""
        return self._run(
            self._aio.alter_partition_reassignments(reassignments, timeout_ms=timeout_ms)
        )

    def list_partition_reassignments(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Reassignments in progress; see `logbus.aio.Admin.list_partition_reassignments`."""
        return self._run(self._aio.list_partition_reassignments(partitions, timeout_ms=timeout_ms))

    # --- ACLs ---------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding], *, timeout_ms: int | None = None) -> None:
        """Create ACL bindings; see `logbus.aio.Admin.create_acls`."""
        self._run(self._aio.create_acls(bindings, timeout_ms=timeout_ms))

    def describe_acls(
        self, acl_filter: AclBindingFilter = MATCH_ALL, *, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """The bindings matching a filter; see `logbus.aio.Admin.describe_acls`."""
        return self._run(self._aio.describe_acls(acl_filter, timeout_ms=timeout_ms))

    def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the bindings matching filters; see `logbus.aio.Admin.delete_acls`."""
        return self._run(self._aio.delete_acls(filters, timeout_ms=timeout_ms))

    # --- consumer groups ----------------------------------------------------------------

    def list_transactions(
        self,
        *,
        states: Sequence[str] = (),
        producer_ids: Sequence[int] = (),
        duration_ms: int = -1,
        timeout_ms: int | None = None,
    ) -> list[TransactionListing]:
        """Transactions; see `logbus.aio.Admin.list_transactions`."""
        return self._run(
            self._aio.list_transactions(
                states=states,
                producer_ids=producer_ids,
                duration_ms=duration_ms,
                timeout_ms=timeout_ms,
            )
        )

    def describe_transactions(
        self, transactional_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, TransactionDescription]:
        return self._run(self._aio.describe_transactions(transactional_ids, timeout_ms=timeout_ms))

    def describe_producers(
        self, partitions: Sequence[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._run(self._aio.describe_producers(partitions, timeout_ms=timeout_ms))

    def abort_transaction(
        self, spec: AbortTransactionSpec, *, timeout_ms: int | None = None
    ) -> None:
        self._run(self._aio.abort_transaction(spec, timeout_ms=timeout_ms))

    def find_hanging_transaction(
        self, partition: TopicPartition, start_offset: int, *, timeout_ms: int | None = None
    ) -> AbortTransactionSpec:
        return self._run(
            self._aio.find_hanging_transaction(partition, start_offset, timeout_ms=timeout_ms)
        )

    def list_consumer_groups(
        self, *, states: Sequence[str] = (), timeout_ms: int | None = None
    ) -> list[ConsumerGroupListing]:
        """Consumer groups; see `logbus.aio.Admin.list_consumer_groups`."""
        return self._run(self._aio.list_consumer_groups(states=states, timeout_ms=timeout_ms))

    def describe_consumer_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, ConsumerGroupDescription]:
        """Groups' state and members; see `logbus.aio.Admin.describe_consumer_groups`."""
        return self._run(self._aio.describe_consumer_groups(group_ids, timeout_ms=timeout_ms))

    def delete_consumer_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> None:
        """Delete groups; see `logbus.aio.Admin.delete_consumer_groups`."""
        self._run(self._aio.delete_consumer_groups(group_ids, timeout_ms=timeout_ms))

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Committed offsets; see `logbus.aio.Admin.list_consumer_group_offsets`."""
        return self._run(
            self._aio.list_consumer_group_offsets(group_id, partitions, timeout_ms=timeout_ms)
        )

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Set committed offsets; see `logbus.aio.Admin.alter_consumer_group_offsets`."""
        self._run(self._aio.alter_consumer_group_offsets(group_id, offsets, timeout_ms=timeout_ms))

    def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Forget committed offsets; see `logbus.aio.Admin.delete_consumer_group_offsets`."""
        self._run(
            self._aio.delete_consumer_group_offsets(group_id, partitions, timeout_ms=timeout_ms)
        )

    def list_share_groups(self, *, timeout_ms: int | None = None) -> list[ConsumerGroupListing]:
        """Share groups; see `logbus.aio.Admin.list_share_groups`."""
        return self._run(self._aio.list_share_groups(timeout_ms=timeout_ms))

    def describe_share_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, ShareGroupDescription]:
        """Share groups' state and members; see `logbus.aio.Admin.describe_share_groups`."""
        return self._run(self._aio.describe_share_groups(group_ids, timeout_ms=timeout_ms))

    def describe_share_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset | None]:
        """A share group's start offsets; see
        `logbus.aio.Admin.describe_share_group_offsets`."""
        return self._run(
            self._aio.describe_share_group_offsets(group_id, partitions, timeout_ms=timeout_ms)
        )

    def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Move a share group's start offsets; see
        `logbus.aio.Admin.alter_share_group_offsets`."""
        self._run(self._aio.alter_share_group_offsets(group_id, offsets, timeout_ms=timeout_ms))

    def delete_share_group_offsets(
        self, group_id: str, topics: Sequence[str], *, timeout_ms: int | None = None
    ) -> None:
        """Forget a share group's start offsets of topics; see
        `logbus.aio.Admin.delete_share_group_offsets`."""
        self._run(self._aio.delete_share_group_offsets(group_id, topics, timeout_ms=timeout_ms))
