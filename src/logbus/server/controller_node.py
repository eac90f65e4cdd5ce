"""A controller-only KRaft node (`process.roles=controller`): one voter of the quorum
(`logbus.raft`) serving the controller listener.

What runs today is the quorum itself: elections, the replicated `__cluster_metadata`
log, snapshots, DescribeQuorum. The active controller appends a NoOpRecord every
`metadata.max.idle.interval.ms` (KIP-835) so the log and its high watermark move while
nothing else is written, and every voter writes a snapshot once its log has grown by
`metadata.log.max.record.bytes.between.snapshots`. The controller's decisions on the
metadata log, and brokers replaying it, are the next steps (docs/kraft.md).

The entry point is `ControllerNode`; `logbus server start` runs it for a controller-only
configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Final, cast

from logbus.raft.quorum_config import QuorumConfig
from logbus.raft.raft_client import NotLeaderError, RaftClient
from logbus.raft.raft_server import RaftServer
from logbus.server.cluster_member import BrokerStartupError
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.kraft import KRaftSettings
from logbus.storage.errors import KafkaStorageError
from logbus.storage.meta_properties import MetaProperties, read_meta_properties

__all__ = ["NO_OP_RECORD", "ControllerNode", "check_formatted"]

logger = logging.getLogger(__name__)

# A metadata record: frame version 1, api key 20 (NoOpRecord), version 0, and the empty
# flexible body (no tagged fields), each an unsigned varint.
NO_OP_RECORD: Final = bytes([1, 20, 0, 0])


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


class ControllerNode:
    """One controller-only node: its Raft client and the listener it answers on.
    `start()`, then `stop()`; runs on one event loop."""

    def __init__(self, config: BrokerConfig) -> None:
        if config.kraft is None or not config.kraft.is_controller:
            raise BrokerStartupError("a controller node needs process.roles=controller")
        self.config = config
        self.kraft = config.kraft
        self.client: RaftClient | None = None
        self.server: RaftServer | None = None
        self._idle_task: asyncio.Task[None] | None = None
        self._size_at_snapshot = 0

    async def start(self) -> None:
        kraft = self.kraft
        meta = check_formatted(self.config, kraft)
        listener = next(
            listener
            for listener in self.config.listeners
            if listener.name == kraft.controller_listener_names[0]
        )
        quorum = QuorumConfig(
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
        self.client = RaftClient(quorum)
        await self.client.start()
        self.server = RaftServer(self.client, listener.host or "0.0.0.0", listener.port)
        await self.server.start()
        interval = cast(int, self.config.get("metadata.max.idle.interval.ms"))
        self._idle_task = asyncio.get_running_loop().create_task(self._tick(interval))
        logger.info(
            "logbus controller %d started: cluster %s, %s on port %d, voters %s",
            kraft.node_id, meta.cluster_id, listener.name, self.server.port,
            ",".join(str(v) for v in kraft.voters.values()),
        )  # fmt: skip

    async def _tick(self, no_op_interval_ms: int) -> None:
        """NoOpRecords while idle (the leader), and snapshots by size (every voter)."""
        client = self.client
        assert client is not None
        while True:
            await asyncio.sleep((no_op_interval_ms or 500) / 1000)
            if no_op_interval_ms > 0 and client.is_leader:
                with contextlib.suppress(NotLeaderError):
                    client.append([NO_OP_RECORD])
            self._maybe_snapshot(client)

    def _maybe_snapshot(self, client: RaftClient) -> None:
        """A snapshot at the high watermark once the log has grown by
        metadata.log.max.record.bytes.between.snapshots since the last one. The image of a
        controller that writes only NoOpRecords is empty, so is its snapshot."""
        log = client.metadata_log
        size = log.log.size_in_bytes
        if size - self._size_at_snapshot < self.kraft.max_bytes_between_snapshots:
            return
        end = log.high_watermark
        if end <= (log.snapshot_id.end_offset if log.snapshot_id is not None else 0):
            return
        snapshot = client.create_snapshot(end, [])
        self._size_at_snapshot = log.log.size_in_bytes
        logger.info("controller %d wrote snapshot %s", self.kraft.node_id, snapshot)

    async def stop(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
        if self.client is not None:
            await self.client.close()
        if self.server is not None:
            await self.server.close()
