"""Partition reassignment as values: the replica sets of a move (Kafka's
`ReplicaAssignment`), the controller's checks of a target, and the JSON documents and
throttle lists of `logbus reassign-partitions`."""

from __future__ import annotations

import json

import pytest

from logbus.cli.common import CommandError
from logbus.cli.reassignment_json import (
    format_reassignment,
    parse_reassignment,
    parse_topics_to_move,
)
from logbus.cli.reassignment_throttles import throttled_replicas
from logbus.controller.reassignment import ReplicaAssignment, validate_target
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
