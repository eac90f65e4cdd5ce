"""The controller's leadership moves on request, as values and over an embedded store
(no sockets): controlled shutdown, ElectLeaders' preferred and unclean elections, and the
preferred-leader rebalance, with Kafka's choices and error codes."""

from __future__ import annotations

from pathlib import Path

from logbus.controller.channel import LocalChannel
from logbus.controller.cluster_metadata import BrokerInfo, PartitionState
from logbus.controller.controller import Controller, NewTopic
from logbus.controller.election import (
    controlled_shutdown_leader,
    has_preferred_leader,
    imbalanced_brokers,
    preferred_leader,
    without_follower,
)
from logbus.controller.leader_elections import (
    ElectionResult,
    ElectionType,
    controlled_shutdown,
    elect_leaders,
    rebalance_preferred_leaders,
)
from logbus.controller.metadata_store import EmbeddedStore
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition


def state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, 4, isr, replicas, 1, 7)


# --- choices as values --------------------------------------------------------------------


def test_controlled_shutdown_leader_is_the_first_live_isr_replica_not_stopping() -> None:
    s = state(1, (1, 3, 2), (1, 2, 3))
    new = controlled_shutdown_leader(s, live={1, 2, 3}, shutting_down={1}, controller_epoch=9)
    assert new == PartitionState(2, 5, (3, 2), (1, 2, 3), 9, 7)
    # 2 is stopping too, 3 is dead: nobody can take over.
    assert controlled_shutdown_leader(s, {1, 2}, {1, 2}, 9) is None
    # Only the stopping broker in the ISR.
    assert controlled_shutdown_leader(state(1, (1,), (1, 2, 3)), {1, 2, 3}, {1}, 9) is None


def test_a_stopping_follower_leaves_the_isr_unless_it_is_the_last_member() -> None:
    assert without_follower(state(2, (2, 1, 3), (1, 2, 3)), 1, 9) == PartitionState(
        2, 5, (2, 3), (1, 2, 3), 9, 7
    )
    assert without_follower(state(2, (2,), (1, 2, 3)), 1, 9) is None  # not in the ISR
    assert without_follower(state(1, (1,), (1, 2)), 1, 9) is None  # the leader itself


def test_preferred_leader_needs_the_first_replica_live_and_in_sync() -> None:
    s = state(2, (2, 1), (1, 2, 3))
    assert not has_preferred_leader(s)
    assert preferred_leader(s, {1, 2, 3}, 9) == PartitionState(1, 5, (2, 1), (1, 2, 3), 9, 7)
    assert preferred_leader(s, {2, 3}, 9) is None  # not live
    assert preferred_leader(state(2, (2, 3), (1, 2, 3)), {1, 2, 3}, 9) is None  # out of sync
    assert has_preferred_leader(state(1, (1,), (1, 2)))


def test_imbalance_is_the_share_of_preferred_partitions_led_elsewhere() -> None:
    states = [
        state(1, (1, 2), (1, 2)),
        state(2, (1, 2), (1, 2)),  # prefers 1, led by 2
        state(1, (1, 2), (1, 2)),
        state(1, (1, 2), (1, 2)),
        state(2, (2, 1), (2, 1)),
    ]
    assert imbalanced_brokers(states, 10) == {1: 0.25}
    assert imbalanced_brokers(states, 25) == {}  # not above


# --- the controller over an embedded store ------------------------------------------------


def controller_with_brokers(tmp_path: Path, *others: int) -> Controller:
    """A stand-alone controller (broker 0) whose store also registers `others`."""
    controller = Controller(EmbeddedStore(tmp_path), LocalChannel(), BrokerInfo(0, "h", 1))
    controller.start()
    for broker in others:
        controller.store.create_json(
            f"/brokers/ids/{broker}",
            {"host": "h", "port": 10 + broker, "endpoints": [f"PLAINTEXT://h:{10 + broker}"]},
            ephemeral=True,
        )
    return controller


def create(controller: Controller, name: str, assignments: dict[int, list[int]]) -> None:
    result = controller.create_topic(NewTopic(name, -1, -1, assignments, {}))
    assert result.error == ErrorCode.NONE, result


