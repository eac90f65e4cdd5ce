"""A broker's registration in ZooKeeper: its ephemeral `/brokers/ids/<id>` node in
Kafka's JSON (version 5), whose creation txid (czxid) is the broker epoch.

Blocking store calls: run off the event loop (controller thread or a worker thread).
"""

from __future__ import annotations

import contextlib
import json
import time

from logbus.controller.cluster_metadata import BrokerInfo, EndPoint, broker_from_registration
from logbus.controller.metadata_store import MetadataStore, NodeExists, NoNode

IDS_PATH = "/brokers/ids"


class BrokerIdRegistered(Exception):
    """Another live broker holds this broker id."""


Endpoint = EndPoint


def broker_json(
    broker_id: int, endpoints: list[Endpoint], rack: str | None, *, now_ms: int | None = None
) -> dict[str, object]:
    """`/brokers/ids/<id>` as Kafka 2.x/3.x writes it (version 5)."""
    first = endpoints[0]
    value: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
        "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in endpoints],
        "jmx_port": -1,
        "port": first.port,
        "host": first.host,
        "version": 5,
        "timestamp": str(int(time.time() * 1000) if now_ms is None else now_ms),
    }
    if rack is not None:
        value["rack"] = rack
    return value


def broker_info(broker_id: int, data: bytes, listener: str | None = None) -> BrokerInfo:
    """A registered broker: its endpoint for `listener` (else its first one), rack and
    every endpoint."""
    return broker_from_registration(broker_id, json.loads(data), listener)


def registered_brokers(
    store: MetadataStore, listener: str | None = None
) -> dict[int, tuple[BrokerInfo, int]]:
    """Every registered broker: (its info, its broker epoch)."""
    out: dict[int, tuple[BrokerInfo, int]] = {}
    try:
        children = store.children(IDS_PATH)
    except NoNode:
        return out
    for child in children:
        try:
            data, _ = store.get(f"{IDS_PATH}/{child}")
            epoch = store.stat(f"{IDS_PATH}/{child}").czxid
        except NoNode:
            continue  # gone meanwhile
        out[int(child)] = (broker_info(int(child), data, listener), epoch)
    return out


class BrokerRegistration:
    """Creates (and after a session expiry re-creates) this broker's ephemeral node."""

    def __init__(
        self, store: MetadataStore, broker_id: int, endpoints: list[Endpoint], rack: str | None
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.endpoints = endpoints
        self.rack = rack
        self.epoch = -1

    @property
    def path(self) -> str:
        return f"{IDS_PATH}/{self.broker_id}"

    def register(self) -> int:
        """Create the node; returns the new broker epoch. BrokerIdRegistered when a live
        broker (another ZooKeeper session) holds the id."""
        data = json.dumps(broker_json(self.broker_id, self.endpoints, self.rack)).encode()
        try:
            self.store.create(self.path, data, ephemeral=True)
        except NodeExists:
            raise BrokerIdRegistered(
                f"broker id {self.broker_id} is already registered at {self.path} by another "
                f"live broker (a ZooKeeper session of its own); choose another broker.id, or "
                f"wait zookeeper.session.timeout.ms for the session of a broker that died to "
                f"expire"
            ) from None
        self.epoch = self.store.stat(self.path).czxid
        return self.epoch

    def is_registered(self) -> bool:
        return self.store.exists(self.path)

    def deregister(self) -> None:
        with contextlib.suppress(NoNode):
            self.store.delete(self.path)
