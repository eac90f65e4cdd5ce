"""The metadata store: a tree of paths holding bytes, with versions for compare-and-set,
ephemeral and sequential nodes, one-shot data and child watches, atomic multi-operations and
session events: the ZooKeeper operations the controller and the brokers use.

Two implementations: `EmbeddedStore` (here) keeps the tree in memory and persists the
persistent nodes atomically to one file under the first log dir, so a stand-alone broker needs
no ZooKeeper; `ZooKeeperStore` (controller/zookeeper_store.py) talks to a ZooKeeper ensemble.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import json
import os
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

DataWatch = Callable[[str], None]
"""One-shot: called with the watched path on its next create, set or delete."""

ChildWatch = Callable[[str], None]
"""One-shot: called with the parent path when its children change (or it is deleted)."""


class SessionEvent(enum.Enum):
    CONNECTED = "connected"  # (re)connected; after EXPIRED this is a new session
    SUSPENDED = "suspended"  # connection lost; the session (ephemerals, watches) may live on
    EXPIRED = "expired"  # session gone: its ephemeral nodes and watches are gone


SessionListener = Callable[[SessionEvent], None]


@dataclass(frozen=True, slots=True)
class NodeStat:
    version: int  # data version (compare-and-set; a partition state's "partition epoch")
    czxid: int  # creation transaction id; /brokers/ids/<id>'s czxid is the broker epoch
    ephemeral_owner: int  # owning session id, 0 for persistent nodes


@dataclass(frozen=True, slots=True)
class CheckVersion:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Create:
    """Create inside `multi()`: the parent must exist (no parents are made)."""

    path: str
    data: bytes
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


Op = CheckVersion | Create | SetData | Delete


class NodeExists(Exception):
    """The path being created already exists."""


class NotEmpty(NodeExists):
    """A non-recursive delete of a node that has children."""


class NoNode(Exception):
    """The path does not exist."""


class BadVersion(Exception):
    """A compare-and-set found another version than expected."""


class StoreUnavailable(Exception):
    """The store cannot be reached (ZooKeeper down, connection lost past the timeout)."""


class MetadataStore(ABC):
    """Operations the controller and brokers need from the metadata store.

    Watches are one-shot: a watch fires once, with its path, and must be set again by the
    next read. Registering the same callable twice on one path fires it once.
    """

    @abstractmethod
    def create(
        self,
        path: str,
        data: bytes,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        """Create `path`; returns the created path (with ZooKeeper's 10-digit suffix when
        sequential). Raises NodeExists, or NoNode when the parent is missing and
        `make_parents` is false."""

    @abstractmethod
    def get(self, path: str, watch: DataWatch | None = None) -> tuple[bytes, int]:
        """(data, version); raises NoNode (and then sets no watch)."""

    @abstractmethod
    def stat(self, path: str) -> NodeStat:
        """Raises NoNode."""

    @abstractmethod
    def exists(self, path: str, watch: DataWatch | None = None) -> bool:
        """The watch is set even when the path is absent (it then fires on creation)."""

    @abstractmethod
    def children(self, path: str, watch: ChildWatch | None = None) -> list[str]:
        """Sorted child names; raises NoNode (and then sets no watch)."""

    @abstractmethod
    def set(self, path: str, data: bytes, expected_version: int = -1) -> int:
        """Replace the data; -1 skips the version check. Returns the new version."""

    @abstractmethod
    def delete(self, path: str, *, recursive: bool = False, expected_version: int = -1) -> None:
        """Raises NoNode, BadVersion, or NotEmpty when not recursive and children exist."""

    @abstractmethod
    def multi(self, ops: Sequence[Op]) -> None:
        """Apply every op or none; raises the first failing op's BadVersion/NoNode/NodeExists."""

    def multi_each(self, transactions: Sequence[Sequence[Op]]) -> list[Exception | None]:
        """Several independent `multi`s, each all or nothing: per transaction None, or
        the BadVersion/NoNode/NodeExists that refused it. A store may send them all
        before waiting for the first answer (one round trip instead of one each)."""
        outcomes: list[Exception | None] = []
        for ops in transactions:
            try:
                self.multi(ops)
            except (BadVersion, NoNode, NodeExists) as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return outcomes

    @abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """End the session: its ephemeral nodes vanish."""

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group several writes; a store may make them durable together at the end."""
        yield

    def get_json(self, path: str) -> object:
        return json.loads(self.get(path)[0])

    def set_json(self, path: str, value: object, expected_version: int = -1) -> int:
        return self.set(path, json.dumps(value).encode(), expected_version)

    def create_json(self, path: str, value: object, *, ephemeral: bool = False) -> str:
        return self.create(path, json.dumps(value).encode(), ephemeral=ephemeral)


def parent_of(path: str) -> str:
    parent = path.rsplit("/", 1)[0]
    return parent or "/"


class _Node(NamedTuple):
    data: bytes
    version: int
    czxid: int
    cversion: int  # child changes: a sequential child's suffix (as ZooKeeper)
    ephemeral_owner: int


# (callable, path) pairs to call once a mutation is complete
_Fired = list[tuple[Callable[[str], None], str]]


class EmbeddedStore(MetadataStore):
    """In-process metadata store persisted to `<dir>/logbus-metadata.json`.

    Owned by one broker's event loop thread; not safe to share between threads. Watches fire
    synchronously inside the mutating call, once the change is complete. Ephemeral nodes live
    as long as the store is open (its one session never expires) and are never written to
    disk; the creation counter (czxid) is, so it keeps growing across restarts.
    """

    FILE_NAME = "logbus-metadata.json"
    _ZXID_KEY = "zxid"  # not a path: the file's creation counter

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._path = Path(directory) / self.FILE_NAME
        self._session_id = secrets.randbits(63) | 1
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0)}
        self._zxid = 0
        self._data_watches: dict[str, dict[DataWatch, None]] = {}
        self._child_watches: dict[str, dict[ChildWatch, None]] = {}
        self._listeners: list[SessionListener] = []
        self._batch_depth = 0
        self._dirty = False
        if self._path.exists():
            self._load(json.loads(self._path.read_text()))

    def _load(self, stored: dict[str, object]) -> None:
        counter = stored.get(self._ZXID_KEY, 0)
        assert isinstance(counter, int)
        self._zxid = counter
        fresh: list[tuple[str, bytes, int]] = []
        for path, entry in stored.items():
            if not path.startswith("/"):
                continue
            assert isinstance(entry, list)
            data, version = base64.b64decode(entry[0]), int(entry[1])
            if len(entry) >= 4:  # a file written before czxids were kept has no counters
                self._nodes[path] = _Node(data, version, int(entry[2]), int(entry[3]), 0)
                self._zxid = max(self._zxid, int(entry[2]))
            else:
                fresh.append((path, data, version))
        for path, data, version in sorted(fresh):
            self._zxid += 1
            self._nodes[path] = _Node(data, version, self._zxid, 0, 0)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Write the file once, when the outermost batch ends (not on each change)."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0 and self._dirty:
                self._persist()

    def _persist(self) -> None:
        if self._batch_depth:
            self._dirty = True
            return
        self._dirty = False
        stored: dict[str, object] = {
            path: [base64.b64encode(n.data).decode(), n.version, n.czxid, n.cversion]
            for path, n in self._nodes.items()
            if not n.ephemeral_owner
        }
        stored[self._ZXID_KEY] = self._zxid
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(stored, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # Mutations without side effects beyond the tree: they append the watches to fire.

    def _node(self, path: str) -> _Node:
        try:
            return self._nodes[path]
        except KeyError:
            raise NoNode(path) from None

    def _take_watches(self, fired: _Fired, path: str, *, data: bool, child: bool) -> None:
        if data:
            fired.extend((w, path) for w in self._data_watches.pop(path, {}))
        if child:
            fired.extend((w, path) for w in self._child_watches.pop(path, {}))

    def _bump_parent(self, path: str, fired: _Fired) -> int:
        """Count a child change of `path`'s parent; returns the count before it."""
        parent = parent_of(path)
        node = self._node(parent)
        self._nodes[parent] = node._replace(cversion=node.cversion + 1)
        self._take_watches(fired, parent, data=False, child=True)
        return node.cversion

    def _create(
        self, path: str, data: bytes, ephemeral: bool, sequential: bool, fired: _Fired
    ) -> str:
        parent = parent_of(path)
        parent_node = self._node(parent)
        if parent_node.ephemeral_owner:
            raise NoNode(f"{parent} is ephemeral: it can have no children")
        if sequential:
            path = f"{path}{parent_node.cversion:010d}"
        if path in self._nodes:
            raise NodeExists(path)
        self._bump_parent(path, fired)
        self._zxid += 1
        owner = self._session_id if ephemeral else 0
        self._nodes[path] = _Node(data, 0, self._zxid, 0, owner)
        self._take_watches(fired, path, data=True, child=False)
        return path

    def _set(self, path: str, data: bytes, expected_version: int, fired: _Fired) -> int:
        node = self._node(path)
        if expected_version not in (-1, node.version):
            raise BadVersion(path)
        self._nodes[path] = node._replace(data=data, version=node.version + 1)
        self._take_watches(fired, path, data=True, child=False)
        return node.version + 1

    def _delete(self, path: str, expected_version: int, fired: _Fired) -> None:
        node = self._node(path)
        if expected_version not in (-1, node.version):
            raise BadVersion(path)
        if path == "/":
            raise BadVersion("the root cannot be deleted")
        if any(True for _ in self._child_paths(path)):
            raise NotEmpty(f"{path} has children")
        del self._nodes[path]
        self._take_watches(fired, path, data=True, child=True)
        self._bump_parent(path, fired)

    def _child_paths(self, path: str) -> Iterator[str]:
        prefix = path.rstrip("/") + "/"
        return (p for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def _commit(self, fired: _Fired, *, persist: bool = True) -> None:
        if persist:
            self._persist()
        for watch, path in fired:
            watch(path)

    def create(
        self,
        path: str,
        data: bytes,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        fired: _Fired = []
        parent = parent_of(path)
        if parent not in self._nodes and make_parents:
            self.create(parent, b"", make_parents=True)
        created = self._create(path, data, ephemeral, sequential, fired)
        # an ephemeral node is not stored, but the creation counter and its parent's are
        self._commit(fired)
        return created

    def get(self, path: str, watch: DataWatch | None = None) -> tuple[bytes, int]:
        node = self._node(path)
        if watch is not None:
            self._data_watches.setdefault(path, {})[watch] = None
        return node.data, node.version

    def stat(self, path: str) -> NodeStat:
        node = self._node(path)
        return NodeStat(node.version, node.czxid, node.ephemeral_owner)

    def exists(self, path: str, watch: DataWatch | None = None) -> bool:
        if watch is not None:
            self._data_watches.setdefault(path, {})[watch] = None
        return path in self._nodes

    def children(self, path: str, watch: ChildWatch | None = None) -> list[str]:
        self._node(path)
        prefix_len = len(path.rstrip("/")) + 1
        names = sorted(p[prefix_len:] for p in self._child_paths(path))
        if watch is not None:
            self._child_watches.setdefault(path, {})[watch] = None
        return names

    def set(self, path: str, data: bytes, expected_version: int = -1) -> int:
        fired: _Fired = []
        version = self._set(path, data, expected_version, fired)
        self._commit(fired, persist=not self._nodes[path].ephemeral_owner)
        return version

    def delete(self, path: str, *, recursive: bool = False, expected_version: int = -1) -> None:
        fired: _Fired = []
        node = self._node(path)
        if expected_version not in (-1, node.version):
            raise BadVersion(path)
        if recursive:
            prefix = path.rstrip("/") + "/"
            for p in sorted((p for p in self._nodes if p.startswith(prefix)), reverse=True):
                del self._nodes[p]  # deepest first; their counters go with them
                self._take_watches(fired, p, data=True, child=True)
        self._delete(path, expected_version, fired)
        self._commit(fired)

    def multi(self, ops: Sequence[Op]) -> None:
        saved_nodes, saved_zxid = dict(self._nodes), self._zxid
        saved_data = {p: dict(w) for p, w in self._data_watches.items()}
        saved_child = {p: dict(w) for p, w in self._child_watches.items()}
        fired: _Fired = []
        try:
            for op in ops:
                if isinstance(op, CheckVersion):
                    if self._node(op.path).version != op.version:
                        raise BadVersion(op.path)
                elif isinstance(op, Create):
                    self._create(op.path, op.data, op.ephemeral, False, fired)
                elif isinstance(op, SetData):
                    self._set(op.path, op.data, op.version, fired)
                else:
                    self._delete(op.path, op.version, fired)
        except BaseException:
            self._nodes, self._zxid = saved_nodes, saved_zxid
            self._data_watches, self._child_watches = saved_data, saved_child
            raise
        self._commit(fired)

    def add_session_listener(self, listener: SessionListener) -> None:
        """Kept, never called: the embedded store's session neither drops nor expires."""
        self._listeners.append(listener)

    def close(self) -> None:
        fired: _Fired = []
        for path in sorted(p for p, n in self._nodes.items() if n.ephemeral_owner):
            self._delete(path, -1, fired)
        self._data_watches.clear()
        self._child_watches.clear()
        self._listeners.clear()
        # no watch fires after close, and nothing is written: the parents' child counters
        # on disk stay those of the last persistent change