def leaders(controller: Controller, name: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    return {p: (s.leader, s.isr) for p, s in controller.topics[name].partitions.items()}


def test_controlled_shutdown_moves_leaders_and_drops_the_broker_from_isrs(tmp_path: Path) -> None:
    controller = controller_with_brokers(tmp_path, 1, 2)
    create(controller, "t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 1, 0]})
    create(controller, "solo", {0: [1]})
    epoch = controller.store.stat("/brokers/ids/1").czxid
    assert controlled_shutdown(controller, 1, epoch) == (ErrorCode.NONE, [])
    assert leaders(controller, "t") == {0: (0, (0, 2)), 1: (2, (2, 0)), 2: (2, (2, 0))}
    assert leaders(controller, "solo") == {0: (1, (1,))}  # one replica: cannot move
    assert controller.shutting_down == {1}
    # Meanwhile it is never elected: not as the preferred leader, not to an ISR.
    assert elect_leaders(controller, ElectionType.PREFERRED, [TopicPartition("t", 1)]) == {
        TopicPartition("t", 1): ElectionResult(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition t-1 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )
    }
    controller.shutdown()


def test_controlled_shutdown_names_what_cannot_move_and_refuses_strangers(
    tmp_path: Path,
) -> None:
    controller = controller_with_brokers(tmp_path, 1, 2)
    create(controller, "t", {0: [1, 2], 1: [2, 1]})
    topic = controller.topics["t"]
    # Partition 0's followers fell out of the ISR: nobody may take over.
    topic.partitions[0] = controller._write_state(
        "t", 0, PartitionState(1, 1, (1,), (1, 2), 1, topic.partitions[0].version), False
    )
    epoch = controller.store.stat("/brokers/ids/1").czxid
    assert controlled_shutdown(controller, 1, epoch - 1) == (ErrorCode.STALE_BROKER_EPOCH, [])
    assert controller.shutting_down == set()
    assert controlled_shutdown(controller, 7, -1) == (ErrorCode.BROKER_NOT_AVAILABLE, [])
    assert controlled_shutdown(controller, 1, -1) == (ErrorCode.NONE, [TopicPartition("t", 0)])
    assert leaders(controller, "t") == {0: (1, (1,)), 1: (2, (2,))}
    controller.shutdown()


def test_elect_leaders_results_follow_kafka(tmp_path: Path) -> None:
    controller = controller_with_brokers(tmp_path, 1, 2)
    create(controller, "t", {0: [1, 2, 0], 1: [2, 0, 1]})
    topic = controller.topics["t"]
    topic.partitions[0] = controller._write_state(
        "t", 0, PartitionState(2, 1, (2, 1, 0), (1, 2, 0), 1, topic.partitions[0].version), False
    )
    t0, t1, missing = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 9)
    results = elect_leaders(controller, ElectionType.PREFERRED, [t0, t1, missing])
    assert results[t0] == ElectionResult(leader=1)
    assert results[t1].error == ErrorCode.ELECTION_NOT_NEEDED
    assert results[missing] == ElectionResult(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    )
    assert leaders(controller, "t")[0] == (1, (2, 1, 0))
    # Unclean: a live leader needs nothing; every partition when none are named.
    every = elect_leaders(controller, ElectionType.UNCLEAN, None)
    assert {tp: r.error for tp, r in every.items()} == {
        t0: ErrorCode.ELECTION_NOT_NEEDED,
        t1: ErrorCode.ELECTION_NOT_NEEDED,
    }
    # The leader's broker gone and only it in sync: the unclean election takes another.
    controller.store.delete("/brokers/ids/2")
    topic.partitions[1] = controller._write_state(
        "t", 1, PartitionState(2, 3, (2,), (2, 0, 1), 1, topic.partitions[1].version), False
    )
    assert elect_leaders(controller, ElectionType.PREFERRED, [t1])[t1].error == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    )
    assert elect_leaders(controller, ElectionType.UNCLEAN, [t1])[t1] == ElectionResult(leader=0)
    assert leaders(controller, "t")[1] == (0, (0,))
    controller.shutdown()


def test_rebalance_moves_only_brokers_above_the_imbalance_threshold(tmp_path: Path) -> None:
    controller = controller_with_brokers(tmp_path, 1)
    create(controller, "t", {p: [1, 0] if p < 4 else [0, 1] for p in range(8)})
    topic = controller.topics["t"]
    # Broker 1 prefers partitions 0-3 and leads only 1-3 (25% elsewhere); broker 0 all.
    old = topic.partitions[0]
    topic.partitions[0] = controller._write_state(
        "t", 0, PartitionState(0, 1, (1, 0), (1, 0), 1, old.version), False
    )
    assert rebalance_preferred_leaders(controller, 25) == []
    assert rebalance_preferred_leaders(controller, 10) == [TopicPartition("t", 0)]
    assert leaders(controller, "t")[0] == (1, (1, 0))
    controller.shutdown()
