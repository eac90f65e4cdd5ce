"""The metadata store contract (controller/metadata_store.py), proved on both stores: the
embedded one and ZooKeeperStore on a real ZooKeeper server; then what only ZooKeeper has
(chroots, an unreachable server, lost connections and expired sessions)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_wire import wait_for
from logbus.controller.metadata_store import (
    BadVersion,
    CheckVersion,
    Create,
    Delete,
    EmbeddedStore,
    MetadataStore,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionEvent,
    SetData,
    StoreUnavailable,
)
from logbus.controller.zookeeper_store import ZooKeeperStore, split_connect
from zookeeper_server import ZooKeeperServer, expire_session

SESSION_MS = 4000
CONNECTION_MS = 15000

StoreFactory = Callable[[], MetadataStore]


@pytest.fixture(params=["embedded", "zookeeper"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens stores on one tree: the same directory (embedded; one open at a time) or the
    same ZooKeeper chroot (each a session of its own)."""
    stores: list[MetadataStore] = []
    if request.param == "zookeeper":
        connect = request.getfixturevalue("zk_connect")

        def make() -> MetadataStore:
            store = ZooKeeperStore(connect, SESSION_MS, CONNECTION_MS)
            stores.append(store)
            return store
    else:

        def make() -> MetadataStore:
            store = EmbeddedStore(tmp_path)
            stores.append(store)
            return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(open_store: StoreFactory) -> MetadataStore:
    return open_store()


