"""Change notifications in the metadata store (Kafka's ZkNodeChangeNotificationListener):
a writer adds a sequential node `<prefix><sequence>` under a path, and every broker
watching that path applies the notifications newer than the last it processed.

Used by config changes (`/config/changes`, `controller/config_store.py`) and ACL changes
(`/kafka-acl-changes`, `/kafka-acl-extended-changes`, `server/security/acl_store.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from logbus.controller.metadata_store import MetadataStore, NodeExists, NoNode

# Processed notifications kept for brokers that have not read them yet; older ones are
# deleted (a broker loads everything when it starts, so nothing depends on them).
KEPT_NOTIFICATIONS = 100


class ChangeNotificationListener:
    """Watches the sequential children `prefix<n>` of `path` and calls `apply(child,
    data)` once for each new one, in order. `run` decides where processing happens:
    inline (the embedded store fires watches on the broker's loop) or handed to a thread
    of its own (ZooKeeper's callbacks). `apply` deals with its own errors."""

    def __init__(
        self,
        store: MetadataStore,
        path: str,
        prefix: str,
        apply: Callable[[str, bytes], None],
        run: Callable[[Callable[[], None]], None] | None = None,
        *,
        path_data: bytes = b"",
    ) -> None:
        self.store = store
        self.path = path
        self.prefix = prefix
        self.apply = apply
        self.last_processed = -1
        self._run = run
        self._path_data = path_data  # what `path` holds when this listener creates it
        self._started = False

    def start(self) -> None:
        """Skip the notifications present (the caller has just loaded everything) and
        watch for new ones."""
        self._started = True
        children = self._children()
        if children:
            self.last_processed = max(self.sequence(c) for c in children)

    def stop(self) -> None:
        self._started = False

    def sequence(self, child: str) -> int:
        try:
            return int(child[len(self.prefix) :])
        except ValueError:
            return -1

    def _children(self) -> list[str]:
        if not self.store.exists(self.path):
            with contextlib.suppress(NodeExists):
                self.store.create(self.path, self._path_data)
        return [
            c
            for c in self.store.children(self.path, watch=self._on_watch)
            if c.startswith(self.prefix)
        ]

    def _on_watch(self, _path: str) -> None:
        if not self._started:
            return
        if self._run is None:
            self.process()
        else:
            self._run(self.process)

    def process(self) -> None:
        """Apply every notification newer than the last one processed, then delete all
        but the newest KEPT_NOTIFICATIONS."""
        children = sorted(self._children(), key=self.sequence)
        for child in children:
            sequence = self.sequence(child)
            if sequence <= self.last_processed:
                continue
            self.last_processed = sequence
            try:
                data, _ = self.store.get(f"{self.path}/{child}")
            except NoNode:
                continue
            self.apply(child, data)
        for child in children[: max(0, len(children) - KEPT_NOTIFICATIONS)]:
            with contextlib.suppress(NoNode):
                self.store.delete(f"{self.path}/{child}")
