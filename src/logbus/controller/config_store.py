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

from logbus.controller.change_notifications import ChangeNotificationListener
from logbus.controller.metadata_store import BadVersion, MetadataStore, NodeExists, NoNode

TOPIC = "topics"
BROKER = "brokers"
DEFAULT_ENTITY = "<default>"
CHANGES_PATH = "/config/changes"
CHANGE_PREFIX = "config_change_"

log = logging.getLogger(__name__)

EntityHandler = Callable[[str], None]


def entity_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def fetch_entity_config(store: MetadataStore, entity_type: str, name: str) -> dict[str, str]:
    """The dynamic configs of one entity (empty when none were ever set)."""
    try:
        data, _version = store.get(entity_path(entity_type, name))
    except NoNode:
        return {}
    if not data:  # a parent made for a child entity (`users/<u>/clients/<c>`), as in Kafka
        return {}
    value = json.loads(data)
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


class ConfigChangeListener(ChangeNotificationListener):
    """Applies config change notifications on one broker.

    `handlers` maps an entity type ("topics", "brokers") to a function taking the entity
    name; it is called once per notification, after the entity's node was written.
    `start()` skips the notifications present and watches for new ones.
    """

    def __init__(
        self,
        store: MetadataStore,
        handlers: Mapping[str, EntityHandler],
        run: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        super().__init__(store, CHANGES_PATH, CHANGE_PREFIX, self._apply, run, path_data=b"0")
        self.handlers = dict(handlers)

    def _apply(self, child: str, data: bytes) -> None:
        try:
            value = json.loads(data)
        except ValueError:
            log.error("ignoring config change notification %s: %r", child, data)
            return
        entity = value.get("entity_path", "") if isinstance(value, dict) else ""
        entity_type, _, name = str(entity).partition("/")
        handler = self.handlers.get(entity_type)
        if handler is None or not name:
            return
        try:
            handler(name)
        except Exception:
            log.exception("cannot apply the config change of %s", entity)
