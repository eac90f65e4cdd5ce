"""A leader cut off from the cluster steps aside: the leader isolation guard.

A broker that has lost its metadata session (`MetadataSession.lost`) and whose ISR
followers of a partition have stopped fetching from it cannot acknowledge an acks=all
write there, and the controller is electing (or has elected) another leader from those
followers. Kept as leader, it would accept produce requests it can never complete and
park them until their timeout, so clients would go on sending to it for as long as
their own delivery timeouts (a minute by default) instead of looking for the new
leader. Instead the guard, every `CHECK_INTERVAL_S` while the session is lost, steps aside
from each partition it leads whose followers have not been heard from within the
session timeout (`Partition.cut_off_from_followers`):

- produce and fetch for it are answered NOT_LEADER_OR_FOLLOWER, and the requests parked on
  it complete at once with that error (`ReplicaManager.step_aside`);
- its own Metadata answers name, instead of itself, the replica the controller elects
  when a leader is lost (the first in assignment order of the other ISR members), or no
  leader when there is none. Clients keep asking the broker they are connected to
  (librdkafka connects only to the brokers it needs): a broker that named no leader, or
  itself, would keep them here. The name is a hint, never a claim: a broker that does not
  lead the partition answers NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH), and its own
  Metadata, which the controller keeps up to date, names the real leader.

It leads again only once it learns the partition's current state from the controller:
a LeaderAndIsr (which the controller sends a broker that registers again after its
session expired) makes it leader or follower as it says; when the session comes back
without having expired (no election could have happened without the controller writing
the partition's state), the partition's state as the controller wrote it in the metadata
store decides: the same leader epoch naming this broker resumes the leadership, anything
else waits for the LeaderAndIsr on its way.

Stepping aside never acknowledges anything, so it cannot break safety; a leader whose
followers still fetch keeps serving with the session lost (with the metadata service down
for every broker nobody can be elected, and the ISR, which cannot change, still commits
acks=all writes). Kafka's brokers have no such guard: an isolated Kafka leader keeps
accepting produce requests until their timeouts.

Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from logbus.controller.cluster_metadata import MetadataCache, PartitionState, TopicMetadata
from logbus.server.metadata_session import MetadataSession
from logbus.server.replica.partition import Partition
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 0.2
NO_LEADER = -1

# The partition's state as the controller last wrote it (its state node's JSON: "leader",
# "leader_epoch", "isr"; and the node's version as "partition_epoch"), None when there is
# none; read off the event loop.
ReadPartitionState = Callable[[str, int], Awaitable["dict[str, Any] | None"]]


def likely_successor(state: PartitionState, broker_id: int) -> int:
    """The replica the controller elects when `broker_id`, the leader, is lost: the first
    other ISR member in assignment order (-1 when there is none)."""
    return next((r for r in state.replicas if r in state.isr and r != broker_id), NO_LEADER)


class LeaderIsolationGuard:
    """Steps this broker aside from the partitions it leads while it is cut off from its
    metadata session and from their followers; see the module docstring. `run()` is its
    task; `silence_ms` is how long a follower must have been silent (the session timeout:
    by then the controller has declared this broker gone)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        session: MetadataSession,
        read_partition_state: ReadPartitionState,
        silence_ms: int,
    ) -> None:
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.session = session
        self.read_partition_state = read_partition_state
        self.silence_ms = silence_ms
        # Of each partition stepped aside from: the metadata cache's entry as it was, and
        # the one with the hinted leader put in its place.
        self._cached: dict[TopicPartition, tuple[PartitionState, PartitionState]] = {}
        self._resuming: asyncio.Task[None] | None = None
        session.on_regained(self._on_regained)

    async def run(self) -> None:
        try:
            while True:
                await asyncio.sleep(CHECK_INTERVAL_S)
                if self.session.lost:
                    try:
                        self.check(int(time.time() * 1000))
                    except Exception:
                        log.exception("leader isolation check failed")
        finally:
            if self._resuming is not None:
                self._resuming.cancel()

    def check(self, now_ms: int) -> list[TopicPartition]:
        """Step aside from every partition led here whose followers went silent; those."""
        out = []
        for tp, part in list(self.replica_manager.partitions.items()):
            if part.cut_off_from_followers(now_ms, self.silence_ms):
                self._step_aside(tp, part)
                out.append(tp)
        return out

    def _step_aside(self, tp: TopicPartition, part: Partition) -> None:
        log.warning(
            "stepping aside as leader of %s-%d (leader epoch %d): the metadata session is "
            "lost and ISR followers %s have not fetched for %d ms",
            part.topic, part.index, part.leader_epoch,
            [r for r in part.isr if r != part.broker_id], self.silence_ms,
        )  # fmt: skip
        self.replica_manager.step_aside(part)
        topic = self.metadata_cache.topics.get(tp.topic)
        state = None if topic is None else topic.partitions.get(tp.partition)
        if topic is not None and state is not None and state.leader == part.broker_id:
            hinted = dataclasses.replace(state, leader=likely_successor(state, part.broker_id))
            self._cached[tp] = (state, hinted)
            self._cache_state(topic, tp.partition, hinted)

    def _cache_state(self, topic: TopicMetadata, partition: int, state: PartitionState) -> None:
        """A copy of the cached topic with `state` for `partition` (the cached topic may
        be the object the controller sent; it is never changed in place)."""
        self.metadata_cache.update_topic(
            dataclasses.replace(topic, partitions={**topic.partitions, partition: state})
        )

    def stepped_aside(self) -> list[TopicPartition]:
        return [tp for tp, p in self.replica_manager.partitions.items() if p.stepped_aside]

    # --- resuming -----------------------------------------------------------------------

    def _on_regained(self, same_session: bool) -> None:
        self._forget_resumed()
        if not same_session or not self.stepped_aside():
            return  # after an expiry, the controller's LeaderAndIsr decides
        if self._resuming is None or self._resuming.done():
            self._resuming = asyncio.get_running_loop().create_task(self._resume_from_store())

    async def _resume_from_store(self) -> None:
        for tp in self.stepped_aside():
            try:
                stored = await self.read_partition_state(tp.topic, tp.partition)
            except Exception:
                log.info("cannot read the state of %s; waiting for the controller", tp)
                continue
            self.resume_if_current(tp, stored)

    def resume_if_current(self, tp: TopicPartition, stored: dict[str, Any] | None) -> bool:
        """Lead `tp` again if it is still stepped aside, the session is held, and the
        controller's stored state names this broker leader at the same leader epoch."""
        part = self.replica_manager.partitions.get(tp)
        if part is None or not part.stepped_aside or self.session.lost or stored is None:
            return False
        stored_leader = (stored.get("leader"), stored.get("leader_epoch"))
        if stored_leader != (part.broker_id, part.leader_epoch):
            log.info(
                "%s-%d stays stepped aside: the controller's state is %s", tp.topic, tp.partition,
                stored,
            )  # fmt: skip
            return False
        isr = tuple(int(r) for r in stored.get("isr", part.isr))
        version = int(stored.get("partition_epoch", part.partition_epoch))
        part.make_leader(part.leader_epoch, isr, part.replicas, version, int(time.time() * 1000))
        cached = self._cached.pop(tp, None)
        topic = self.metadata_cache.topics.get(tp.topic)
        if cached is not None and topic is not None:
            original, hinted = cached
            if topic.partitions.get(tp.partition) is hinted:  # no UpdateMetadata since
                self._cache_state(
                    topic, tp.partition, dataclasses.replace(original, isr=isr, version=version)
                )
        log.info("leading %s-%d again (leader epoch %d)", tp.topic, tp.partition, part.leader_epoch)
        self.replica_manager.purgatory.notify((tp.topic, tp.partition))
        return True

    def _forget_resumed(self) -> None:
        """Drop the saved cache entries of partitions the controller has since settled."""
        for tp in list(self._cached):
            part = self.replica_manager.partitions.get(tp)
            if part is None or not part.stepped_aside:
                del self._cached[tp]
