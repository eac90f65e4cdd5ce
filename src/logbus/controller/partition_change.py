"""Partition changes of the KRaft controller as PartitionChangeRecords (Kafka's
`PartitionChangeBuilder`): a broker leaving (fenced, or in controlled shutdown) is taken
out of every ISR and loses every leadership; a broker coming back (unfenced) leads the
partitions left without a leader that it is in the ISR of. Leaders are chosen from the
ISR in replica order among the brokers that may lead; there is no unclean election, and
the ISR is never made empty (its last member stays, leaderless, until it returns).

Pure functions of a `MetadataImage`; the entry points are `remove_broker_changes` and
`unfence_changes`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any
from uuid import UUID

from logbus.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from logbus.metadata.records import MetadataRecord, latest_version

__all__ = ["elect_leader", "partition_change", "remove_broker_changes", "unfence_changes"]


def partition_change(topic_id: UUID, partition_id: int, **changes: Any) -> MetadataRecord:
    """A PartitionChangeRecord; fields not given keep their value."""
    body = {"topic_id": topic_id, "partition_id": partition_id, **changes}
    return MetadataRecord("PartitionChangeRecord", latest_version("PartitionChangeRecord"), body)


def elect_leader(partition: PartitionRegistration, isr: Collection[int], usable: set[int]) -> int:
    """The first replica, in replica order, in the ISR and able to lead; else NO_LEADER."""
    return next((r for r in partition.replicas if r in isr and r in usable), NO_LEADER)


def _partitions(image: MetadataImage) -> Iterator[tuple[UUID, int, PartitionRegistration]]:
    for topic_id, topic in image.topics.items():
        for partition_id, partition in topic.partitions.items():
            yield topic_id, partition_id, partition


def remove_broker_changes(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """Take `broker_id` out of every ISR and leadership (it is fenced or shutting down)."""
    usable = set(image.unfenced_brokers()) - {broker_id}
    records = []
    for topic_id, partition_id, p in _partitions(image):
        if broker_id not in p.isr and p.leader != broker_id:
            continue
        isr = [r for r in p.isr if r != broker_id] or list(p.isr)
        changes: dict[str, Any] = {}
        if isr != list(p.isr):
            changes["isr"] = isr
        if p.leader == broker_id or p.leader not in usable:
            leader = elect_leader(p, isr, usable)
            if leader != p.leader:
                changes["leader"] = leader
        if changes:
            records.append(partition_change(topic_id, partition_id, **changes))
    return records


def unfence_changes(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """Leaders for the leaderless partitions `broker_id` (now unfenced) is in the ISR of."""
    usable = set(image.unfenced_brokers()) | {broker_id}
    records = []
    for topic_id, partition_id, p in _partitions(image):
        if p.leader == NO_LEADER and broker_id in p.isr:
            leader = elect_leader(p, p.isr, usable)
            if leader != NO_LEADER:
                records.append(partition_change(topic_id, partition_id, leader=leader))
    return records


def led_by(image: MetadataImage, broker_id: int) -> int:
    """How many partitions `broker_id` leads."""
    return sum(1 for _t, _p, p in _partitions(image) if p.leader == broker_id)
