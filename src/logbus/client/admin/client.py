"""The asyncio Admin client (Kafka's `Admin` interface): topics, partitions, configs,
offsets, records, the cluster and consumer groups.

Each call goes where Kafka sends it: topic changes to the controller, group calls to the
group's coordinator (found with FindCoordinator), offset look-ups and record deletion to
partition leaders, broker configs to that broker, everything else to any broker. A
retriable error (a lost connection, NOT_CONTROLLER, NOT_COORDINATOR, LEADER_NOT_AVAILABLE,
...) is retried, after fresh metadata and a backoff, until `default.api.timeout.ms` (or
the call's `timeout_ms`) runs out; only the items that failed are sent again.

Calls on several items return a dict of per-item results; if any item fails they raise
`AdminBatchError`, which holds each failed item's KafkaError and the other items' results.
The routing and retries are `AdminCalls` (`calls.py`, `Admin.calls`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from logbus.client import coordinator_lookup
from logbus.client.admin.calls import AdminCalls
from logbus.client.admin.config import ADMIN_CONFIG
from logbus.client.admin.leader_elections import elect_leaders_of
from logbus.client.admin.quota_types import (
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    entity_from_parts,
)
from logbus.client.admin.reassignments import alter_reassignments_of, list_reassignments_of
from logbus.client.admin.share_groups import (
    ShareGroupDescription,
    alter_share_offsets,
    delete_share_offsets,
    describe_share_groups_of,
    describe_share_offsets,
    list_share_groups,
)
from logbus.client.admin.transactions import (
    AbortTransactionSpec,
    TransactionDescription,
    TransactionListing,
    abort_txn,
    describe_txns,
    find_hanging_txn,
    list_txns,
    producers_of,
)
from logbus.client.admin.types import (
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    TopicDescription,
)
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.lifecycle import AsyncService
from logbus.client.metadata import ClusterMetadata
from logbus.client.requests.acls import create_acls, delete_acls, describe_acls
from logbus.client.requests.alter_configs import alter_configs, incremental_alter_configs
from logbus.client.requests.client_quotas import alter_client_quotas, describe_client_quotas
from logbus.client.requests.cluster import describe_cluster
from logbus.client.requests.configs import ConfigInfo, DescribeConfigsRequest, describe_configs
from logbus.client.requests.consumer_group import consumer_group_describe
from logbus.client.requests.delete_records import delete_records
from logbus.client.requests.group_membership import (
    GroupDescription,
    delete_groups,
    describe_groups,
    list_groups,
)
from logbus.client.requests.group_offsets import commit_offsets_each, delete_offsets, fetch_offsets
from logbus.client.requests.leader_elections import ElectionType
from logbus.client.requests.list_offsets import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ListedOffset,
    list_offsets_info,
)
from logbus.client.requests.log_dirs import (
    LogDirDescription,
    alter_replica_log_dirs,
    describe_log_dirs,
)
from logbus.client.requests.reassignments import PartitionReassignment
from logbus.client.requests.share_group_offsets import SharePartitionOffset
from logbus.client.requests.topics import (
    CreatedTopic,
    create_partitions_many,
    create_topics_many,
    delete_topics_many,
    new_topic,
)
from logbus.client.requests.transactions import ProducerState
from logbus.client.types import TopicPartition
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import MATCH_ALL, AclBinding, AclBindingFilter
from logbus.protocol.messages.create_topics_request import CreatableTopic

V = TypeVar("V")

_OFFSET_SPECS = {
    "earliest": EARLIEST,
    "latest": LATEST,
    "max_timestamp": MAX_TIMESTAMP,
}
_ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
_CONSUMER_PROTOCOL_TYPES = ("consumer", "")


class Admin(AsyncService):
    """An asyncio client that manages topics, configs, offsets and consumer groups.

        async with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            await admin.create_topics([NewTopic("orders", num_partitions=3)])

    Configuration takes Kafka's names as a dict and/or keyword arguments with
    underscores (`request_timeout_ms=5000`); unknown names raise ConfigError. `start()`
    (or entering `async with`) connects to the first bootstrap server that answers and
    raises KafkaConnectionError if none does; `close()` closes every connection. Safe to
    share between tasks of one event loop; not between loops or threads (use the blocking
    `logbus.Admin` there).
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self.config: dict[str, Any] = ADMIN_CONFIG.parse(config, **overrides)
        self._calls: AdminCalls | None = None

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to a bootstrap server (KafkaConnectionError if none answers)."""
        if self._calls is not None:
            return
        self._calls = AdminCalls(await Cluster.from_config(self.config), self.config)

    async def close(self) -> None:
        """Close every connection; the client cannot be used afterwards until `start()`."""
        calls, self._calls = self._calls, None
        if calls is not None:
            await calls.cluster.close()

    @property
    def calls(self) -> AdminCalls:
        """How this client routes and retries its calls (RuntimeError before `start()`)."""
        if self._calls is None:
            raise RuntimeError("the Admin client is not started (use `async with` or start())")
        return self._calls

    @property
    def cluster(self) -> Cluster:
        """The connections this client uses (RuntimeError before `start()`)."""
        return self.calls.cluster

    # --- topics -------------------------------------------------------------------------

    async def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, CreatedTopic]:
        """Create topics on the controller: topic name -> what was created (id, partition
        count, replication factor, configs). With `validate_only` the broker only checks
        the request. Failures (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
        INVALID_REPLICATION_FACTOR, INVALID_CONFIG, ...) raise AdminBatchError."""
        bodies: dict[str, CreatableTopic] = {}
        for topic in new_topics:
            if not isinstance(topic, NewTopic):
                raise TypeError(
                    f"create_topics takes NewTopic objects, not {type(topic).__name__} "
                    f"({topic!r}): e.g. NewTopic('events', num_partitions=3)"
                )
            if topic.name in bodies:
                raise ValueError(f"topic {topic.name!r} is listed twice")
            by_assignment = topic.replica_assignment is not None
            bodies[topic.name] = new_topic(
                topic.name,
                -1 if by_assignment else topic.num_partitions,
                -1 if by_assignment else topic.replication_factor,
                topic.config,
                topic.replica_assignment,
            )

        async def attempt(names: list[str], left_ms: int) -> dict[str, CreatedTopic | KafkaError]:
            return await create_topics_many(
                await self.calls.controller(),
                [bodies[name] for name in names],
                validate_only=validate_only,
                timeout_ms=left_ms,
            )

        return await self.calls.each(bodies, attempt, timeout_ms)

    async def delete_topics(self, topics: Sequence[str], *, timeout_ms: int | None = None) -> None:
        """Delete topics on the controller; a failure (UNKNOWN_TOPIC_OR_PARTITION,
        TOPIC_DELETION_DISABLED, ...) raises AdminBatchError."""

        async def attempt(names: list[str], left_ms: int) -> dict[str, KafkaError | None]:
            return await delete_topics_many(
                await self.calls.controller(), names, timeout_ms=left_ms
            )

        await self.calls.each(topics, attempt, timeout_ms)

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        """The names of every topic, sorted (internal topics such as `__consumer_offsets`
        only with `include_internal`)."""
        md = await self.calls.single(lambda: self.cluster.refresh(None), timeout_ms)
        return sorted(
            name
            for name, info in md.topics.items()
            if info.error_code == ErrorCode.NONE and (include_internal or not info.is_internal)
        )

    async def describe_topics(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> dict[str, TopicDescription]:
        """Topic name -> its id, internal flag and partitions (leader, replicas, ISR), for
        `topics` or (None) every topic. A missing topic raises AdminBatchError with
        UNKNOWN_TOPIC_OR_PARTITION for it."""
        if topics is None:
            md = await self.calls.single(lambda: self.cluster.refresh(None), timeout_ms)
            return {name: md.topics[name] for name in sorted(md.topics)}

        async def attempt(names: list[str], _: int) -> dict[str, TopicDescription | KafkaError]:
            md = await self.cluster.refresh(names)
            return {name: _catch(md.topic, name) for name in names}

        return await self.calls.each(topics, attempt, timeout_ms)

    async def create_partitions(
        self,
        new_partitions: Mapping[str, int | NewPartitions],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Grow topics: topic name -> its new total partition count (or NewPartitions with
        replica assignments). Sent to the controller; a count not above the current one
        is INVALID_PARTITIONS (raised as AdminBatchError)."""
        wanted: dict[str, tuple[int, Sequence[Sequence[int]] | None]] = {}
        for name, value in new_partitions.items():
            spec = value if isinstance(value, NewPartitions) else NewPartitions(value)
            wanted[name] = (spec.total_count, spec.new_assignments)

        async def attempt(names: list[str], left_ms: int) -> dict[str, KafkaError | None]:
            return await create_partitions_many(
                await self.calls.controller(),
                {name: wanted[name] for name in names},
                validate_only=validate_only,
                timeout_ms=left_ms,
            )

        await self.calls.each(wanted, attempt, timeout_ms)

    # --- configs ------------------------------------------------------------------------

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each resource (name -> ConfigEntry with value and source). A
        broker resource is asked of that broker. A missing topic is
        UNKNOWN_TOPIC_OR_PARTITION, raised as AdminBatchError."""
        keys = [_resource(r) for r in resources]

        async def describe(conn: Connection, r: ConfigResource) -> dict[str, ConfigEntry]:
            query = DescribeConfigsRequest(
                int(r.type),
                r.name,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
            found = await describe_configs(conn, query)
            return {info.name: _config_entry(info) for info in found}

        return await self.calls.each_resource(keys, describe, timeout_ms)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Change some configs of each resource, leaving the others as they are (KIP-339):
        `AlterConfigOp(name, value)` sets one; with `AlterConfigOpType.DELETE` it goes back
        to its default, with APPEND / SUBTRACT a value is added to / removed from a list
        config. A broker resource is changed on that broker. An unknown config, a bad
        value or a read-only broker setting is INVALID_CONFIG (its message names the
        config); failures raise AdminBatchError per resource. With `validate_only` the
        broker only checks the changes."""
        wanted = {_resource(r): [_alter_op(op) for op in ops] for r, ops in changes.items()}

        async def alter(conn: Connection, r: ConfigResource) -> None:
            await incremental_alter_configs(
                conn, int(r.type), r.name, wanted[r], validate_only=validate_only
            )

        await self.calls.each_resource(wanted, alter, timeout_ms)

    async def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Replace the whole set of each resource's own configs with `configs` (Kafka's
        legacy AlterConfigs: a config left out goes back to its default; prefer
        `incremental_alter_configs`). Failures raise AdminBatchError per resource."""
        wanted = {_resource(r): dict(values) for r, values in configs.items()}

        async def alter(conn: Connection, r: ConfigResource) -> None:
            await alter_configs(
                conn, int(r.type), r.name, wanted[r], validate_only=validate_only
            )

        await self.calls.each_resource(wanted, alter, timeout_ms)

    # --- offsets ------------------------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec],
        *,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets of partitions, asked of their leaders: for each partition "earliest"
        (the log start offset), "latest" (the log end offset; with read_committed the last
        stable offset), "max_timestamp" (the record with the largest timestamp) or a time
        in ms (the first record at or after it; offset -1 if there is none)."""
        if isolation_level not in _ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be read_uncommitted or read_committed, "
                f"not {isolation_level!r}"
            )
        level = _ISOLATION_LEVELS[isolation_level]
        wanted = {_tp(tp): _timestamp(spec) for tp, spec in specs.items()}

        async def on_leader(
            conn: Connection, batch: list[TopicPartition]
        ) -> Mapping[Any, ListedOffset | KafkaError]:
            return await list_offsets_info(
                conn, {tp: wanted[tp] for tp in batch}, isolation_level=level
            )

        async def attempt(
            batch: list[TopicPartition], _: int
        ) -> dict[TopicPartition, ListedOffset | KafkaError]:
            return await self.calls.on_leaders(batch, on_leader)

        return await self.calls.each(wanted, attempt, timeout_ms)

    async def delete_records(
        self,
        before: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Delete each partition's records below an offset (-1: below the high watermark,
        i.e. everything written so far), on its leader; returns each partition's new log
        start offset (low watermark). An offset above the high watermark is
        OFFSET_OUT_OF_RANGE; failures raise AdminBatchError per partition."""
        wanted: dict[TopicPartition, int] = {}
        for tp, offset in before.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
                raise ValueError(
                    f"delete records before an offset of at least 0 (or -1), not {offset!r}"
                )
            wanted[_tp(tp)] = offset

        async def on_leader(
            conn: Connection, batch: list[TopicPartition]
        ) -> Mapping[Any, int | KafkaError]:
            return await delete_records(
                conn, {tp: wanted[tp] for tp in batch}, timeout_ms=self.calls.request_timeout_ms
            )

        async def attempt(
            batch: list[TopicPartition], _: int
        ) -> dict[TopicPartition, int | KafkaError]:
            return await self.calls.on_leaders(batch, on_leader)

        return await self.calls.each(wanted, attempt, timeout_ms)

    # --- cluster ------------------------------------------------------------------------

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """The cluster id, the controller and every broker (DescribeCluster, or Metadata
        on brokers without it)."""

        async def describe() -> ClusterMetadata:
            return await describe_cluster(await self.cluster.bootstrap())

        md = await self.calls.single(describe, timeout_ms)
        nodes = [md.brokers[node_id] for node_id in sorted(md.brokers)]
        return ClusterDescription(md.cluster_id, md.brokers.get(md.controller_id), nodes)

    async def describe_log_dirs(
        self,
        brokers: Sequence[int] | None = None,
        *,
        partitions: Sequence[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Each broker's log dirs by path (every broker, unless `brokers` names some):
        the replicas each holds (only `partitions`' if given) with their size in bytes,
        offset lag and future flag, and the volume's total and usable bytes
        (DescribeLogDirs). A broker that fails raises AdminBatchError for it."""

        async def describe(conn: Connection) -> dict[str, LogDirDescription]:
            return await describe_log_dirs(conn, partitions)

        return await self.calls.on_each_broker(brokers, describe, timeout_ms)

    async def alter_replica_log_dirs(
        self,
        moves: Mapping[tuple[str, int, int], str],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Move replicas between their brokers' log dirs (AlterReplicaLogDirs): (topic,
        partition, broker id) -> the absolute path of one of that broker's `log.dirs`.
        Each broker copies the replica into a future log there while it keeps serving,
        then swaps them (watch `describe_log_dirs`: the replica shows as a future one in
        its new dir until then). Failures (LOG_DIR_NOT_FOUND for a path that is not a log
        dir, REPLICA_NOT_AVAILABLE for a replica the broker does not hold,
        KAFKA_STORAGE_ERROR) raise AdminBatchError naming each (topic, partition, broker)."""
        by_broker: dict[int, dict[TopicPartition, str]] = {}
        for (topic, partition, broker), path in moves.items():
            by_broker.setdefault(broker, {})[TopicPartition(topic, partition)] = path

        async def attempt(
            batch: list[int], _: int
        ) -> dict[int, dict[TopicPartition, KafkaError | None] | KafkaError]:
            out: dict[int, dict[TopicPartition, KafkaError | None] | KafkaError] = {}
            for broker in batch:
                try:
                    conn = await self.cluster.node(broker)
                    out[broker] = await alter_replica_log_dirs(conn, by_broker[broker])
                except KafkaError as exc:
                    out[broker] = exc
            return out

        answers = await self.calls.each(by_broker, attempt, timeout_ms)
        errors = {
            (tp.topic, tp.partition, broker): error
            for broker, found in answers.items()
            for tp, error in found.items()
            if error is not None
        }
        if errors:
            raise AdminBatchError(errors, {})

    async def elect_leaders(
        self,
        election_type: ElectionType | str | int,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Elect leaders (ElectLeaders on the controller): PREFERRED moves each partition's
        leadership to its first assigned replica if that one is in the ISR; UNCLEAN elects
        a leader for partitions without a live one. Every partition when `partitions` is
        None. Per partition: None when a leader was elected, else the error
        (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION...)."""
        return await elect_leaders_of(self.calls, election_type, partitions, timeout_ms)

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move partitions to new replicas (AlterPartitionReassignments on the controller,
        KIP-455): each partition mapped to its target replicas, or to None to cancel its
        reassignment. Per partition: None when accepted (the move then runs in the
        cluster), else the error (INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
        NO_REASSIGNMENT_IN_PROGRESS...)."""
        return await alter_reassignments_of(self.calls, reassignments, timeout_ms)

    async def list_partition_reassignments(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (all, or those of `partitions`), with each
        partition's replicas and those being added and removed."""
        return await list_reassignments_of(self.calls, partitions, timeout_ms)

    # --- ACLs ---------------------------------------------------------------------------

    async def create_acls(
        self, bindings: Sequence[AclBinding], *, timeout_ms: int | None = None
    ) -> None:
        """Create ACL bindings (CreateAcls, any broker). A refused binding (a bad pattern
        or principal: INVALID_REQUEST; no authorizer: SECURITY_DISABLED; no Alter on the
        cluster: CLUSTER_AUTHORIZATION_FAILED) raises AdminBatchError per binding."""
        wanted = list(dict.fromkeys(bindings))

        async def attempt(batch: list[AclBinding], _: int) -> dict[AclBinding, KafkaError | None]:
            results = await create_acls(await self.cluster.bootstrap(), batch)
            return dict(zip(batch, results, strict=True))

        await self.calls.each(wanted, attempt, timeout_ms)

    async def describe_acls(
        self, acl_filter: AclBindingFilter = MATCH_ALL, *, timeout_ms: int | None = None
    ) -> list[AclBinding]:
        """The ACL bindings matching the filter (every binding by default)."""

        async def describe() -> list[AclBinding]:
            return await describe_acls(await self.cluster.bootstrap(), acl_filter)

        return await self.calls.single(describe, timeout_ms)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> dict[AclBindingFilter, list[AclBinding]]:
        """Delete the bindings matching each filter; returns, per filter, those deleted."""
        wanted = list(dict.fromkeys(filters))

        async def attempt(
            batch: list[AclBindingFilter], _: int
        ) -> dict[AclBindingFilter, list[AclBinding] | KafkaError]:
            results = await delete_acls(await self.cluster.bootstrap(), batch)
            return dict(zip(batch, results, strict=True))

        return await self.calls.each(wanted, attempt, timeout_ms)

    # --- consumer groups ----------------------------------------------------------------

    async def list_consumer_groups(
        self, *, states: Sequence[str] = (), timeout_ms: int | None = None
    ) -> list[ConsumerGroupListing]:
        """The consumer groups of every broker, sorted by id (only those in `states`, e.g.
        ["Stable", "Empty"], if given). Groups of other protocol types (Connect workers)
        are left out, as Kafka's Admin does."""

        async def list_on(conn: Connection) -> list[ConsumerGroupListing]:
            return await list_groups(conn, states)

        found = await self.calls.on_each_broker(None, list_on, timeout_ms)
        groups = {
            g.group_id: g
            for listed in found.values()
            for g in listed
            if g.protocol_type in _CONSUMER_PROTOCOL_TYPES
        }
        return [groups[group_id] for group_id in sorted(groups)]

    async def describe_consumer_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, ConsumerGroupDescription]:
        """Group id -> its state, assignor, coordinator and members (with their assigned
        partitions), from each group's coordinator. A group that does not exist is
        GROUP_ID_NOT_FOUND, raised as AdminBatchError."""

        async def on_coordinator(
            conn: Connection, node_id: int, batch: list[str]
        ) -> dict[str, ConsumerGroupDescription | KafkaError]:
            found = await self._describe_either(conn, batch)
            md = self.cluster.metadata
            coordinator = md.brokers.get(node_id) if md is not None else None
            out: dict[str, ConsumerGroupDescription | KafkaError] = {}
            for group_id in batch:
                d = found[group_id]
                if isinstance(d, KafkaError):
                    out[group_id] = d
                elif not d.exists:
                    out[group_id] = _no_group(group_id)
                else:
                    out[group_id] = ConsumerGroupDescription(
                        d.group_id, d.state, d.protocol_type, d.protocol, d.members, coordinator,
                        d.group_type, d.group_epoch, d.assignment_epoch,
                    )
            return out

        async def attempt(
            batch: list[str], _: int
        ) -> dict[str, ConsumerGroupDescription | KafkaError]:
            return await self.calls.on_coordinators(batch, on_coordinator)

        return await self.calls.each(group_ids, attempt, timeout_ms)

    async def _describe_either(
        self, conn: Connection, group_ids: list[str]
    ) -> dict[str, GroupDescription | KafkaError]:
        """ConsumerGroupDescribe first (KIP-848 groups), DescribeGroups for the groups it
        does not know (classic ones), as Kafka's Admin does."""
        if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.api_versions:
            return await describe_groups(conn, group_ids)
        md = self.cluster.metadata
        names = {t.topic_id: name for name, t in md.topics.items()} if md is not None else {}
        found = await consumer_group_describe(conn, group_ids, names)
        classic = [
            g for g, d in found.items()
            if isinstance(d, KafkaError) and d.code == ErrorCode.GROUP_ID_NOT_FOUND
        ]
        if classic:
            found.update(await describe_groups(conn, classic))
        return found

    async def delete_consumer_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> None:
        """Delete groups and their committed offsets. A group with members is
        NON_EMPTY_GROUP, a missing one GROUP_ID_NOT_FOUND (raised as AdminBatchError)."""

        async def on_coordinator(
            conn: Connection, _: int, batch: list[str]
        ) -> dict[str, KafkaError | None]:
            out = await delete_groups(conn, batch)
            for group_id, result in out.items():
                if isinstance(result, KafkaError) and result.code == ErrorCode.GROUP_ID_NOT_FOUND:
                    out[group_id] = _no_group(group_id)
            return out

        async def attempt(batch: list[str], _: int) -> dict[str, KafkaError | None]:
            return await self.calls.on_coordinators(batch, on_coordinator)

        await self.calls.each(group_ids, attempt, timeout_ms)

    async def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (of `partitions`, or of every partition it has
        committed); partitions without a committed offset are left out. An unknown group
        has none. Raises KafkaError."""
        asked = None if partitions is None else [_tp(tp) for tp in partitions]

        async def fetch() -> dict[TopicPartition, int]:
            conn = await coordinator_lookup.coordinator(self.cluster, group_id, wait=0)
            found = await fetch_offsets(conn, group_id, asked)
            return {TopicPartition(*tp): offset for tp, offset in sorted(found.items())}

        return await self.calls.single(fetch, timeout_ms)

    async def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Set the group's committed offsets (partition -> offset; an object with
        `offset` and `metadata` attributes, like the consumer's OffsetAndMetadata, is
        taken too, its metadata committed with it). The
        group must have no active members (else UNKNOWN_MEMBER_ID); failures raise
        AdminBatchError per partition."""
        wanted = {_tp(tp): _offset_of(value) for tp, value in offsets.items()}

        async def on_coordinator(
            conn: Connection, batch: list[TopicPartition]
        ) -> Mapping[Any, KafkaError | None]:
            return await commit_offsets_each(
                conn, group_id, {tp: wanted[tp] for tp in batch}
            )

        attempt = self.calls.group_partitions(group_id, on_coordinator)
        await self.calls.each(wanted, attempt, timeout_ms)

    async def delete_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Forget the group's committed offsets of `partitions` (OffsetDelete). A
        partition of a topic the group's members consume is GROUP_SUBSCRIBED_TO_TOPIC;
        failures raise AdminBatchError per partition."""

        async def on_coordinator(
            conn: Connection, batch: list[TopicPartition]
        ) -> Mapping[Any, KafkaError | None]:
            return await delete_offsets(conn, group_id, batch)

        await self.calls.each(
            [_tp(tp) for tp in partitions],
            self.calls.group_partitions(group_id, on_coordinator),
            timeout_ms,
        )

    # --- share groups (kafka-share-groups) ----------------------------------------------

    async def list_share_groups(
        self, *, timeout_ms: int | None = None
    ) -> list[ConsumerGroupListing]:
        """The share groups (KIP-932) of every broker, sorted by id, with their state."""
        return await list_share_groups(self.calls, timeout_ms)

    async def describe_share_groups(
        self, group_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, ShareGroupDescription]:
        """Group id -> its state, epochs, assignor, coordinator and members (their
        subscriptions and assigned partitions), from each group's coordinator. A group
        that is not a share group is GROUP_ID_NOT_FOUND, raised as AdminBatchError."""
        return await describe_share_groups_of(self.calls, group_ids, timeout_ms)

    async def describe_share_group_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, SharePartitionOffset | None]:
        """The share group's start offsets (KIP-932) of `partitions`, or of every
        partition it has one for: a `SharePartitionOffset` (start offset, leader epoch),
        None where it has none (an unknown group has none). Raises KafkaError;
        AdminBatchError for partitions refused (TOPIC_AUTHORIZATION_FAILED)."""
        return await describe_share_offsets(self.calls, group_id, partitions, timeout_ms)

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """Move the share group's start offsets (partition -> offset); its members then
        read from there. The group must exist and have no members (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP); failures raise AdminBatchError per partition."""
        wanted = {_tp(tp): _offset_of(value) for tp, value in offsets.items()}
        moves = {tp: o if isinstance(o, int) else o[0] for tp, o in wanted.items()}
        await alter_share_offsets(self.calls, group_id, moves, timeout_ms)

    async def delete_share_group_offsets(
        self, group_id: str, topics: Sequence[str], *, timeout_ms: int | None = None
    ) -> None:
        """Forget the share group's start offsets of every partition of `topics`: its
        members then start as `share.auto.offset.reset` says. The group must exist and
        have no members; a topic without offsets is UNKNOWN_TOPIC_OR_PARTITION; failures
        raise AdminBatchError per topic."""
        await delete_share_offsets(self.calls, group_id, list(topics), timeout_ms)

    # --- client quotas ------------------------------------------------------------------

    async def describe_client_quotas(
        self,
        components: Sequence[ClientQuotaFilterComponent] = (),
        *,
        strict: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas configured on the entities matching every component (KIP-546;
        `strict`: entities with no other part). No component: every entity. A bad
        filter raises KafkaError INVALID_REQUEST."""
        wanted = [(c.entity_type, c.match_type, c.match) for c in components]

        async def call() -> dict[ClientQuotaEntity, dict[str, float]]:
            conn = await self.cluster.bootstrap()
            found = await describe_client_quotas(conn, wanted, strict=strict)
            return {entity_from_parts(e): values for e, values in found.items()}

        return await self.calls.single(call, timeout_ms)

    async def alter_client_quotas(
        self,
        alterations: Mapping[ClientQuotaEntity, Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> None:
        """Set (a value) or remove (None) quotas of each entity: `producer_byte_rate`,
        `consumer_byte_rate`, `request_percentage`, `controller_mutation_rate`. An
        unknown key or a bad value is INVALID_REQUEST; failures raise AdminBatchError
        per entity."""
        wanted = {entity.parts(): dict(ops) for entity, ops in alterations.items()}
        by_parts = {entity.parts(): entity for entity in alterations}

        async def attempt(
            batch: list[ClientQuotaEntity], _: int
        ) -> dict[ClientQuotaEntity, KafkaError | None]:
            conn = await self.cluster.bootstrap()
            answered = await alter_client_quotas(
                conn, {e.parts(): wanted[e.parts()] for e in batch}, validate_only=validate_only
            )
            return {by_parts[parts]: error for parts, error in answered.items()}

        await self.calls.each(list(alterations), attempt, timeout_ms)

    # --- transactions (kafka-transactions.sh) -------------------------------------------

    async def list_transactions(
        self,
        *,
        states: Sequence[str] = (),
        producer_ids: Sequence[int] = (),
        duration_ms: int = -1,
        timeout_ms: int | None = None,
    ) -> list[TransactionListing]:
        """The transactions every broker coordinates, sorted by transactional id (only
        those in `states`, e.g. ["Ongoing"], of `producer_ids`, or running for at least
        `duration_ms`, if given)."""
        return await list_txns(self.calls, states, producer_ids, duration_ms, timeout_ms)

    async def describe_transactions(
        self, transactional_ids: Sequence[str], *, timeout_ms: int | None = None
    ) -> dict[str, TransactionDescription]:
        """Each transactional id's state on its coordinator (an unknown id is
        TRANSACTIONAL_ID_NOT_FOUND, raised as AdminBatchError)."""
        return await describe_txns(self.calls, transactional_ids, timeout_ms)

    async def describe_producers(
        self, partitions: Sequence[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers active on each partition, from its leader: id, epoch, last
        sequence and timestamp, coordinator epoch, and where an open transaction started."""
        return await producers_of(self.calls, partitions, timeout_ms)

    async def abort_transaction(
        self, spec: AbortTransactionSpec, *, timeout_ms: int | None = None
    ) -> None:
        """Write the ABORT marker of a (hanging) transaction to one partition, as its
        coordinator would (WriteTxnMarkers to the partition's leader)."""
        await abort_txn(self.calls, spec, timeout_ms)

    async def find_hanging_transaction(
        self, partition: TopicPartition, start_offset: int, *, timeout_ms: int | None = None
    ) -> AbortTransactionSpec:
        """The `AbortTransactionSpec` of the transaction open on `partition` since
        `start_offset` (from DescribeProducers)."""
        return await find_hanging_txn(self.calls, partition, start_offset, timeout_ms)

def _catch(fn: Callable[[str], V], arg: str) -> V | KafkaError:
    try:
        return fn(arg)
    except KafkaError as exc:
        return exc


def _no_group(group_id: str) -> KafkaError:
    return KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group '{group_id}' does not exist.")


def _tp(value: tuple[str, int]) -> TopicPartition:
    topic, partition = value
    if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
        raise ValueError(f"expected TopicPartition(topic, partition), got {value!r}")
    return TopicPartition(topic, partition)


def _timestamp(spec: OffsetSpec) -> int:
    if isinstance(spec, str):
        if spec not in _OFFSET_SPECS:
            raise ValueError(
                f"offset spec must be earliest, latest, max_timestamp or a time in ms, "
                f"not {spec!r}"
            )
        return _OFFSET_SPECS[spec]
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < 0:
        raise ValueError(f"a time to look up must be milliseconds since the epoch, not {spec!r}")
    return spec


def _offset_of(value: Any) -> int | tuple[int, str]:
    """An offset, or (offset, metadata) from an object with `offset` and `metadata`."""
    offset = getattr(value, "offset", value)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"an offset must be a whole number of at least 0, not {value!r}")
    metadata = getattr(value, "metadata", None)
    return (offset, metadata) if isinstance(metadata, str) and metadata else offset


def _resource(resource: tuple[int, str]) -> ConfigResource:
    rtype, name = resource
    try:
        return ConfigResource(ResourceType(rtype), name)
    except ValueError:
        raise ValueError(f"unknown config resource type in {resource!r}") from None


def _alter_op(op: AlterConfigOp) -> tuple[str, int, str | None]:
    kind = AlterConfigOpType(op.op)
    if kind != AlterConfigOpType.DELETE and op.value is None:
        raise ValueError(f"{kind.name} of {op.name!r} needs a value")
    return op.name, int(kind), op.value


def _config_entry(info: ConfigInfo) -> ConfigEntry:
    return ConfigEntry(
        name=info.name,
        value=None if info.is_sensitive else info.value,
        source=ConfigSource.of(info.source),
        is_read_only=info.read_only,
        is_sensitive=info.is_sensitive,
        synonyms=tuple(
            ConfigSynonym(s.name, s.value, ConfigSource.of(s.source)) for s in info.synonyms
        ),
        type=info.config_type,
        documentation=info.documentation,
    )
