"""Partition leader election and ISR changes on broker loss, as values (Kafka's
`PartitionLeaderElectionAlgorithms` and the controller's removal of dead replicas).

Every function takes a partition's current state and the set of live brokers and returns
the new state, or None when nothing changes; the controller writes the result with its
epoch-fenced compare-and-set.
"""

from __future__ import annotations

from collections.abc import Collection

from logbus.controller.cluster_metadata import PartitionState

NO_LEADER = -1


def _with(
    state: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> PartitionState:
    """A new leader epoch: every controller change of leader or ISR bumps it (ZooKeeper
    mode), so brokers can tell a newer LeaderAndIsr from an older one."""
    return PartitionState(
        leader, state.leader_epoch + 1, isr, state.replicas, controller_epoch, state.version
    )


def offline_leader(
    state: PartitionState, live: Collection[int], unclean: bool
) -> tuple[int, tuple[int, ...]] | None:
    """Kafka's offline partition election: the first replica (in assignment order) that is
    alive and in the ISR; with `unclean`, else the first live replica, which becomes the
    whole ISR. None when no replica can lead."""
    for replica in state.replicas:
        if replica in live and replica in state.isr:
            return replica, tuple(r for r in state.isr if r in live)
    if unclean:
        for replica in state.replicas:
            if replica in live:
                return replica, (replica,)
    return None


def elect(
    state: PartitionState, live: Collection[int], unclean: bool, controller_epoch: int
) -> PartitionState | None:
    """The state after electing a leader for a partition whose leader is not live (or
    that never had one); None when its leader is live. A partition nobody can lead gets
    leader -1 and keeps its ISR (its last member may come back and lead without loss)."""
    if state.leader in live and state.leader_epoch >= 0:
        return None
    if state.leader_epoch < 0 and not state.isr:
        # A new partition: its ISR is its replica list.
        state = PartitionState(
            state.leader, state.leader_epoch, state.replicas, state.replicas,
            state.controller_epoch, state.version,
        )  # fmt: skip
    chosen = offline_leader(state, live, unclean)
    if chosen is None:
        if state.leader == NO_LEADER and state.leader_epoch >= 0:
            return None  # already offline
        return _with(state, NO_LEADER, state.isr, controller_epoch)
    leader, isr = chosen
    return _with(state, leader, isr, controller_epoch)


def remove_replica(
    state: PartitionState,
    broker: int,
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> PartitionState | None:
    """The state after `broker` died: a follower leaves the ISR (unless it is its last
    member); a leader is replaced by a live ISR member (or, with `unclean`, any live
    replica), else the partition goes offline with its ISR kept as it is."""
    if broker == state.leader:
        return elect(state, live, unclean, controller_epoch)
    if broker not in state.isr or len(state.isr) == 1:
        return None
    return _with(state, state.leader, tuple(r for r in state.isr if r != broker), controller_epoch)
