"""The embedded metadata store, replica assignment and topic name rules (no sockets)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from logbus.controller.controller import ControllerError, assign_replicas
from logbus.controller.metadata_store import BadVersion, EmbeddedStore, NodeExists, NoNode
from logbus.controller.topic_validation import collision_key, topic_name_error


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
