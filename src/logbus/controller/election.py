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


def on_brokers_lost(
    state: PartitionState,
    dead: Collection[int],
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> PartitionState | None:
    """The state after the brokers `dead` died (Kafka's removal of offline replicas from
    the ISR, then the offline partition election): dead followers leave the ISR; a dead
    leader is replaced by the first live ISR member in assignment order (or, with
    `unclean`, the first live replica); with none, the partition goes offline (leader -1)
    and its ISR keeps one member, the one that may come back and lead without loss."""
    if not any(b in dead for b in (*state.isr, state.leader)):
        return None
    remaining = tuple(r for r in state.isr if r not in dead)
    if state.leader not in dead and state.leader != NO_LEADER:
        return _with(state, state.leader, remaining, controller_epoch)
    last = (state.leader,) if state.leader in state.isr else state.isr[:1]
    shrunk = PartitionState(
        NO_LEADER, state.leader_epoch, remaining or last, state.replicas,
        state.controller_epoch, state.version,
    )  # fmt: skip
    chosen = offline_leader(shrunk, live, unclean)
    leader, isr = (NO_LEADER, shrunk.isr) if chosen is None else chosen
    if leader == state.leader and isr == state.isr:
        return None  # offline already, and still
    return _with(shrunk, leader, isr, controller_epoch)


def controlled_shutdown_leader(
    state: PartitionState, live: Collection[int], shutting_down: Collection[int],
    controller_epoch: int,
) -> PartitionState | None:  # fmt: skip
    """Kafka's controlled shutdown election for a partition led by a stopping broker:
    the first replica (assignment order) that is live, not shutting down and in the ISR
    leads, and the shutting-down brokers leave the ISR. None when no replica can take
    over (the stopping broker keeps leading)."""
    for replica in state.replicas:
        if replica in live and replica not in shutting_down and replica in state.isr:
            isr = tuple(r for r in state.isr if r not in shutting_down)
            return _with(state, replica, isr, controller_epoch)
    return None


def without_follower(
    state: PartitionState, broker: int, controller_epoch: int
) -> PartitionState | None:
    """A stopping follower leaves the ISR (Kafka's OfflineReplica transition), unless it
    is the ISR's last member; None when nothing changes."""
    if broker == state.leader or broker not in state.isr or len(state.isr) <= 1:
        return None
    return _with(state, state.leader, tuple(r for r in state.isr if r != broker), controller_epoch)


def preferred_leader(
    state: PartitionState, live: Collection[int], controller_epoch: int
) -> PartitionState | None:
    """Kafka's preferred replica election: the first assigned replica leads when it is
    live and in the ISR (the ISR stays as it is); None when it cannot."""
    preferred = state.replicas[0] if state.replicas else NO_LEADER
    if preferred not in live or preferred not in state.isr:
        return None
    return _with(state, preferred, state.isr, controller_epoch)


def has_preferred_leader(state: PartitionState) -> bool:
    """Whether the partition is led by its preferred (first assigned) replica."""
    return bool(state.replicas) and state.leader == state.replicas[0]


def imbalanced_brokers(
    partitions: Collection[PartitionState], per_broker_percentage: int
) -> dict[int, float]:
    """Kafka's leader imbalance check: per preferred replica, the share of the partitions
    it prefers that another broker leads; only brokers above `per_broker_percentage`."""
    preferred: dict[int, list[PartitionState]] = {}
    for state in partitions:
        if state.replicas:
            preferred.setdefault(state.replicas[0], []).append(state)
    out: dict[int, float] = {}
    for broker, states in preferred.items():
        ratio = sum(1 for s in states if s.leader != broker) / len(states)
        if ratio > per_broker_percentage / 100:
            out[broker] = ratio
    return out
