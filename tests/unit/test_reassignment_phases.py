"""Partition reassignment as values: the replica sets of a move (Kafka's
`ReplicaAssignment`), the controller's checks of a target, and the JSON documents and
throttle lists of `logbus reassign-partitions`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logbus.cli.common import CommandError
from logbus.cli.reassignment_json import (
    ReplicaLogDir,
    format_reassignment,
    parse_reassignment,
    parse_replica_log_dirs,
    parse_topics_to_move,
)
from logbus.cli.reassignment_throttles import throttled_replicas
from logbus.controller.channel import LocalChannel
from logbus.controller.cluster_metadata import BrokerInfo
from logbus.controller.controller import Controller, NewTopic
from logbus.controller.isr_changes import IsrChangeRequest, alter_partition
from logbus.controller.metadata_store import EmbeddedStore
from logbus.controller.reassignment import (
    ReassignmentResult,
    ReplicaAssignment,
    alter_reassignments,
    list_reassignments,
    validate_target,
)
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition


def test_a_move_adds_the_target_first_and_removes_the_rest() -> None:
    moved = ReplicaAssignment((0, 1, 2)).reassign_to([3, 1, 2])
    assert moved == ReplicaAssignment((3, 1, 2, 0), adding=(3,), removing=(0,))
    assert moved.is_being_reassigned
    assert moved.origin == (1, 2, 0)
    assert moved.target == (3, 1, 2)


def test_a_replaced_move_starts_from_the_original_replicas() -> None:
    moving = ReplicaAssignment((0, 1, 2)).reassign_to([3, 4, 5])
    again = moving.reassign_to([0, 4])
    assert again == ReplicaAssignment((0, 4, 1, 2), adding=(4,), removing=(1, 2))
    cancelled = moving.reassign_to(moving.origin)
    assert cancelled == ReplicaAssignment((0, 1, 2))


def test_raising_and_lowering_the_replication_factor() -> None:
    raised = ReplicaAssignment((1,)).reassign_to([1, 0, 2])
    assert raised.adding == (0, 2) and raised.removing == ()
    lowered = ReplicaAssignment((1, 0, 2)).reassign_to([2])
    assert lowered.adding == () and lowered.removing == (1, 0)


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ([], "Empty replica list"),
        ([1, 1], "Duplicate replica ids"),
        ([1, -2], "Invalid broker id"),
        ([1, 7], "brokers that are not alive"),
    ],
)
def test_invalid_targets(target: list[int], words: str) -> None:
    result = validate_target(ReplicaAssignment((0, 1)), target, live={0, 1, 2})
    assert result is not None
    assert result.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert words in (result.message or "")


def test_a_dead_original_replica_may_stay() -> None:
    assert validate_target(ReplicaAssignment((0, 5)), [5, 1], live={0, 1}) is None


def plan(*entries: dict[str, object]) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_the_reassignment_document_round_trips() -> None:
    wanted = {TopicPartition("a", 1): [2, 0], TopicPartition("a", 0): [1]}
    text = format_reassignment(wanted)
    assert json.loads(text)["partitions"][0] == {
        "topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["any"],
    }  # fmt: skip
    assert parse_reassignment(text) == wanted


def test_log_dirs_paths_are_replica_moves() -> None:
    text = plan(
        {"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "/d2"]},
        {"topic": "a", "partition": 1, "replicas": [2, 0], "log_dirs": ["/d1", "any"]},
        {"topic": "b", "partition": 0, "replicas": [0]},
    )
    assert parse_reassignment(text)[TopicPartition("a", 1)] == [2, 0]
    moves = parse_replica_log_dirs(text)
    assert moves == {ReplicaLogDir("a", 0, 2): "/d2", ReplicaLogDir("a", 1, 2): "/d1"}
    assert [str(r) for r in moves] == ["a-0-2", "a-1-2"]  # Kafka's TopicPartitionReplica


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"version": 2, "partitions": []}', "unsupported version"),
        ("{}", 'needs a "partitions" list'),
        (plan(), "cannot be empty"),
        (plan({"topic": "a", "partition": 0}), '"replicas" must be a list'),
        (plan({"topic": "a", "partition": -1, "replicas": [1]}), 'valid "partition"'),
        (plan({"partition": 0, "replicas": [1]}), 'no "topic"'),
        (plan({"topic": "a", "partition": 0, "replicas": []}), "empty replica list"),
        (
            plan({"topic": "a", "partition": 0, "replicas": [1, 2, 1]}),
            "may not contain duplicate entries: a-0 contains 1",
        ),
        (
            plan(
                {"topic": "a", "partition": 0, "replicas": [1]},
                {"topic": "a", "partition": 0, "replicas": [2]},
            ),
            "duplicate topic partitions: a-0",
        ),
        (
            plan({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}),
            "different from size of log dirs",
        ),
        (
            plan({"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["disk2"]}),
            'must be "any" or absolute paths',
        ),
    ],
)
def test_malformed_reassignments_are_refused(text: str, words: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_reassignment(text)
    assert words in str(info.value)


def test_topics_to_move() -> None:
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == [
        "a",
        "b",
    ]
    with pytest.raises(CommandError, match="duplicate entries: a"):
        parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    with pytest.raises(CommandError, match="non-empty"):
        parse_topics_to_move('{"topics":[]}')


def test_throttled_replicas_name_the_moving_partitions() -> None:
    current = {TopicPartition("a", 0): [0, 1], TopicPartition("a", 1): [1, 2]}
    proposed = {TopicPartition("a", 0): [2, 1], TopicPartition("a", 1): [1, 2]}
    assert throttled_replicas(current, proposed) == {"a": ("0:0,0:1", "0:2")}


# --- the controller's phases, on a stand-alone controller with an embedded store ---------


def controller_of(tmp_path: Path) -> Controller:
    """A stand-alone controller (broker 0) whose store also registers brokers 1 and 2,
    with topic `t`: partition 0 on [0, 1]."""
    controller = Controller(EmbeddedStore(tmp_path), LocalChannel(), BrokerInfo(0, "h", 1))
    controller.start()
    for broker in (1, 2):
        controller.store.create_json(
            f"/brokers/ids/{broker}",
            {"host": "h", "port": 10 + broker, "endpoints": [f"PLAINTEXT://h:{10 + broker}"]},
            ephemeral=True,
        )
    result = controller.create_topic(NewTopic("t", -1, -1, {0: [0, 1]}, {}))
    assert result.error == ErrorCode.NONE
    return controller


def znode(controller: Controller) -> dict[str, object]:
    value = controller.store.get_json("/brokers/topics/t")
    assert isinstance(value, dict)
    return value


def join_isr(controller: Controller, broker: int) -> None:
    state = controller.topics["t"].partitions[0]
    change = IsrChangeRequest(
        "t", controller.topics["t"].topic_id, 0, state.leader_epoch,
        (*state.isr, broker), state.version,
    )  # fmt: skip
    error, results = alter_partition(controller, state.leader, -1, [change])
    assert error == ErrorCode.NONE and results[0].error == ErrorCode.NONE, results


def test_a_move_adds_then_completes_when_the_target_is_in_sync(tmp_path: Path) -> None:
    controller = controller_of(tmp_path)
    tp = TopicPartition("t", 0)
    assert alter_reassignments(controller, {tp: [1, 2]}) == {tp: ReassignmentResult()}
    assert controller.topics["t"].partitions[0].replicas == (1, 2, 0)
    assert znode(controller)["adding_replicas"] == {"0": [2]}
    assert znode(controller)["removing_replicas"] == {"0": [0]}
    assert list_reassignments(controller, None) == {
        tp: ReplicaAssignment((1, 2, 0), adding=(2,), removing=(0,))
    }
    join_isr(controller, 2)
    state = controller.topics["t"].partitions[0]
    assert (state.leader, state.isr, state.replicas) == (1, (1, 2), (1, 2))
    assert znode(controller)["partitions"] == {"0": [1, 2]}
    assert znode(controller)["adding_replicas"] == {} == znode(controller)["removing_replicas"]
    assert list_reassignments(controller, None) == {}


def test_cancel_reverts_and_bad_requests_change_nothing(tmp_path: Path) -> None:
    controller = controller_of(tmp_path)
    tp = TopicPartition("t", 0)
    nothing = alter_reassignments(controller, {tp: None})[tp]
    assert nothing.error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert alter_reassignments(controller, {tp: [2, 1]})[tp].error == ErrorCode.NONE
    assert alter_reassignments(controller, {tp: None})[tp].error == ErrorCode.NONE
    # The original replicas in the full set's order, as Kafka's `originReplicas`.
    assert controller.topics["t"].partitions[0].replicas == (1, 0)
    assert znode(controller)["partitions"] == {"0": [1, 0]}
    assert znode(controller)["adding_replicas"] == {}
    assert 0 in controller.topics["t"].partitions[0].isr
    before = znode(controller)
    controller.store.create("/admin/delete_topics/t", b"")
    deleting = alter_reassignments(controller, {tp: [1, 2]})[tp]
    assert deleting.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "being deleted" in (deleting.message or "")
    unknown = alter_reassignments(controller, {TopicPartition("t", 3): [1]})
    assert unknown[TopicPartition("t", 3)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert znode(controller) == before