class Fired:
    """Records the paths a watch fires with; `wait(n)` waits for n of them (ZooKeeper's
    watches arrive on kazoo's thread, the embedded store's at once)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.threads: set[str] = set()

    def __call__(self, path: str) -> None:
        self.threads.add(threading.current_thread().name)
        self.paths.append(path)

    def wait(self, count: int) -> list[str]:
        wait_for(lambda: len(self.paths) >= count)
        return self.paths


def barrier(store: MetadataStore, path: str) -> None:
    """Returns once every watch event of the changes made so far was delivered: events
    arrive in order, so one fired by a change made now comes after them."""
    marker = Fired()
    store.exists(path, watch=marker)
    store.create(path, b"")
    marker.wait(1)
    store.delete(path)


def test_create_get_set_delete_with_versions(store: MetadataStore) -> None:
    assert store.create("/brokers/topics/t", b"a") == "/brokers/topics/t"  # parents made
    assert store.get("/brokers/topics/t") == (b"a", 0)
    assert store.get("/brokers") == (b"", 0)
    with pytest.raises(NodeExists):
        store.create("/brokers/topics/t", b"b")
    with pytest.raises(NoNode):
        store.create("/missing/child", b"", make_parents=False)
    assert store.set("/brokers/topics/t", b"b", expected_version=0) == 1
    assert store.set("/brokers/topics/t", b"c") == 2
    with pytest.raises(BadVersion):
        store.set("/brokers/topics/t", b"d", expected_version=1)
    assert store.get("/brokers/topics/t") == (b"c", 2)
    assert store.stat("/brokers/topics/t").version == 2
    with pytest.raises(BadVersion):
        store.delete("/brokers/topics/t", expected_version=1)
    store.delete("/brokers/topics/t", expected_version=2)
    assert not store.exists("/brokers/topics/t")
    for call in (store.get, store.stat, store.children, store.delete):
        with pytest.raises(NoNode):
            call("/brokers/topics/t")
    with pytest.raises(NoNode):
        store.set("/brokers/topics/t", b"")
    store.create_json("/j", {"k": [1]})
    assert store.get_json("/j") == {"k": [1]}
    assert store.set_json("/j", {"k": 2}, 0) == 1


def test_children_and_recursive_delete(store: MetadataStore) -> None:
    for name in ("b", "a", "c/d/e"):
        store.create(f"/t/{name}", name.encode())
    assert store.children("/t") == ["a", "b", "c"]
    assert store.children("/t/c/d") == ["e"]
    with pytest.raises(NotEmpty):
        store.delete("/t")
    with pytest.raises(NodeExists):  # NotEmpty is a NodeExists, as it always was here
        store.delete("/t/c")
    with pytest.raises(BadVersion):
        store.delete("/t", recursive=True, expected_version=3)
    assert store.get("/t/c/d/e") == (b"c/d/e", 0)
    store.delete("/t", recursive=True, expected_version=0)
    assert not store.exists("/t") and not store.exists("/t/c/d/e")
    store.create("/t/a", b"again")  # the path can be made again
    assert store.children("/t") == ["a"]


def test_sequential_nodes_get_zookeepers_ten_digit_counter(store: MetadataStore) -> None:
    store.create("/config/changes", b"")
    first = store.create("/config/changes/config_change_", b"1", sequential=True)
    second = store.create("/config/changes/config_change_", b"2", sequential=True)
    assert first == "/config/changes/config_change_0000000000"
    assert second == "/config/changes/config_change_0000000001"
    store.delete(first)  # the counter counts child changes: it never goes back
    third = store.create("/config/changes/config_change_", b"3", sequential=True)
    assert int(third[-10:]) > 1
    eph = store.create("/config/changes/e-", b"", sequential=True, ephemeral=True)
    assert int(eph[-10:]) > int(third[-10:])
    assert store.children("/config/changes") == sorted(
        p.rsplit("/", 1)[1] for p in (second, third, eph)
    )


def test_multi_applies_every_op_or_none(store: MetadataStore) -> None:
    store.create("/controller_epoch", b"1")
    store.create("/p/state", b"s0")
    store.create("/p/old", b"")
    failing: list[tuple[list[Any], type[Exception]]] = [
        ([CheckVersion("/controller_epoch", 1)], BadVersion),
        (
            [CheckVersion("/controller_epoch", 0), Create("/p/new", b""), Create("/p/old", b"")],
            NodeExists,
        ),
        ([SetData("/p/state", b"s1", 0), Delete("/p/missing")], NoNode),
        ([Delete("/p/old"), SetData("/p/state", b"s1", 5)], BadVersion),
        ([Create("/nowhere/x", b"")], NoNode),  # no parents are made inside multi
    ]
    for ops, error in failing:
        with pytest.raises(error):
            store.multi(ops)
        assert store.get("/p/state") == (b"s0", 0)
        assert store.children("/p") == ["old", "state"]
        assert not store.exists("/nowhere")
    store.multi(
        [
            CheckVersion("/controller_epoch", 0),
            SetData("/p/state", b"s1", 0),
            Create("/p/new", b"n"),
            Create("/p/new/child", b"c"),  # sees the op before it
            Delete("/p/old", 0),
        ]
    )
    assert store.get("/p/state") == (b"s1", 1)
    assert store.children("/p") == ["new", "state"]
    assert store.get("/p/new/child") == (b"c", 0)
    store.multi([])


def test_multi_each_applies_each_transaction_or_names_what_refused_it(
    store: MetadataStore,
) -> None:
    """The controller's batched partition-state writes: every transaction stands alone,
    in order (a later one sees an earlier one's write), refusals are answered, not
    raised."""
    store.create("/controller_epoch", b"1")
    for p in range(4):
        store.create(f"/p/{p}", b"s0")
    outcomes = store.multi_each([
        [CheckVersion("/controller_epoch", 0), SetData("/p/0", b"s1", 0)],
        [CheckVersion("/controller_epoch", 0), SetData("/p/1", b"s1", 7)],  # stale version
        [CheckVersion("/controller_epoch", 3), SetData("/p/2", b"s1", 0)],  # stale epoch
        [CheckVersion("/controller_epoch", 0), SetData("/p/missing", b"s1", 0)],
        [SetData("/p/0", b"s2", 1)],  # after the first one's write
        [SetData("/p/3", b"s1", 0), Create("/p/3/x", b""), Create("/p/0", b"")],
    ])  # fmt: skip
    assert [type(o) for o in outcomes] == [
        type(None), BadVersion, BadVersion, NoNode, type(None), NodeExists
    ]
    assert [store.get(f"/p/{p}") for p in range(4)] == [
        (b"s2", 2), (b"s0", 0), (b"s0", 0), (b"s0", 0)
    ]
    assert store.children("/p/3") == []
    assert store.multi_each([]) == []
    assert store.multi_each([[], [SetData("/p/1", b"s3", 0)]]) == [None, None]
    assert store.get("/p/1") == (b"s3", 1)


def test_data_watches_fire_once(store: MetadataStore) -> None:
    store.create("/n", b"0")
    on_get, on_absent, twice = Fired(), Fired(), Fired()
    assert store.get("/n", watch=on_get) == (b"0", 0)
    store.get("/n", watch=twice)
    assert store.exists("/n", watch=twice)  # the same callable on the same path: once
    assert not store.exists("/later", watch=on_absent)  # set although absent
    store.set("/n", b"1")
    store.set("/n", b"2")  # no watch left
    store.create("/later", b"")
    store.delete("/later")
    barrier(store, "/barrier")
    assert on_get.paths == ["/n"] and twice.paths == ["/n"]
    assert on_absent.paths == ["/later"]

    on_delete = Fired()
    store.get("/n", watch=on_delete)
    store.delete("/n")
    assert on_delete.wait(1) == ["/n"]
    with pytest.raises(NoNode):
        store.get("/n", watch=on_delete)  # no watch set on a missing node
    store.create("/n", b"")
    store.set("/n", b"x")
    barrier(store, "/barrier")
    assert on_delete.paths == ["/n"]


def test_child_watches_fire_once(store: MetadataStore) -> None:
    store.create("/ids", b"")
    fired = Fired()
    assert store.children("/ids", watch=fired) == []
    store.create("/ids/1", b"")
    store.create("/ids/2", b"")
    store.set("/ids/1", b"x")  # data changes are not child changes
    barrier(store, "/barrier")
    assert fired.paths == ["/ids"]
    assert store.children("/ids", watch=fired) == ["1", "2"]
    store.set("/ids", b"data of the parent itself")
    store.delete("/ids/2")
    assert fired.wait(2) == ["/ids", "/ids"]
    store.children("/ids", watch=fired)
    store.delete("/ids", recursive=True)  # its children go, then itself: one firing
    barrier(store, "/barrier")
    assert fired.paths == ["/ids"] * 3
    with pytest.raises(NoNode):
        store.children("/none", watch=fired)


def test_watches_fire_after_a_multi_commits_and_not_after_it_fails(store: MetadataStore) -> None:
    store.create("/s", b"")
    data, child = Fired(), Fired()
    store.get("/s", watch=data)
    store.children("/s", watch=child)
    with pytest.raises(BadVersion):
        store.multi([SetData("/s", b"x"), Create("/s/c", b""), CheckVersion("/s", 9)])
    barrier(store, "/barrier")
    assert data.paths == [] and child.paths == []
    store.multi([SetData("/s", b"x"), Create("/s/c", b"")])
    assert data.wait(1) == ["/s"]
    assert child.wait(1) == ["/s"]


def test_ephemeral_nodes_vanish_when_the_store_closes(open_store: StoreFactory) -> None:
    first = open_store()
    first.create("/brokers/ids/1", b"me", ephemeral=True)
    first.create("/kept", b"")
    assert first.stat("/brokers/ids/1").ephemeral_owner != 0
    assert first.stat("/kept").ephemeral_owner == 0
    if isinstance(first, ZooKeeperStore):
        second = open_store()  # another session sees it, then sees it go
        assert second.get("/brokers/ids/1") == (b"me", 0)
        gone = Fired()
        assert second.exists("/brokers/ids/1", watch=gone)
        first.close()
        assert gone.wait(1) == ["/brokers/ids/1"]
    else:
        first.close()
        second = open_store()
    assert not second.exists("/brokers/ids/1")
    assert second.children("/brokers/ids") == []
    assert second.exists("/kept")


def test_czxid_grows_with_every_creation(open_store: StoreFactory) -> None:
    store = open_store()
    store.create("/a", b"")
    store.create("/a/b", b"", ephemeral=True)
    store.set("/a", b"changed")  # czxid is the creation's, not the last change's
    czxids = [store.stat("/a").czxid, store.stat("/a/b").czxid]
    store.delete("/a/b")
    store.create("/a/b", b"", ephemeral=True)  # a broker registering again: a new epoch
    czxids.append(store.stat("/a/b").czxid)
    assert czxids == sorted(set(czxids))
    store.close()
    store = open_store()  # across a restart (embedded) or a new session (ZooKeeper)
    assert store.stat("/a").czxid == czxids[0]
    store.create("/a/b", b"", ephemeral=True)
    assert store.stat("/a/b").czxid > czxids[-1]


# The embedded store's file


def test_embedded_store_keeps_its_counters_across_restarts(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    store.create("/q/n-", b"", sequential=True)
    store.create("/eph", b"", ephemeral=True)
    eph_czxid = store.stat("/eph").czxid
    store.close()
    store = EmbeddedStore(tmp_path)
    assert store.create("/q/n-", b"", sequential=True) == "/q/n-0000000001"
    store.create("/eph", b"", ephemeral=True)
    assert store.stat("/eph").czxid > eph_czxid
    store.close()


def test_embedded_store_reads_a_file_without_counters(tmp_path: Path) -> None:
    """A data dir written before czxids were kept: {path: [base64 data, version]}."""
    (tmp_path / EmbeddedStore.FILE_NAME).write_text(
        json.dumps({"/": ["", 0], "/cluster": ["", 0], "/cluster/id": ["eHl6", 3]})
    )
    store = EmbeddedStore(tmp_path)
    assert store.get("/cluster/id") == (b"xyz", 3)
    old = store.stat("/cluster/id").czxid
    store.create("/brokers/ids/0", b"", ephemeral=True)
    assert store.stat("/brokers/ids/0").czxid > old > 0
    store.close()


def test_embedded_store_keeps_listeners_and_never_calls_them(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    events: list[SessionEvent] = []
    store.add_session_listener(events.append)
    store.create("/x", b"", ephemeral=True)
    store.close()
    assert events == []


# ZooKeeper only


def zk_store(
    connect: str, session_ms: int = SESSION_MS, connection_ms: int = CONNECTION_MS
) -> ZooKeeperStore:
    return ZooKeeperStore(connect, session_ms, connection_ms)


def opened_patiently(connect: str, session_ms: int, connection_ms: int) -> ZooKeeperStore:
    """A store with a short `connection_ms`, for the calls a test makes while the server is
    gone. A server just started may take longer than that to open the first session on a
    loaded machine, so the store is asked for again until one opens."""
    made: list[ZooKeeperStore] = []

    def opened() -> bool:
        try:
            made.append(zk_store(connect, session_ms=session_ms, connection_ms=connection_ms))
        except StoreUnavailable:
            return False
        return True

    wait_for(opened, 30, what="a session")
    return made[0]


def test_split_connect() -> None:
    assert split_connect("a:1,b:2") == ("a:1,b:2", "")
    assert split_connect("a:1,b:2/") == ("a:1,b:2", "")
    assert split_connect("a:1/kafka//one/") == ("a:1", "/kafka/one")
    with pytest.raises(ValueError, match="names no host"):
        split_connect("/chroot")


def test_a_chroot_is_created_and_isolates(zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    root = zk_store(zookeeper.connect)
    one = zk_store(f"{zk_connect}/one")
    two = zk_store(f"{zk_connect}/two")
    try:
        one.create("/brokers/ids/1", b"one")
        two.create("/brokers/ids/2", b"two")
        assert one.children("/brokers/ids") == ["1"]
        assert two.children("/brokers/ids") == ["2"]
        chroot = split_connect(zk_connect)[1]
        assert root.children(chroot) == ["one", "two"]
        assert root.get(f"{chroot}/one/brokers/ids/1") == (b"one", 0)
        # paths a watch or a sequential create gives back are inside the chroot
        fired = Fired()
        one.children("/brokers/ids", watch=fired)
        root.create(f"{chroot}/one/brokers/ids/3", b"")
        assert fired.wait(1) == ["/brokers/ids"]
        assert one.create("/seq/s-", b"", sequential=True) == "/seq/s-0000000000"
        one.multi([Create("/m", b""), CheckVersion("/m", 0)])
        assert root.exists(f"{chroot}/one/m")
    finally:
        for store in (root, one, two):
            store.close()


def test_an_unreachable_zookeeper_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        connect = f"127.0.0.1:{s.getsockname()[1]}/kafka"
        with pytest.raises(StoreUnavailable, match=f"ZooKeeper at {connect} within 300 ms"):
            zk_store(connect, session_ms=2000, connection_ms=300)


def test_calls_fail_while_the_connection_is_lost_and_work_again_after(
    zookeeper_factory: Any,
) -> None:
    server: ZooKeeperServer = zookeeper_factory()
    store = opened_patiently(f"{server.connect}/c", session_ms=20000, connection_ms=1000)
    observer = zk_store(f"{server.connect}/c")
    events: list[SessionEvent] = []
    store.add_session_listener(events.append)
    try:
        store.create("/brokers/ids/1", b"", ephemeral=True)
        owner = store.stat("/brokers/ids/1").ephemeral_owner
        fired = Fired()
        store.create("/watched", b"")
        store.get("/watched", watch=fired)
        server.stop()
        wait_for(lambda: SessionEvent.SUSPENDED in events)
        with pytest.raises(StoreUnavailable, match=f"ZooKeeper at {server.connect}/c"):
            store.get("/watched")
        server.start()
        wait_for(lambda: events[-1] is SessionEvent.CONNECTED, timeout=30)
        assert events == [SessionEvent.SUSPENDED, SessionEvent.CONNECTED]
        # the same session: its ephemeral node lived on
        assert store.stat("/brokers/ids/1").ephemeral_owner == owner
        # the watch the lost connection dropped fires once it is back
        assert fired.wait(1) == ["/watched"]
        observer.set("/watched", b"x")
        barrier(observer, "/barrier")
        assert fired.paths == ["/watched"]
    finally:
        store.close()
        observer.close()


def test_a_call_to_a_paused_server_times_out_and_the_session_lives_on(
    zookeeper_factory: Any,
) -> None:
    server: ZooKeeperServer = zookeeper_factory()
    store = opened_patiently(server.connect, session_ms=30000, connection_ms=500)
    try:
        store.create("/e", b"", ephemeral=True)
        server.pause()  # SIGSTOP: the connection stays open, nothing answers
        with pytest.raises(StoreUnavailable, match=f"ZooKeeper at {server.connect} "):
            store.set("/e", b"late")
        server.resume()
        # the write may have been applied after all (as after ConnectionLoss); the session
        # and its ephemeral node are still there
        def written() -> bool:
            try:
                return store.get("/e")[0] == b"late"
            except StoreUnavailable:  # the resumed server is still catching up
                return False

        wait_for(written, what="the late write")
        assert store.stat("/e").ephemeral_owner == store.session_id
    finally:
        store.close()


def test_an_expired_session_is_reported_and_a_new_one_follows(
    zookeeper: ZooKeeperServer, zk_connect: str
) -> None:
    store = zk_store(zk_connect, session_ms=2000)
    observer = zk_store(zk_connect)
    events: list[tuple[SessionEvent, str]] = []
    store.add_session_listener(lambda e: events.append((e, threading.current_thread().name)))
    try:
        store.create("/brokers/ids/1", b"", ephemeral=True)
        old_session = store.session_id
        ids_watch = Fired()
        store.children("/brokers/ids", watch=ids_watch)
        expire_session(zookeeper.connect, store.session)
        wait_for(
            lambda: (
                [e for e, _ in events if e is not SessionEvent.SUSPENDED]
                == [SessionEvent.EXPIRED, SessionEvent.CONNECTED]
            ),
            timeout=30,
        )
        assert not observer.exists("/brokers/ids/1")  # the session's ephemerals are gone
        assert store.session_id not in (0, old_session)
        # watches are not lost with the session: they fire once it is new
        assert ids_watch.wait(1) == ["/brokers/ids"]
        store.create("/brokers/ids/1", b"", ephemeral=True)  # the owner registers again
        assert observer.stat("/brokers/ids/1").ephemeral_owner == store.session_id
        # everything arrived on kazoo's thread, never on the caller's
        threads = {name for _, name in events} | ids_watch.threads
        assert threading.current_thread().name not in threads
    finally:
        store.close()
        observer.close()


def test_watches_and_session_events_run_on_kazoos_thread(zk_connect: str) -> None:
    store = zk_store(zk_connect)
    try:
        fired = Fired()
        store.exists("/x", watch=fired)
        store.create("/x", b"")
        fired.wait(1)
        assert fired.threads and threading.main_thread().name not in fired.threads
    finally:
        store.close()


def test_calls_after_close_are_unavailable(zk_connect: str) -> None:
    store = zk_store(zk_connect)
    store.close()
    with pytest.raises(StoreUnavailable):
        store.get("/")
