"""Partition assignors: how a group's leader shares partitions among its members.

The four of Kafka's Java client, under the protocol names every client uses, so groups
mixing logbus with other clients agree on one: "range" (RangeAssignor), "roundrobin"
(RoundRobinAssignor), "sticky" (StickyAssignor, eager) and "cooperative-sticky"
(CooperativeStickyAssignor, KIP-429). Assignors are pure: they turn partition counts and
members' subscriptions into assignments, and remember only what the sticky ones send
in their subscription's user data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum

from logbus.client.requests.consumer_protocol import Subscription
from logbus.client.types import TopicPartition

Assignment = dict[str, list[int]]
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class RebalanceProtocol(Enum):
    """EAGER: every member gives up all its partitions before a rebalance. COOPERATIVE
    (KIP-429): members keep what they keep, and give up only what moves."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"


def member_order(
    member_id: str, group_instance_ids: Mapping[str, str | None]
) -> tuple[int, str]:
    """Kafka's member order: static members (by instance id) first, then by member id."""
    instance = group_instance_ids.get(member_id)
    return (0, instance) if instance is not None else (1, member_id)


class Assignor:
    """One partition assignment strategy (Kafka's ConsumerPartitionAssignor)."""

    name = ""
    protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Sequence[str]) -> bytes | None:
        """What this member adds to its subscription for the leader to read."""
        return None

    def on_assignment(self, partitions: Sequence[TopicPartition], generation_id: int) -> None:
        """This member's new assignment (sticky assignors remember it)."""

    def assign(
        self,
        partition_counts: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        """Every member's partitions, by topic; `partition_counts` holds every topic some
        member subscribes to that exists."""
        raise NotImplementedError


def range_assign(
    subscriptions: Mapping[str, Sequence[str]],
    partition_counts: Mapping[str, int],
    group_instance_ids: Mapping[str, str | None] | None = None,
) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: for each topic, its subscribers in member order each get a
    contiguous range of partitions, the first `count % subscribers` one more than the rest."""
    ids = group_instance_ids or {}
    assignment: dict[str, Assignment] = {member: {} for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        members = sorted(
            (m for m, subscribed in subscriptions.items() if topic in subscribed),
            key=lambda m: member_order(m, ids),
        )
        count = partition_counts.get(topic, 0)
        per_member, extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            if length:
                assignment[member][topic] = list(range(start, start + length))
    return assignment


class RangeAssignor(Assignor):
    name = "range"

    def assign(
        self,
        partition_counts: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        topics = {m: s.topics for m, s in subscriptions.items()}
        return range_assign(topics, partition_counts, group_instance_ids)


class RoundRobinAssignor(Assignor):
    """Kafka's RoundRobinAssignor: every partition of every subscribed topic in (topic,
    partition) order, dealt to the members in member order, skipping a member that does not
    subscribe to the partition's topic."""

    name = "roundrobin"

    def assign(
        self,
        partition_counts: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        ids = group_instance_ids or {}
        members = sorted(subscriptions, key=lambda m: member_order(m, ids))
        assignment: dict[str, Assignment] = {m: {} for m in members}
        if not members:
            return assignment
        topics = sorted(
            {t for s in subscriptions.values() for t in s.topics if t in partition_counts}
        )
        subscribed = {m: set(subscriptions[m].topics) for m in members}
        turn = 0
        for topic in topics:
            for partition in range(partition_counts[topic]):
                while topic not in subscribed[members[turn % len(members)]]:
                    turn += 1
                member = members[turn % len(members)]
                assignment[member].setdefault(topic, []).append(partition)
                turn += 1
        return assignment


def balanced_sticky_assign(
    partition_counts: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    owned: Mapping[str, tuple[Sequence[TopicPartition], int]],
) -> dict[str, list[TopicPartition]]:
    """A balanced assignment that keeps as many owned partitions where they are as it can.

    `owned` is each member's (partitions, generation). A partition claimed by two members
    stays with the one of the newest generation. Each member keeps its still-subscribed
    partitions, new ones go to the least loaded subscriber, then partitions move from the
    most to the least loaded member until no move narrows the gap (the ones it got last
    move first). With identical subscriptions, counts differ by at most one.
    """
    members = sorted(subscriptions)
    subscribers: dict[str, list[str]] = {}
    for member in members:
        for topic in subscriptions[member].topics:
            if topic in partition_counts:
                subscribers.setdefault(topic, []).append(member)
    everything = [
        TopicPartition(t, p) for t in sorted(subscribers) for p in range(partition_counts[t])
    ]
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    owner: dict[TopicPartition, str] = {}
    by_generation = sorted(members, key=lambda m: (-owned.get(m, ((), -1))[1], m))
    for member in by_generation:
        mine = set(subscriptions[member].topics)
        for topic, partition in owned.get(member, ((), -1))[0]:
            tp = TopicPartition(topic, partition)
            if (
                topic in mine
                and 0 <= partition < partition_counts.get(topic, 0)
                and tp not in owner
            ):
                owner[tp] = member
                assignment[member].append(tp)
    for tp in everything:
        if tp not in owner:
            member = min(subscribers[tp.topic], key=lambda m: (len(assignment[m]), m))
            owner[tp] = member
            assignment[member].append(tp)
    _balance(assignment, owner, subscribers)
    return {m: sorted(ps) for m, ps in assignment.items()}


def _balance(
    assignment: dict[str, list[TopicPartition]],
    owner: dict[TopicPartition, str],
    subscribers: Mapping[str, list[str]],
) -> None:
    moved = True
    while moved:
        moved = False
        for giver in sorted(assignment, key=lambda m: (-len(assignment[m]), m)):
            for tp in reversed(assignment[giver]):
                taker = min(subscribers[tp.topic], key=lambda m: (len(assignment[m]), m))
                if len(assignment[taker]) + 1 < len(assignment[giver]):
                    assignment[giver].remove(tp)
                    assignment[taker].append(tp)
                    owner[tp] = taker
                    moved = True
                    break
            if moved:
                break


def _by_topic(partitions: Iterable[TopicPartition]) -> Assignment:
    out: Assignment = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation_id: int) -> bytes:
    """Kafka's StickyAssignor user data (v1): the member's last assignment and its
    generation."""
    grouped = _by_topic(partitions)
    out = bytearray(_INT32.pack(len(grouped)))
    for topic, numbers in grouped.items():
        name = topic.encode()
        out += _INT16.pack(len(name)) + name + _INT32.pack(len(numbers))
        out += b"".join(_INT32.pack(p) for p in numbers)
    out += _INT32.pack(generation_id)
    return bytes(out)


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int]:
    """(partitions, generation) from StickyAssignor user data (v0 has no generation);
    nothing for data that is missing or unreadable."""
    if not data:
        return [], -1
    try:
        pos = 0
        (topics,) = _INT32.unpack_from(data, pos)
        pos += 4
        partitions: list[TopicPartition] = []
        for _ in range(topics):
            (size,) = _INT16.unpack_from(data, pos)
            topic = data[pos + 2 : pos + 2 + size].decode()
            pos += 2 + size
            (count,) = _INT32.unpack_from(data, pos)
            pos += 4
            for _ in range(count):
                partitions.append(TopicPartition(topic, _INT32.unpack_from(data, pos)[0]))
                pos += 4
        generation = _INT32.unpack_from(data, pos)[0] if len(data) >= pos + 4 else -1
    except (struct.error, UnicodeDecodeError):
        return [], -1
    return partitions, generation


