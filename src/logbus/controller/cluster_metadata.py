"""The cluster metadata model: brokers, topics, partition leadership, as values.

Brokers keep a `MetadataCache` of it (filled by the controller's UpdateMetadata), which
the Metadata, DescribeCluster and topic APIs answer from.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener of a broker as the cluster sees it (`/brokers/ids/<id>` "endpoints",
    UpdateMetadata's live broker endpoints)."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. `host`/`port`/`listener` are the endpoint clients are told about;
    `endpoints` every listener it registered (empty: only that one)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listener: str = "PLAINTEXT"
    endpoints: tuple[EndPoint, ...] = ()

    def all_endpoints(self) -> tuple[EndPoint, ...]:
        return self.endpoints or (EndPoint(self.listener, self.host, self.port),)

    def endpoint(self, listener: str | None) -> EndPoint:
        """The endpoint of `listener` (None: the client-facing one); that one when the
        broker has no such listener."""
        for ep in self.all_endpoints():
            if ep.listener == listener:
                return ep
        return EndPoint(self.listener, self.host, self.port)


# Kafka's endpoint syntax in `/brokers/ids/<id>`: NAME://host:port, IPv6 hosts in brackets.
_ENDPOINT = re.compile(r"([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:([0-9]+)")


def broker_from_registration(
    broker_id: int, value: Mapping[str, Any], client_listener: str | None = None
) -> BrokerInfo:
    """A broker as its `/brokers/ids/<id>` JSON (Kafka's v4/v5 registration) describes it:
    every endpoint with its security protocol, the rack; the client-facing endpoint is
    `client_listener`'s (the first one when None or absent)."""
    protocols: Mapping[str, str] = value.get("listener_security_protocol_map") or {}
    endpoints: list[EndPoint] = []
    for text in value.get("endpoints") or ():
        match = _ENDPOINT.fullmatch(str(text))
        if match is None:
            raise ValueError(f"broker {broker_id} registered a malformed endpoint {text!r}")
        name, host, port = match.group(1), match.group(2), int(match.group(3))
        endpoints.append(EndPoint(name, host, port, protocols.get(name, name)))
    rack = value.get("rack")
    if not endpoints:  # registrations before v2 name only host and port
        return BrokerInfo(broker_id, str(value["host"]), int(value["port"]), rack)
    main = next((ep for ep in endpoints if ep.listener == client_listener), endpoints[0])
    return BrokerInfo(broker_id, main.host, main.port, rack, main.listener, tuple(endpoints))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Leadership of one partition: what `/brokers/topics/<t>/partitions/<p>/state` holds."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    controller_epoch: int = 1
    version: int = 0  # the store node's version, for compare-and-set updates


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: UUID
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    is_internal: bool = False


def topic_id_to_str(topic_id: UUID) -> str:
    """Kafka writes topic ids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> UUID:
    return UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


class MetadataCache:
    """A broker's view of the cluster. Owned by the broker's event loop thread."""

    def __init__(self, cluster_id: str, controller_id: int) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[UUID, str] = {}

    def update_topic(self, topic: TopicMetadata) -> None:
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic.name

    def remove_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)

    def topic_name(self, topic_id: UUID) -> str | None:
        return self._by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        meta = self.topics.get(topic)
        return None if meta is None else meta.partitions.get(partition)
