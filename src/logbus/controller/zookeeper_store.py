"""`ZooKeeperStore`: the metadata store on an Apache ZooKeeper ensemble, through kazoo.

Selected by `zookeeper.connect` (`host:port[,host:port...][/chroot]`). The chroot is created
when missing, as Kafka does. Every method blocks and is thread-safe: never call one on an
event loop (the broker goes through `asyncio.to_thread`, the controller through its own
thread).

Watches are one-shot, as ZooKeeper's. Watch and session callbacks run on kazoo's callback
thread, one at a time and in order: an owner must not block there and hands each one to its
own loop or thread (`loop.call_soon_threadsafe`, the controller's event queue). kazoo sets no
watch again after a lost connection: this store remembers the watches the loss dropped and
fires each one (with its path) once the connection is back, after the session listeners have
seen CONNECTED, so an owner re-reads what it watches and never misses a change.

Session events: SUSPENDED when the connection drops, CONNECTED when it is back (the same
session: ephemeral nodes kept), EXPIRED when ZooKeeper ended the session (its ephemeral nodes
are gone) and then CONNECTED once kazoo has a new session. A call made while disconnected
waits up to the connection timeout for the connection to come back, then raises
`StoreUnavailable`; so does a call in flight when the connection drops (it may or may not
have been applied, as with ZooKeeper's ConnectionLoss).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, EventType

from logbus.controller.metadata_store import (
    BadVersion,
    CheckVersion,
    ChildWatch,
    Create,
    DataWatch,
    MetadataStore,
    NodeExists,
    NodeStat,
    NoNode,
    NotEmpty,
    Op,
    SessionEvent,
    SessionListener,
    SetData,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

_UNAVAILABLE = (
    ConnectionLoss,
    SessionExpiredError,  # ConnectionClosedError too
    OperationTimeoutError,
    KazooTimeoutError,
)
_SESSION_EVENTS = {
    KazooState.CONNECTED: SessionEvent.CONNECTED,
    KazooState.SUSPENDED: SessionEvent.SUSPENDED,
    KazooState.LOST: SessionEvent.EXPIRED,
}

# (kind, path, owner's callback): "data" for get/exists watches, "child" for children
_WatchKey = tuple[str, str, Callable[[str], None]]


def split_connect(connect: str) -> tuple[str, str]:
    """`host:port,host:port/chroot` -> (hosts, chroot: "" or a normalised "/a/b")."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host")
    if not slash or not chroot.strip("/"):
        return hosts, ""
    return hosts, posixpath.normpath("/" + chroot.strip("/"))