class StickyAssignor(Assignor):
    """Kafka's StickyAssignor: balanced, and moving as few partitions as it can. Eager:
    members give up everything before the rebalance, so each sends its last assignment in
    its user data."""

    name = "sticky"

    def __init__(self) -> None:
        self._last: list[TopicPartition] = []
        self._generation = -1

    def subscription_user_data(self, topics: Sequence[str]) -> bytes | None:
        return encode_sticky_user_data(self._last, self._generation)

    def on_assignment(self, partitions: Sequence[TopicPartition], generation_id: int) -> None:
        self._last = list(partitions)
        self._generation = generation_id

    def _owned(self, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        if subscription.user_data:
            return decode_sticky_user_data(subscription.user_data)
        owned = [TopicPartition(t, p) for t, p in subscription.owned_partitions]
        return owned, subscription.generation_id

    def assign(
        self,
        partition_counts: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        owned = {m: self._owned(s) for m, s in subscriptions.items()}
        plan = balanced_sticky_assign(partition_counts, subscriptions, owned)
        return {m: _by_topic(ps) for m, ps in plan.items()}


class CooperativeStickyAssignor(StickyAssignor):
    """Kafka's CooperativeStickyAssignor (KIP-429): the sticky assignment, except that a
    partition moving to another member is withheld this round; its owner revokes it and
    rejoins, and the next rebalance hands it over."""

    name = "cooperative-sticky"
    protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, topics: Sequence[str]) -> bytes | None:
        return _INT32.pack(self._generation)

    def _owned(self, subscription: Subscription) -> tuple[list[TopicPartition], int]:
        generation = subscription.generation_id
        if generation < 0 and subscription.user_data and len(subscription.user_data) >= 4:
            generation = _INT32.unpack_from(subscription.user_data)[0]
        owned = [TopicPartition(t, p) for t, p in subscription.owned_partitions]
        return owned, generation

    def assign(
        self,
        partition_counts: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        owned = {m: self._owned(s) for m, s in subscriptions.items()}
        plan = balanced_sticky_assign(partition_counts, subscriptions, owned)
        previous_owner: dict[TopicPartition, str] = {}
        for member in sorted(owned, key=lambda m: (owned[m][1], m)):
            for tp in owned[member][0]:
                previous_owner[TopicPartition(*tp)] = member
        out: dict[str, Assignment] = {}
        for member, partitions in plan.items():
            kept = [
                tp for tp in partitions if previous_owner.get(tp, member) == member
            ]
            out[member] = _by_topic(kept)
        return out


ASSIGNORS: dict[str, type[Assignor]] = {
    cls.name: cls
    for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def make_assignors(names: Sequence[str]) -> list[Assignor]:
    """Assignors for `partition.assignment.strategy` values (protocol names or Kafka's
    class names); ValueError names an unknown one."""
    java_names = {
        "org.apache.kafka.clients.consumer.RangeAssignor": "range",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
        "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    }
    out: list[Assignor] = []
    for name in names:
        key = java_names.get(name, name.strip().lower())
        if key not in ASSIGNORS:
            raise ValueError(
                f"unknown partition assignment strategy {name!r} "
                f"(known: {', '.join(ASSIGNORS)})"
            )
        out.append(ASSIGNORS[key]())
    if not out:
        raise ValueError("partition.assignment.strategy names no assignor")
    return out


def rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The protocol every configured assignor supports, COOPERATIVE if they all do
    (Kafka's rule)."""
    common = set(assignors[0].protocols)
    for assignor in assignors[1:]:
        common &= set(assignor.protocols)
    if not common:
        raise ValueError("the assignors have no rebalance protocol in common")
    return RebalanceProtocol.COOPERATIVE if RebalanceProtocol.COOPERATIVE in common else (
        RebalanceProtocol.EAGER
    )
