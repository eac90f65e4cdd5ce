"""The metadata store: a tree of paths holding bytes, with versions for compare-and-set,
ephemeral nodes and child watches, mirroring the ZooKeeper operations the controller uses.

`EmbeddedStore` keeps the tree in memory and persists the persistent nodes atomically to
one file under the first log dir, so a stand-alone broker needs no ZooKeeper.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path

ChildWatch = Callable[[str], None]


class NodeExists(Exception):
    """The path being created already exists."""


class NoNode(Exception):
    """The path does not exist."""


class BadVersion(Exception):
    """A compare-and-set found another version than expected."""


class MetadataStore(ABC):
    """Operations the controller and brokers need from the metadata store."""

    @abstractmethod
    def create(
        self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True
    ) -> None: ...

    @abstractmethod
    def get(self, path: str) -> tuple[bytes, int]:
        """(data, version); raises NoNode."""

    @abstractmethod
    def set(self, path: str, data: bytes, expected_version: int = -1) -> int:
        """Replace the data; -1 skips the version check. Returns the new version."""

    @abstractmethod
    def delete(self, path: str, *, recursive: bool = False) -> None: ...

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def children(self, path: str, watch: ChildWatch | None = None) -> list[str]: ...

    @abstractmethod
    def close(self) -> None: ...

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group several writes; a store may make them durable together at the end."""
        yield

    def get_json(self, path: str) -> object:
        return json.loads(self.get(path)[0])

    def set_json(self, path: str, value: object, expected_version: int = -1) -> int:
        return self.set(path, json.dumps(value).encode(), expected_version)

    def create_json(self, path: str, value: object, *, ephemeral: bool = False) -> None:
        self.create(path, json.dumps(value).encode(), ephemeral=ephemeral)


class EmbeddedStore(MetadataStore):
    """In-process metadata store persisted to `<dir>/logbus-metadata.json`.

    Owned by one broker's event loop thread; not safe to share between threads. Ephemeral
    nodes live as long as the store is open and are never written to disk.
    """

    FILE_NAME = "logbus-metadata.json"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._path = Path(directory) / self.FILE_NAME
        self._nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self._ephemeral: set[str] = set()
        self._watches: dict[str, list[ChildWatch]] = {}
        self._batch_depth = 0
        self._dirty = False
        if self._path.exists():
            stored = json.loads(self._path.read_text())
            for path, (data, version) in stored.items():
                self._nodes[path] = (base64.b64decode(data), version)

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
        stored = {
            path: (base64.b64encode(data).decode(), version)
            for path, (data, version) in self._nodes.items()
            if path not in self._ephemeral
        }
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

    @staticmethod
    def _parent(path: str) -> str:
        parent = path.rsplit("/", 1)[0]
        return parent or "/"

    def _fire(self, parent: str) -> None:
        for watch in self._watches.pop(parent, []):
            watch(parent)

    def create(
        self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True
    ) -> None:
        if path in self._nodes:
            raise NodeExists(path)
        parent = self._parent(path)
        if parent not in self._nodes:
            if not make_parents:
                raise NoNode(parent)
            self.create(parent, b"", make_parents=True)
        self._nodes[path] = (data, 0)
        if ephemeral:
            self._ephemeral.add(path)
        else:
            self._persist()
        self._fire(parent)

    def get(self, path: str) -> tuple[bytes, int]:
        try:
            return self._nodes[path]
        except KeyError:
            raise NoNode(path) from None

    def set(self, path: str, data: bytes, expected_version: int = -1) -> int:
        _, version = self.get(path)
        if expected_version != -1 and expected_version != version:
            raise BadVersion(path)
        self._nodes[path] = (data, version + 1)
        if path not in self._ephemeral:
            self._persist()
        return version + 1

    def delete(self, path: str, *, recursive: bool = False) -> None:
        if path not in self._nodes:
            raise NoNode(path)
        prefix = path.rstrip("/") + "/"
        below = [p for p in self._nodes if p.startswith(prefix)]
        if below and not recursive:
            raise NodeExists(f"{path} has children")
        for p in [*below, path]:
            self._nodes.pop(p, None)
            self._ephemeral.discard(p)
        self._persist()
        self._fire(self._parent(path))

    def exists(self, path: str) -> bool:
        return path in self._nodes

    def children(self, path: str, watch: ChildWatch | None = None) -> list[str]:
        if path not in self._nodes:
            raise NoNode(path)
        prefix = path.rstrip("/") + "/"
        names = sorted(
            p[len(prefix) :]
            for p in self._nodes
            if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )
        if watch is not None:
            self._watches.setdefault(path, []).append(watch)
        return names

    def close(self) -> None:
        for path in list(self._ephemeral):
            self._nodes.pop(path, None)
        self._ephemeral.clear()
        self._watches.clear()
