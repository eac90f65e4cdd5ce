"""Dynamic configs in the metadata store, laid out as Kafka's ZooKeeper mode keeps them.

`/config/topics/<topic>`, `/config/brokers/<id>` and `/config/brokers/<default>` hold
`{"version": 1, "config": {name: value}}`. Every change also creates a sequential
`/config/changes/config_change_<10 digits>` node holding
`{"version": 2, "entity_path": "<type>/<name>"}`; each broker's `ConfigChangeListener`
watches `/config/changes` and reloads the named entity, so a change made through any
broker reaches every broker without a restart (Kafka's `ZkConfigManager`).

Not thread-safe: used from the broker's event loop, like the store.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping

from logbus.controller.metadata_store import BadVersion, MetadataStore, NodeExists, NoNode

TOPIC = "topics"
BROKER = "brokers"
DEFAULT_ENTITY = "<default>"
CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"
# Processed notifications kept for brokers that have not read them yet; older ones are
# deleted (a broker re-reads every config when it starts, so nothing depends on them).
KEPT_NOTIFICATIONS = 100

log = logging.getLogger(__name__)

EntityHandler = Callable[[str], None]


def entity_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def fetch_entity_config(store: MetadataStore, entity_type: str, name: str) -> dict[str, str]:
    """The dynamic configs of one entity (empty when none were ever set)."""
    try:
        value = store.get_json(entity_path(entity_type, name))
    except NoNode:
        return {}
    if not isinstance(value, dict):
        return {}
    config = value.get("config", {})
    return {str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {}


def change_entity_config(
    store: MetadataStore, entity_type: str, name: str, configs: Mapping[str, str]
) -> None:
    """Replace the dynamic configs of one entity and notify every broker."""
    path = entity_path(entity_type, name)
    value = {"version": 1, "config": dict(configs)}
    with store.batch():
        if store.exists(path):
            store.set_json(path, value)
        else:
            store.create_json(path, value)
        _notify(store, f"{entity_type}/{name}")


def _notify(store: MetadataStore, entity: str) -> None:
    """Create the next sequential change node. The sequence is kept in the data of
    `/config/changes` and advanced with a compare-and-set, so it never goes back even when
    old notifications are deleted."""
    data = json.dumps({"version": 2, "entity_path": entity}).encode()
    while True:
        try:
            counter, version = store.get(CHANGES_PATH)
        except NoNode:
            with contextlib.suppress(NodeExists):
                store.create(CHANGES_PATH, b"0")
            continue
        sequence = int(counter or b"0")
        try:
            store.set(CHANGES_PATH, str(sequence + 1).encode(), version)
        except BadVersion:
            continue
        try:
            store.create(f"{CHANGES_PATH}/{CHANGE_PREFIX}{sequence:010d}", data)
        except NodeExists:
            continue
        return


def _sequence(child: str) -> int:
    try:
        return int(child[len(CHANGE_PREFIX) :])
    except ValueError:
        return -1


class ConfigChangeListener:
    """Applies config change notifications on one broker.

    `handlers` maps an entity type ("topics", "brokers") to a function taking the entity
    name; it is called once per notification, after the entity's node was written.
    `start()` processes the notifications present and watches for new ones.
    """

    def __init__(
        self,
        store: MetadataStore,
        handlers: Mapping[str, EntityHandler],
        run: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.store = store
        self.handlers = dict(handlers)
        self.last_processed = -1
        self._started = False
        # How a watch's processing is run: inline (the embedded store fires watches on
        # the broker's loop), or handed to a thread of its own (ZooKeeper's callbacks).
        self._run = run

    def start(self) -> None:
        """Skip the notifications already present (the broker loaded every config when it
        started) and watch for new ones."""
        self._started = True
        children = self._children()
        if children:
            self.last_processed = max(_sequence(c) for c in children)

    def stop(self) -> None:
        self._started = False

    def _children(self) -> list[str]:
        if not self.store.exists(CHANGES_PATH):
            with contextlib.suppress(NodeExists):
                self.store.create(CHANGES_PATH, b"0")
        return [
            c
            for c in self.store.children(CHANGES_PATH, watch=self._on_change)
            if c.startswith(CHANGE_PREFIX)
        ]

    def _on_change(self, _path: str) -> None:
        if not self._started:
            return
        if self._run is None:
            self.process()
        else:
            self._run(self.process)

    def process(self) -> None:
        """Apply every notification newer than the last one processed."""
        children = sorted(self._children(), key=_sequence)
        for child in children:
            sequence = _sequence(child)
            if sequence <= self.last_processed:
                continue
            self.last_processed = sequence
            try:
                value = self.store.get_json(f"{CHANGES_PATH}/{child}")
            except NoNode:
                continue
            entity = value.get("entity_path", "") if isinstance(value, dict) else ""
            entity_type, _, name = str(entity).partition("/")
            handler = self.handlers.get(entity_type)
            if handler is None or not name:
                continue
            try:
                handler(name)
            except Exception:
                log.exception("cannot apply the config change of %s", entity)
        self._purge(children)

    def _purge(self, children: list[str]) -> None:
        for child in children[: max(0, len(children) - KEPT_NOTIFICATIONS)]:
            with contextlib.suppress(NoNode):
                self.store.delete(f"{CHANGES_PATH}/{child}")
