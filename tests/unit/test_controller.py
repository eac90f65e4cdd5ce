"""The embedded metadata store, replica assignment and topic name rules (no sockets)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from logbus.controller.channel import LocalChannel
from logbus.controller.cluster_metadata import BrokerInfo, PartitionState
from logbus.controller.controller import (
    EXCESSIVE_PARTITIONS_MESSAGE,
    MAX_PARTITIONS_PER_REQUEST,
    Controller,
    ControllerError,
    NewTopic,
    PartitionCreation,
    TopicResult,
    assign_replicas,
)
from logbus.controller.metadata_store import BadVersion, EmbeddedStore, NodeExists, NoNode
from logbus.controller.topic_validation import collision_key, topic_name_error
from logbus.protocol import ErrorCode


def test_store_compare_and_set_and_persistence(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    store.create_json("/brokers/topics/t", {"partitions": {"0": [1]}})
    data, version = store.get("/brokers/topics/t")
    assert json.loads(data) == {"partitions": {"0": [1]}} and version == 0
    assert store.set("/brokers/topics/t", b"v1", expected_version=0) == 1
    with pytest.raises(BadVersion):
        store.set("/brokers/topics/t", b"v2", expected_version=0)
    with pytest.raises(NodeExists):
        store.create("/brokers/topics/t", b"")
    store.create("/brokers/ids/0", b"me", ephemeral=True)
    assert store.children("/brokers") == ["ids", "topics"]
    store.close()

    reopened = EmbeddedStore(tmp_path)
    assert reopened.get("/brokers/topics/t") == (b"v1", 1)
    assert not reopened.exists("/brokers/ids/0")  # ephemeral nodes die with the store


def test_store_delete_and_child_watches(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    fired: list[str] = []
    store.create("/admin", b"")
    assert store.children("/admin", watch=fired.append) == []
    store.create("/admin/delete_topics/x", b"")
    assert fired == ["/admin"]
    with pytest.raises(NodeExists):
        store.delete("/admin")
    store.delete("/admin", recursive=True)
    with pytest.raises(NoNode):
        store.get("/admin/delete_topics/x")


def test_store_batch_writes_the_file_once_at_the_end(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    path = tmp_path / EmbeddedStore.FILE_NAME
    with store.batch():
        store.create("/a", b"1")
        with store.batch():
            store.create("/b", b"2")
        assert not path.exists()
    assert set(json.loads(path.read_text())) >= {"/a", "/b"}


def test_assignment_spreads_leaders_and_replicas() -> None:
    brokers = [1, 2, 3, 4]
    assignment = assign_replicas(brokers, 8, 3, start_index=0)
    assert sorted(assignment) == list(range(8))
    assert all(len(set(r)) == 3 and set(r) <= set(brokers) for r in assignment.values())
    leaders = Counter(r[0] for r in assignment.values())
    assert set(leaders.values()) == {2}  # every broker leads equally often
    followers = Counter(b for r in assignment.values() for b in r[1:])
    assert max(followers.values()) - min(followers.values()) <= 1
    assert assign_replicas([7], 3, 1) == {0: [7], 1: [7], 2: [7]}
    with pytest.raises(ControllerError):
        assign_replicas([1, 2], 1, 3)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("orders", True), ("a.b_c-D9", True), ("", False), (".", False), ("..", False),
     ("x" * 249, True), ("x" * 250, False), ("bad/name", False), ("spa ce", False),
     ("ünï", False)],
)
def test_topic_names(name: str, ok: bool) -> None:
    assert (topic_name_error(name) is None) is ok


def test_topic_collisions() -> None:
    assert collision_key("a.b") == collision_key("a_b")


def started_controller(tmp_path: Path, **options: int) -> Controller:
    """A controller over an embedded store, alone in its cluster (broker 0)."""
    controller = Controller(
        EmbeddedStore(tmp_path), LocalChannel(), BrokerInfo(0, "localhost", 9092), **options
    )
    controller.start()
    return controller


def test_validation_counts_partitions_without_building_them(tmp_path: Path) -> None:
    controller = started_controller(tmp_path)
    huge = controller.validate_new_topic(NewTopic("t", 2**31 - 1, 1, {}, {}))
    assert (huge.error, huge.message) == (ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS_MESSAGE)
    edge = controller.validate_new_topic(NewTopic("t", MAX_PARTITIONS_PER_REQUEST, 1, {}, {}))
    assert (edge.error, edge.num_partitions) == (ErrorCode.NONE, MAX_PARTITIONS_PER_REQUEST)
    too_many_copies = controller.validate_new_topic(NewTopic("t", 2**31 - 1, 2, {}, {}))
    assert too_many_copies.error == ErrorCode.POLICY_VIOLATION
    assert controller.validate_new_topic(NewTopic("t", 10, 2, {}, {})).error == (
        ErrorCode.INVALID_REPLICATION_FACTOR
    )
    assert controller.topics == {}


def test_new_partitions_are_started_a_chunk_at_a_time(tmp_path: Path) -> None:
    controller = started_controller(tmp_path)
    creation = controller.register_topic(NewTopic("t", 1200, 1, {}, {}))
    assert isinstance(creation, PartitionCreation)
    chunks = list(creation.chunks())
    assert [len(chunk) for chunk in chunks] == [500, 500, 200]
    assert {state.leader for state in controller.topics["t"].partitions.values()} == {-1}
    for chunk in chunks:
        assert controller.start_partitions(creation, chunk)
    assert controller.finish_creation(creation).error == ErrorCode.NONE
    assert {state.leader for state in controller.topics["t"].partitions.values()} == {0}

    # A topic deleted between two chunks is not started any further.
    doomed = controller.register_topic(NewTopic("doomed", 3, 1, {}, {}))
    assert isinstance(doomed, PartitionCreation)
    controller.delete_topic("doomed")
    assert not controller.start_partitions(doomed, doomed.new_partitions)
    assert controller.finish_creation(doomed).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_max_broker_partitions_and_create_partitions_limits(tmp_path: Path) -> None:
    controller = started_controller(tmp_path, max_broker_partitions=10)
    assert controller.create_topic(NewTopic("a", 8, 1, {}, {})).error == ErrorCode.NONE
    refused = controller.validate_new_topic(NewTopic("b", 3, 1, {}, {}))
    assert refused.error == ErrorCode.POLICY_VIOLATION
    assert refused.message is not None and "max.broker.partitions (10)" in refused.message
    for validate_only in (True, False):
        over = controller.register_partitions("a", 11, None, validate_only)
        assert isinstance(over, TopicResult) and over.error == ErrorCode.POLICY_VIOLATION
        huge = controller.register_partitions("a", 2**31 - 1, None, validate_only)
        assert isinstance(huge, TopicResult)
        assert (huge.error, huge.message) == (
            ErrorCode.POLICY_VIOLATION,
            EXCESSIVE_PARTITIONS_MESSAGE,
        )
    checked = controller.register_partitions("a", 10, None, True)
    assert isinstance(checked, TopicResult) and checked.error == ErrorCode.NONE
    assert len(controller.topics["a"].partitions) == 8  # validate_only built nothing


def test_elections_are_counted_for_leader_changes_and_unclean_ones_apart(tmp_path: Path) -> None:
    controller = started_controller(tmp_path)
    led = PartitionState(1, 4, (1, 2), (1, 2, 3))
    controller.count_election(PartitionState(-1, -1, (), (1, 2, 3)), led)  # creation
    controller.count_election(led, replace(led, leader_epoch=5))  # same leader
    assert (controller.leader_elections, controller.unclean_leader_elections) == (0, 0)
    controller.count_election(led, PartitionState(2, 5, (2,), (1, 2, 3)))  # from the ISR
    controller.count_election(led, PartitionState(3, 5, (3,), (1, 2, 3)))  # outside it
    controller.count_election(led, PartitionState(-1, 5, (), (1, 2, 3)))  # offline
    assert (controller.leader_elections, controller.unclean_leader_elections) == (2, 1)
    controller.shutdown()
