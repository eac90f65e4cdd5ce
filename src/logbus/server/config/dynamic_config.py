"""Applying dynamic configs on one broker (Kafka's `DynamicConfigManager` and
`DynamicBrokerConfig`, KIP-226).

At start-up the broker's effective config is its static config (server.properties and
--override) under the dynamic layers stored in `/config/brokers/<default>` and
`/config/brokers/<id>`. Once started, `ConfigChangeListener` calls `on_topic_change` and
`on_broker_change`; each rebuilds the affected `LogConfig`s and hands them to the live
logs, so new settings take effect without a restart.

Owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from logbus.common.config_def import ConfigError, ConfigValue
from logbus.controller.config_store import (
    BROKER,
    DEFAULT_ENTITY,
    TOPIC,
    ConfigChangeListener,
    EntityHandler,
    fetch_entity_config,
)
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.metadata_store import MetadataStore
from logbus.server.config.broker_config import BrokerConfig

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import MetadataCache
    from logbus.controller.controller import Controller
    from logbus.server.replica.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


def with_dynamic_layers(
    static: dict[str, ConfigValue], store: MetadataStore, broker_id: int
) -> BrokerConfig:
    """The broker config with the stored dynamic layers on top of `static`. A stored layer
    this version rejects is ignored with an error in the log (as Kafka does), so that the
    broker still starts."""
    default = fetch_entity_config(store, BROKER, DEFAULT_ENTITY)
    per_broker = fetch_entity_config(store, BROKER, str(broker_id))
    return config_with_layers(static, default, per_broker)


def config_with_layers(
    static: dict[str, ConfigValue], default: Mapping[str, str], per_broker: Mapping[str, str]
) -> BrokerConfig:
    """The broker config with dynamic layers (the cluster-wide default, this broker's) on
    top of `static`; a layer this version rejects is ignored with an error in the log."""
    for dynamic_default, dynamic_per_broker in (
        (default, per_broker),
        (default, {}),
        ({}, per_broker),
    ):
        try:
            return BrokerConfig(
                static, dynamic_default=dynamic_default, dynamic_per_broker=dynamic_per_broker
            )
        except ConfigError as exc:
            log.error("ignoring stored dynamic broker configs: %s", exc)
    return BrokerConfig(static)


class DynamicConfigManager:
    """Keeps the broker's config (through `reconfigure`, the broker's) and every log's
    config in step with the metadata store."""

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        static: dict[str, ConfigValue],
        metadata_cache: MetadataCache,
        *,
        reconfigure: Callable[[BrokerConfig], None],
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.static = static
        self.metadata_cache = metadata_cache
        self.reconfigure = reconfigure
        self.listener: ConfigChangeListener | None = None
        self._worker: ControllerEventManager | None = None
        # handlers of other entity types ("users", "clients": client quotas), called
        # where notifications are read (the change thread with ZooKeeper)
        self.entity_handlers: dict[str, list[EntityHandler]] = {}

    def add_entity_handler(self, entity_type: str, handler: EntityHandler) -> None:
        """Also call `handler(name)` for each change of an entity of `entity_type` (before
        `start`); several may follow one type (a user's quotas and its credentials)."""
        self.entity_handlers.setdefault(entity_type, []).append(handler)

    def _other_handlers(self) -> dict[str, EntityHandler]:
        def chained(handlers: list[EntityHandler]) -> EntityHandler:
            def handle(name: str) -> None:
                for handler in handlers:
                    handler(name)

            return handle

        return {kind: chained(list(hs)) for kind, hs in self.entity_handlers.items()}

    def load(self) -> BrokerConfig:
        """The config to start with: static settings under the stored dynamic ones."""
        return with_dynamic_layers(self.static, self.store, self.broker_id)

    def dynamic_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        """(cluster-wide default, this broker's) dynamic configs as stored."""
        return (
            fetch_entity_config(self.store, BROKER, DEFAULT_ENTITY),
            fetch_entity_config(self.store, BROKER, str(self.broker_id)),
        )

    def start(
        self, controller: Controller, replica_manager: ReplicaManager, *, threaded: bool = False
    ) -> None:
        """Follow the stored changes: a topic's new configs go to the controller's and the
        metadata cache's view of the topic and to its logs.

        `threaded` (cluster mode, ZooKeeper): notifications are read on a thread of their
        own (Kafka's change notification thread); what they change on the broker is handed
        to the event loop, and topic configs to the controller's thread."""
        if not threaded:

            def on_topic_change(topic: str) -> None:
                self.on_topic_change(topic, controller, replica_manager)

            self.listener = ConfigChangeListener(
                self.store,
                {**self._other_handlers(), TOPIC: on_topic_change, BROKER: self.on_broker_change},
            )
            self.listener.start()
            return
        loop = asyncio.get_running_loop()
        self._worker = worker = ControllerEventManager("config-change-thread")

        def topic_changed(topic: str) -> None:  # worker thread
            configs = fetch_entity_config(self.store, TOPIC, topic)
            loop.call_soon_threadsafe(self.apply_topic_configs, topic, configs, replica_manager)
            on_topic_configs = getattr(controller, "on_topic_configs", None)
            events = getattr(controller, "events", None)
            if on_topic_configs is not None and events is not None:
                events.put(lambda: on_topic_configs(topic, configs), "TopicConfigChange")

        def broker_changed(name: str) -> None:  # worker thread
            if name in (DEFAULT_ENTITY, str(self.broker_id)):
                config = self.load()
                loop.call_soon_threadsafe(self._reconfigure, config, name)

        self.listener = ConfigChangeListener(
            self.store,
            {**self._other_handlers(), TOPIC: topic_changed, BROKER: broker_changed},
            run=worker.put,
        )
        worker.start()
        worker.put(self.listener.start, "ConfigChangeListenerStart")

    def apply_topic_configs(
        self, topic: str, configs: dict[str, str], replica_manager: ReplicaManager
    ) -> None:
        """Event loop: a topic's new configs reach the metadata cache and its logs."""
        metadata = self.metadata_cache.topics.get(topic)
        if metadata is not None:
            metadata.configs = dict(configs)
            replica_manager.update_log_config(metadata)
        log.info("applied new configs of topic %s: %s", topic, configs)

    def _reconfigure(self, config: BrokerConfig, name: str) -> None:
        self.reconfigure(config)
        log.info("applied new dynamic broker configs (%s)", name)

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        if self._worker is not None:
            self._worker.stop()

    def on_topic_change(
        self, topic: str, controller: Controller, replica_manager: ReplicaManager
    ) -> None:
        configs = fetch_entity_config(self.store, TOPIC, topic)
        cache = self.metadata_cache
        for owner in (cache.topics, controller.topics):
            metadata = owner.get(topic)
            if metadata is not None:
                metadata.configs = dict(configs)
        metadata = cache.topics.get(topic)
        if metadata is not None:
            replica_manager.update_log_config(metadata)
        log.info("applied new configs of topic %s: %s", topic, configs)

    def on_broker_change(self, name: str) -> None:
        if name not in (DEFAULT_ENTITY, str(self.broker_id)):
            return
        self.reconfigure(self.load())
        log.info("applied new dynamic broker configs (%s)", name)
