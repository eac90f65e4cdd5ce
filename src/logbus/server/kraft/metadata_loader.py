"""The committed metadata image of one KRaft node (Kafka's `MetadataLoader`): follows
the high watermark of the node's `RaftClient` and replays every committed record of
`__cluster_metadata` into a `MetadataImage`, loading the latest snapshot first when the
log starts past what it has replayed (at start, or after a snapshot fetched from the
leader). Control records only move the image's offset.

Every controller runs one under its `QuorumController`; a broker (an observer of the
quorum) runs one to learn the cluster's metadata. The entry point is `MetadataLoader`.
Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from logbus.metadata.delta import MetadataDelta, replay_all
from logbus.metadata.image import EMPTY_IMAGE, MetadataImage
from logbus.metadata.records import decode_record
from logbus.raft.raft_client import RaftClient

__all__ = ["MetadataLoader"]

logger = logging.getLogger(__name__)


class MetadataLoader:
    """`image` is the state after every committed record replayed so far. `start()`
    replays what is committed and follows the log; `close()` stops it. `after_replay`
    runs after each pass (also when nothing changed)."""

    def __init__(
        self, client: RaftClient, *, after_replay: Callable[[], None] | None = None
    ) -> None:
        self.client = client
        self.image: MetadataImage = EMPTY_IMAGE
        self._after_replay = after_replay
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.catch_up()
        self._task = asyncio.get_running_loop().create_task(
            self._follow(), name=f"metadata-loader-{self.client.node_id}"
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_image(self, predicate: Callable[[MetadataImage], bool], timeout: float) -> None:  # noqa: ASYNC109
        """Wait until the image satisfies `predicate` (TimeoutError after `timeout`)."""
        async with asyncio.timeout(timeout):
            while not predicate(self.image):
                event = self._changed
                await event.wait()

    async def _follow(self) -> None:
        while True:
            try:
                self.catch_up()
                if self._after_replay is not None:
                    self._after_replay()
            except Exception:
                logger.exception("node %d: replaying the metadata log failed", self.client.node_id)
            await self.client.wait_change(0.5)

    def catch_up(self) -> bool:
        """Replay every committed record not yet in the image; whether it changed."""
        log = self.client.metadata_log
        image = self.image
        snapshot = log.snapshot_id
        if snapshot is not None and snapshot.end_offset - 1 > image.offset:
            loaded = replay_all(EMPTY_IMAGE, [decode_record(v) for v in log.snapshot_values()])
            image = replace(loaded, offset=snapshot.end_offset - 1, epoch=snapshot.epoch)
            logger.info("node %d loaded metadata snapshot %s", self.client.node_id, snapshot)
        delta = MetadataDelta(image)
        while batch := log.read_committed(delta.offset + 1):
            for committed in batch:
                if committed.value is None:
                    delta.offset, delta.epoch = committed.offset, committed.epoch
                else:
                    delta.replay(decode_record(committed.value), committed.offset, committed.epoch)
        if delta.offset != image.offset:
            image = delta.apply()
        if image is self.image:
            return False
        self.image = image
        self._changed.set()
        self._changed = asyncio.Event()
        return True