class ZooKeeperStore(MetadataStore):
    """A ZooKeeper session. Raises StoreUnavailable when no server answers within
    `connection_timeout_ms`."""

    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.connect = connect
        self._timeout = connection_timeout_ms / 1000
        hosts, chroot = split_connect(connect)
        self._lock = threading.Lock()
        self._listeners: list[SessionListener] = []
        self._armed: dict[_WatchKey, Callable[[Any], None]] = {}
        self._dropped: dict[_WatchKey, None] = {}
        self._closing = False
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
        self._client: Any = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=retry,
            command_retry=retry,
        )
        self._client.add_listener(self._on_state)
        connected = self._client.start_async()
        connected.wait(self._timeout)
        try:
            if not self._client.connected:
                raise StoreUnavailable(
                    f"could not connect to ZooKeeper at {connect} within {connection_timeout_ms} ms"
                )
            if chroot:
                self._wait(self._client.ensure_path_async(chroot), chroot)
                self._client.chroot = chroot  # kazoo prefixes it on the client side
        except BaseException:
            self._shutdown()
            raise

    # kazoo's results and errors

    def _wait(self, result: Any, path: str) -> Any:
        try:
            return result.get(timeout=self._timeout)
        except Exception as e:
            mapped = self._error(e, path)
            if mapped is e:
                raise
            raise mapped from e

    def _error(self, e: Exception, path: str) -> Exception:
        """The store's exception for kazoo's `e` (`e` itself when it has none)."""
        if isinstance(e, NoNodeError):
            return NoNode(path)
        if isinstance(e, NotEmptyError):
            return NotEmpty(f"{path} has children")
        if isinstance(e, NodeExistsError):
            return NodeExists(path)
        if isinstance(e, BadVersionError):
            return BadVersion(path)
        if isinstance(e, NoChildrenForEphemeralsError):
            return NoNode(f"{posixpath.dirname(path)} is ephemeral: it can have no children")
        if isinstance(e, _UNAVAILABLE):
            return StoreUnavailable(
                f"ZooKeeper at {self.connect} unavailable ({type(e).__name__}) on {path}"
            )
        return e

    # watches

    def _watcher(self, kind: str, path: str, callback: Callable[[str], None]) -> tuple[Any, bool]:
        """kazoo's watcher for `callback` on `path` (the armed one when there is one) and
        whether it is new."""
        key: _WatchKey = (kind, path, callback)
        with self._lock:
            armed = self._armed.get(key)
            if armed is not None:
                return armed, False

            def on_event(event: Any) -> None:
                with self._lock:
                    if self._armed.get(key) is not on_event:
                        return  # disarmed: its call failed, or already fired
                    del self._armed[key]
                    if event.type == EventType.NONE:  # connection lost: kazoo dropped it
                        if not self._closing:
                            self._dropped[key] = None
                        return
                callback(path)

            self._armed[key] = on_event
            return on_event, True

    def _watched(
        self,
        kind: str,
        path: str,
        callback: Callable[[str], None] | None,
        call: Callable[[Any], Any],
    ) -> Any:
        if callback is None:
            return self._wait(call(None), path)
        watcher, new = self._watcher(kind, path, callback)
        try:
            return self._wait(call(watcher), path)
        except BaseException:
            if new:
                with self._lock:
                    if self._armed.get((kind, path, callback)) is watcher:
                        del self._armed[(kind, path, callback)]
            raise

    # session

    def _on_state(self, state: Any) -> None:
        """On kazoo's connection thread: hand the event to the callback thread, where the
        watches run too, so owners see both in order."""
        event = _SESSION_EVENTS[state]
        self._client.handler.dispatch_callback(Callback("session", self._deliver, (event,)))

    def _deliver(self, event: SessionEvent) -> None:
        if self._closing:
            return
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("ZooKeeper session listener failed on %s", event.name)
        if event is SessionEvent.CONNECTED:
            with self._lock:
                dropped, self._dropped = list(self._dropped), {}
            for _kind, path, callback in dropped:
                callback(path)

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    @property
    def session_id(self) -> int:
        """The current session's id (a node's ephemeral_owner); 0 when there is none."""
        client_id = self._client.client_id
        return int(client_id[0]) if client_id else 0

    @property
    def session(self) -> tuple[int, bytes]:
        """(session id, password): what a second client needs to join (and so expire) the
        session, as ZooKeeper's own tests do."""
        session_id, password = self._client.client_id or (0, b"")
        return int(session_id), bytes(password)

    # operations

    def create(
        self,
        path: str,
        data: bytes,
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = True,
    ) -> str:
        result = self._client.create_async(
            path, data, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
        )
        return cast(str, self._wait(result, path))

    def get(self, path: str, watch: DataWatch | None = None) -> tuple[bytes, int]:
        data, stat = self._watched(
            "data", path, watch, lambda w: self._client.get_async(path, watch=w)
        )
        return bytes(data or b""), int(stat.version)

    def stat(self, path: str) -> NodeStat:
        stat = self._wait(self._client.exists_async(path), path)
        if stat is None:
            raise NoNode(path)
        return NodeStat(int(stat.version), int(stat.czxid), int(stat.ephemeralOwner))

    def exists(self, path: str, watch: DataWatch | None = None) -> bool:
        stat = self._watched(
            "data", path, watch, lambda w: self._client.exists_async(path, watch=w)
        )
        return stat is not None

    def children(self, path: str, watch: ChildWatch | None = None) -> list[str]:
        names = self._watched(
            "child", path, watch, lambda w: self._client.get_children_async(path, watch=w)
        )
        return sorted(names)

    def set(self, path: str, data: bytes, expected_version: int = -1) -> int:
        stat = self._wait(self._client.set_async(path, data, expected_version), path)
        return int(stat.version)

    def delete(self, path: str, *, recursive: bool = False, expected_version: int = -1) -> None:
        """A recursive delete is not atomic (as Kafka's): the version is checked first, the
        descendants are deleted deepest first, then the node itself with the version."""
        if recursive:
            if expected_version != -1 and self.stat(path).version != expected_version:
                raise BadVersion(path)
            self._delete_below(path)
        self._wait(self._client.delete_async(path, expected_version), path)

    def _delete_below(self, path: str) -> None:
        try:
            names = self.children(path)
        except NoNode:
            return
        for name in names:
            child = posixpath.join(path, name)
            self._delete_below(child)
            with contextlib.suppress(NoNode):  # deleted meanwhile
                self._wait(self._client.delete_async(child), child)

    def multi(self, ops: Sequence[Op]) -> None:
        if not ops:
            return
        error = self._refusal(ops, self._wait(self._commit(ops), ops[0].path))
        if error is not None:
            raise error

    def multi_each(self, transactions: Sequence[Sequence[Op]]) -> list[Exception | None]:
        """Every transaction is sent before the first answer is awaited: ZooKeeper
        applies them in order on the one session, in about one round trip."""
        pending = [(ops, self._commit(ops) if ops else None) for ops in transactions]
        outcomes: list[Exception | None] = []
        for ops, result in pending:
            if result is None:  # nothing to apply
                outcomes.append(None)
                continue
            error = self._refusal(ops, self._wait(result, ops[0].path))
            if error is not None and not isinstance(error, BadVersion | NoNode | NodeExists):
                raise error
            outcomes.append(error)
        return outcomes

    def _commit(self, ops: Sequence[Op]) -> Any:
        transaction = self._client.transaction()
        for op in ops:
            if isinstance(op, CheckVersion):
                transaction.check(op.path, op.version)
            elif isinstance(op, Create):
                transaction.create(op.path, op.data, ephemeral=op.ephemeral)
            elif isinstance(op, SetData):
                transaction.set_data(op.path, op.data, op.version)
            else:
                transaction.delete(op.path, op.version)
        return transaction.commit_async()

    def _refusal(self, ops: Sequence[Op], results: Sequence[Any]) -> Exception | None:
        """The error of the op that refused a transaction (the others are rolled back)."""
        for op, result in zip(ops, results, strict=False):
            if isinstance(result, Exception) and not isinstance(
                result, RolledBackError | RuntimeInconsistency
            ):
                mapped = self._error(result, op.path)
                if mapped is result:
                    return result
                mapped.__cause__ = result
                return mapped
        return None

    def close(self) -> None:
        """End the session (its ephemeral nodes vanish at once) and stop kazoo's threads."""
        self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            self._closing = True
            self._armed.clear()
            self._dropped.clear()
        try:
            self._client.stop()  # waits for kazoo's connection thread (bounded by kazoo)
        except Exception:
            log.exception("stopping the ZooKeeper client for %s failed", self.connect)
        self._client.close()
