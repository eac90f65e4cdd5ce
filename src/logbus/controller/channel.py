"""How the controller tells brokers about leadership and metadata.

In Kafka's ZooKeeper mode these are the LeaderAndIsr, UpdateMetadata and StopReplica
requests. `LocalChannel` delivers them to the controller's own broker in-process, which is
all a stand-alone broker needs; a cluster uses `network_channel.NetworkChannel`, which
sends them over the wire to every broker (itself included), stamped with the
controller's id and epoch and each broker's epoch. On the receiving broker
`server/api/controller_requests.py` checks those epochs and calls its `BrokerCallbacks`.
"""

from __future__ import annotations

from typing import Protocol

from logbus.controller.cluster_metadata import BrokerInfo, TopicMetadata


class BrokerCallbacks(Protocol):
    """What a broker does when the controller speaks to it."""

    def apply_leader_and_isr(self, topic: TopicMetadata, partitions: list[int]) -> None: ...

    def apply_update_metadata(
        self,
        brokers: list[BrokerInfo],
        topics: list[TopicMetadata],
        deleted: list[str],
        controller_id: int | None = None,
    ) -> None:
        """`controller_id` (None: unchanged) is what Metadata and DescribeCluster answer
        as the controller."""

    def apply_stop_replica(self, topic: str, partitions: list[int], delete: bool) -> None: ...


class ControllerChannel(Protocol):
    def send_leader_and_isr(
        self, broker_id: int, topic: TopicMetadata, partitions: list[int]
    ) -> None: ...

    def send_update_metadata(
        self, brokers: list[BrokerInfo], topics: list[TopicMetadata], deleted: list[str]
    ) -> None: ...

    def send_stop_replica(
        self, broker_id: int, topic: str, partitions: list[int], delete: bool
    ) -> None: ...


class LocalChannel:
    """Delivers controller requests to brokers living in this process."""

    def __init__(self) -> None:
        self._brokers: dict[int, BrokerCallbacks] = {}

    def register(self, broker_id: int, broker: BrokerCallbacks) -> None:
        self._brokers[broker_id] = broker

    def send_leader_and_isr(
        self, broker_id: int, topic: TopicMetadata, partitions: list[int]
    ) -> None:
        broker = self._brokers.get(broker_id)
        if broker is not None:
            broker.apply_leader_and_isr(topic, partitions)

    def send_update_metadata(
        self, brokers: list[BrokerInfo], topics: list[TopicMetadata], deleted: list[str]
    ) -> None:
        for broker in self._brokers.values():
            broker.apply_update_metadata(brokers, topics, deleted)

    def send_stop_replica(
        self, broker_id: int, topic: str, partitions: list[int], delete: bool
    ) -> None:
        broker = self._brokers.get(broker_id)
        if broker is not None:
            broker.apply_stop_replica(topic, partitions, delete)
