"""A controller-only KRaft node (`process.roles=controller`): one voter of the quorum
(`logbus.raft`) serving the controller listener.

The quorum (elections, the replicated `__cluster_metadata` log, snapshots,
DescribeQuorum) carries the controller's metadata records: `QuorumController`
(quorum_controller.py) replays them into the metadata image on every voter and, on the
active controller, turns BrokerRegistration, BrokerHeartbeat, CreateTopics, DeleteTopics,
CreatePartitions, AlterPartition, IncrementalAlterConfigs, AllocateProducerIds,
CreateAcls, DeleteAcls, AlterClientQuotas and AlterUserScramCredentials into records.
A combined node (`process.roles=broker,controller`) runs one inside its `KRaftBroker`
(kraft_broker.py), whose broker follows the same Raft client's log.

The entry point is `ControllerNode`; `logbus server start` runs it for a controller-only
configuration.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

from logbus.controller.replication_control import TopicDefaults
from logbus.raft.quorum_config import QuorumConfig
from logbus.raft.raft_client import RaftClient
from logbus.raft.raft_server import RaftServer
from logbus.server.cluster_member import BrokerStartupError
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.kraft import KRaftSettings
from logbus.server.kraft.quorum_controller import ControllerSettings, QuorumController
from logbus.storage.errors import KafkaStorageError
from logbus.storage.meta_properties import MetaProperties, read_meta_properties

__all__ = ["ControllerNode", "check_formatted", "quorum_config"]

logger = logging.getLogger(__name__)


def check_formatted(config: BrokerConfig, kraft: KRaftSettings) -> MetaProperties:
    """Every log directory and the metadata log directory formatted by `logbus storage
    format` for this node and one cluster; BrokerStartupError naming the problem."""
    found: MetaProperties | None = None
    for directory in dict.fromkeys([*config.log_dirs, kraft.metadata_log_dir]):
        try:
            meta = read_meta_properties(Path(directory))
        except KafkaStorageError as exc:
            raise BrokerStartupError(str(exc)) from exc
        if meta is None or meta.version != 1:
            raise BrokerStartupError(
                f"No readable meta.properties version 1 in {directory} (have you run "
                "`logbus storage format` to format the directory?)"
            )
        if meta.broker_id != kraft.node_id:
            raise BrokerStartupError(
                f"Stored node id {meta.broker_id} in {directory} doesn't match node.id "
                f"{kraft.node_id}"
            )
        if found is not None and meta.cluster_id != found.cluster_id:
            raise BrokerStartupError(
                f"Invalid cluster.id in {directory}: expected {found.cluster_id}, found "
                f"{meta.cluster_id}"
            )
        found = found or meta
    assert found is not None
    return found


def quorum_config(config: BrokerConfig, meta: MetaProperties) -> QuorumConfig:
    """The Raft settings of this node (a voter, or an observer when it is not one)."""
    kraft = config.kraft
    assert kraft is not None
    return QuorumConfig(
        node_id=kraft.node_id,
        voters=kraft.voters,
        metadata_log_dir=Path(kraft.metadata_log_dir),
        cluster_id=meta.cluster_id or "",
        election_timeout_ms=kraft.election_timeout_ms,
        election_backoff_max_ms=kraft.election_backoff_max_ms,
        fetch_timeout_ms=kraft.fetch_timeout_ms,
        request_timeout_ms=kraft.request_timeout_ms,
        max_bytes_between_snapshots=kraft.max_bytes_between_snapshots,
        directory_id=meta.directory_id or "",
    )


class ControllerNode:
    """One controller-only node: its Raft client, the controller on it and the listener
    it answers on. `start()`, then `stop()`; runs on one event loop."""

    def __init__(self, config: BrokerConfig) -> None:
        if config.kraft is None or not config.kraft.is_controller:
            raise BrokerStartupError("a controller node needs process.roles=controller")
        self.config = config
        self.kraft = config.kraft
        self.client: RaftClient | None = None
        self.controller: QuorumController | None = None
        self.server: RaftServer | None = None

    async def start(self) -> None:
        kraft = self.kraft
        meta = check_formatted(self.config, kraft)
        listener = next(
            listener
            for listener in self.config.listeners
            if listener.name == kraft.controller_listener_names[0]
        )
        quorum = quorum_config(self.config, meta)
        self.client = RaftClient(quorum)
        await self.client.start()
        self.controller = QuorumController(self.client, self._controller_settings(quorum))
        await self.controller.start()
        self.server = RaftServer(
            self.client, listener.host or "0.0.0.0", listener.port, apis=self.controller.apis()
        )
        await self.server.start()
        logger.info(
            "logbus controller %d started: cluster %s, %s on port %d, voters %s",
            kraft.node_id, meta.cluster_id, listener.name, self.server.port,
            ",".join(str(v) for v in kraft.voters.values()),
        )  # fmt: skip

    def _controller_settings(self, quorum: QuorumConfig) -> ControllerSettings:
        kraft, config = self.kraft, self.config
        return ControllerSettings(
            cluster_id=quorum.cluster_id,
            session_timeout_ms=kraft.broker_session_timeout_ms,
            no_op_interval_ms=cast(int, config.get("metadata.max.idle.interval.ms")),
            max_bytes_between_snapshots=kraft.max_bytes_between_snapshots,
            topic_defaults=TopicDefaults(
                num_partitions=cast(int, config.get("num.partitions")),
                replication_factor=cast(int, config.get("default.replication.factor")),
            ),
            static_config=config,
        )

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.close()
        if self.client is not None:
            await self.client.close()
        if self.server is not None:
            await self.server.close()
