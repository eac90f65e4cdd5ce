"""The broker's client quotas (Kafka's `ClientQuotaManager`, one per quota type, and the
`QuotaFactory` holding them): the configured quotas, a rate per throttled entity, and the
throttle time a request earns.

A request records its cost (bytes produced, bytes fetched, seconds of the event loop,
partitions mutated) in the rate of the entity whose quota applies to its (user, client
id); when the rate is above the quota the client is throttled for
(rate - quota) / quota * window. Rates of entities with no quota are not kept. Rates
unused for an hour are dropped, as Kafka expires its inactive sensors.

Owned by the broker's event loop; the stored configs are read wherever the store may
be called (a worker thread with ZooKeeper) and applied on the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from logbus.controller.config_store import entity_path
from logbus.controller.metadata_store import MetadataStore, NoNode
from logbus.server.quotas.entity import (
    CLIENTS,
    USERS,
    QuotaEntity,
    QuotaType,
    entity_from_store,
    lookup_order,
    quota_values,
    sensor_key,
)
from logbus.server.quotas.rate import SampledRate, TokenBucket

log = logging.getLogger(__name__)

SENSOR_EXPIRY_S = 3600.0
_EXPIRY_CHECK_S = 60.0

SensorKey = tuple[QuotaType, str, str]
Sensor = SampledRate | TokenBucket


@dataclass(frozen=True, slots=True)
class QuotaWindows:
    """`quota.window.num` samples of `quota.window.size.seconds` each."""

    samples: int = 11
    window_s: float = 1.0


class ClientQuotas:
    """Every client quota of one broker."""

    def __init__(self, windows: QuotaWindows) -> None:
        self.windows = windows
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self._sensors: dict[SensorKey, Sensor] = {}
        self._next_expiry_check = 0.0

    # --- configuration -------------------------------------------------------------------

    def set_entity(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """The quotas of one entity, replacing what it had (empty: none)."""
        if values:
            self.configs[entity] = dict(values)
        else:
            self.configs.pop(entity, None)

    @property
    def enabled(self) -> bool:
        return bool(self.configs)

    def quota(self, kind: QuotaType, user: str, client_id: str) -> tuple[float, QuotaEntity] | None:
        """The bound that applies to (user, client id) for `kind`, with the entity it was
        configured on; None when no quota applies."""
        key = kind.value
        configs = self.configs
        for entity in lookup_order(user, client_id):
            values = configs.get(entity)
            if values is not None and key in values:
                return values[key], entity
        return None

    # --- recording -----------------------------------------------------------------------

    def record(
        self, kind: QuotaType, user: str, client_id: str, value: float, now: float
    ) -> float:
        """Record `value` against the quota that applies and return the throttle time in
        seconds (0 within the quota, or when none applies)."""
        found = self.quota(kind, user, client_id)
        if found is None:
            return 0.0
        bound, entity = found
        sensor = self._sensor(kind, entity, user, client_id, now)
        if isinstance(sensor, TokenBucket):
            sensor.record_bounded(value, bound, now)
        else:
            sensor.record(value, now)
        return sensor.throttle(bound, now)

    def unrecord(
        self, kind: QuotaType, user: str, client_id: str, value: float, now: float
    ) -> None:
        """Take back a recorded value (a fetch answered empty because it was throttled)."""
        found = self.quota(kind, user, client_id)
        if found is not None:
            sensor = self._sensor(kind, found[1], user, client_id, now)
            if isinstance(sensor, SampledRate):
                sensor.record(-value, now)

    def throttle_time(self, kind: QuotaType, user: str, client_id: str, now: float) -> float:
        """The throttle time the rate already earns, without recording anything."""
        found = self.quota(kind, user, client_id)
        if found is None:
            return 0.0
        bound, entity = found
        sensor = self._sensors.get((kind, *sensor_key(entity, user, client_id)))
        return 0.0 if sensor is None else sensor.throttle(bound, now)

    def _sensor(
        self, kind: QuotaType, entity: QuotaEntity, user: str, client_id: str, now: float
    ) -> Sensor:
        if now >= self._next_expiry_check:
            self._expire(now)
        key = (kind, *sensor_key(entity, user, client_id))
        sensor = self._sensors.get(key)
        if sensor is None:
            windows = self.windows
            sensor = (
                TokenBucket(windows.samples, windows.window_s)
                if kind is QuotaType.CONTROLLER_MUTATION
                else SampledRate(windows.samples, windows.window_s)
            )
            self._sensors[key] = sensor
        return sensor

    def _expire(self, now: float) -> None:
        self._next_expiry_check = now + _EXPIRY_CHECK_S
        stale = [k for k, r in self._sensors.items() if now - r.last_record > SENSOR_EXPIRY_S]
        for key in stale:
            del self._sensors[key]


# --- the metadata store -----------------------------------------------------------------


def entity_config(store: MetadataStore, entity_type: str, name: str) -> dict[str, str]:
    try:
        value = store.get_json(entity_path(entity_type, name))
    except (NoNode, ValueError):  # a parent node made with no data holds no configs
        return {}
    config = value.get("config", {}) if isinstance(value, dict) else {}
    return {str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {}


def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return store.children(path)
    except NoNode:
        return []


def load_entity(store: MetadataStore, entity_type: str, name: str) -> dict[str, float]:
    """The quotas stored for one entity (blocking with ZooKeeper)."""
    return quota_values(entity_config(store, entity_type, name))


def load_all(store: MetadataStore) -> dict[QuotaEntity, dict[str, float]]:
    """Every quota stored under /config/users and /config/clients (blocking)."""
    found: dict[QuotaEntity, dict[str, float]] = {}

    def add(entity_type: str, name: str) -> None:
        entity = entity_from_store(entity_type, name)
        values = load_entity(store, entity_type, name)
        if entity is not None and values:
            found[entity] = values

    for user in _children(store, f"/config/{USERS}"):
        add(USERS, user)
        for client in _children(store, f"/config/{USERS}/{user}/{CLIENTS}"):
            add(USERS, f"{user}/{CLIENTS}/{client}")
    for client in _children(store, f"/config/{CLIENTS}"):
        add(CLIENTS, client)
    return found


def change_handler(
    quotas: ClientQuotas,
    store: MetadataStore,
    entity_type: str,
    apply: Callable[[Callable[[], None]], object],
) -> Callable[[str], None]:
    """A config change listener's handler for `users` or `clients` notifications: reads
    the entity's quotas where it is called and has `apply` run the update on the loop."""

    def changed(name: str) -> None:
        entity = entity_from_store(entity_type, name)
        if entity is None:
            return
        values = load_entity(store, entity_type, name)
        apply(lambda: _apply(quotas, entity, values))

    return changed


def _apply(quotas: ClientQuotas, entity: QuotaEntity, values: dict[str, float]) -> None:
    quotas.set_entity(entity, values)
    log.info("applied client quotas of %s: %s", entity, values or "none")
