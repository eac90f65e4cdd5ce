"""Replica assignment (rack-aware as Kafka's) and leader election as values (no sockets)."""

from __future__ import annotations

import pytest

from logbus.controller.assignment import ControllerError, assign_replicas, rack_alternated
from logbus.controller.cluster_metadata import PartitionState
from logbus.controller.election import NO_LEADER, elect, on_brokers_lost
from logbus.protocol import ErrorCode

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_order_matches_kafka() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafka() -> None:
    # Kafka's AdminRackAwareTest vector (fixed start index 0, first partition 0).
    assert assign_replicas(list(RACKS), 7, 3, start_index=0, racks=RACKS) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_aware_assignment_puts_replicas_in_distinct_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for _ in range(20):  # random start index and shift
        for replicas in assign_replicas(list(racks), 12, 3, racks=racks).values():
            assert len({racks[b] for b in replicas}) == 3
            assert len(set(replicas)) == 3


def test_some_brokers_without_rack_is_an_error() -> None:
    with pytest.raises(ControllerError) as info:
        assign_replicas([1, 2, 3], 3, 2, racks={1: "a", 2: "b", 3: None})
    assert "Not all brokers have rack information" in info.value.message


def test_rf_larger_than_live_brokers() -> None:
    with pytest.raises(ControllerError) as info:
        assign_replicas([1, 2], 1, 3)
    assert info.value.error == ErrorCode.INVALID_REPLICATION_FACTOR


def state(
    leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...]
) -> PartitionState:
    return PartitionState(leader, epoch, isr, replicas, 1, 7)


def test_new_partition_elects_first_live_replica() -> None:
    new = elect(state(-1, -1, (2, 3, 1), (2, 3, 1)), {1, 3}, False, 5)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr, new.controller_epoch) == (3, 0, (3, 1), 5)
    assert new.version == 7  # the caller's compare-and-set uses the node's version


def test_live_leader_needs_no_election() -> None:
    assert elect(state(1, 4, (1, 2), (1, 2)), {1, 2}, False, 5) is None


def test_dead_leader_replaced_from_isr_in_assignment_order() -> None:
    new = on_brokers_lost(state(1, 4, (1, 3, 2), (1, 2, 3)), {1}, {2, 3}, False, 9)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (2, 5, (3, 2))


def test_dead_follower_leaves_the_isr() -> None:
    new = on_brokers_lost(state(1, 4, (1, 2, 3), (1, 2, 3)), {3}, {1, 2}, False, 9)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr) == (1, 5, (1, 2))
    assert on_brokers_lost(state(1, 4, (1, 2), (1, 2, 3)), {3}, {1, 2}, False, 9) is None


def test_no_live_isr_member_leaves_the_partition_offline_unless_unclean() -> None:
    # ISR [1] (2 fell behind), then 1 dies: 2 is alive but out of sync.
    before = state(1, 4, (1,), (1, 2))
    offline = on_brokers_lost(before, {1}, {2}, False, 9)
    assert offline is not None
    assert (offline.leader, offline.leader_epoch, offline.isr) == (NO_LEADER, 5, (1,))
    # Still offline: nothing to write again.
    assert on_brokers_lost(offline, {1}, {2}, False, 9) is None
    assert elect(offline, {2}, False, 9) is None
    unclean = on_brokers_lost(before, {1}, {2}, True, 9)
    assert unclean is not None
    assert (unclean.leader, unclean.isr) == (2, (2,))
    # The last ISR member coming back leads again without loss.
    back = elect(offline, {1, 2}, False, 9)
    assert back is not None and (back.leader, back.isr) == (1, (1,))
    # Unclean election enabled later elects the out-of-sync replica.
    late = elect(offline, {2}, True, 9)
    assert late is not None and (late.leader, late.isr, late.leader_epoch) == (2, (2,), 6)


def test_whole_isr_dead_at_once_keeps_the_leader_as_last_member() -> None:
    new = on_brokers_lost(state(1, 4, (1, 2), (1, 2, 3)), {1, 2}, {3}, False, 9)
    assert new is not None
    assert (new.leader, new.isr) == (NO_LEADER, (1,))
