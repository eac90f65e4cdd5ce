"""Server-side partition assignors of KIP-848 consumer groups: `uniform` (balanced and
sticky, Kafka's UniformAssignor) and `range` (co-partitioned ranges per topic, Kafka's
RangeAssignor). Pure functions from the members' subscriptions and the previous target to
the new target."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from uuid import UUID

from logbus.coordinator.group.consumer_group import Assignment, TopicInfo, as_assignment

Subscriptions = Mapping[str, set[str]]
"""member id -> the topic names it subscribes to (existing topics only)."""
Assignor = Callable[[Subscriptions, Mapping[str, TopicInfo], Mapping[str, Assignment]],
                    dict[str, Assignment]]

UNIFORM = "uniform"
RANGE = "range"


def uniform(
    subscriptions: Subscriptions,
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Balanced and sticky: each member keeps what it had up to its fair share, and the
    rest goes to the least loaded subscribed member. With identical subscriptions the
    counts differ by at most one."""
    members = sorted(subscriptions)
    result: dict[str, list[tuple[UUID, int]]] = {m: [] for m in members}
    if not members:
        return {}
    every = sorted({(topics[t].name, p) for m in members for t in subscriptions[m]
                    for p in range(topics[t].partitions)})
    by_id = {topics[name].topic_id: name for name, _ in every}
    wanted = {(topics[name].topic_id, p) for name, p in every}
    homogeneous = len({frozenset(s) for s in subscriptions.values()}) == 1
    quota, extra = divmod(len(every), len(members))
    taken: set[tuple[UUID, int]] = set()
    # Members that had the most keep the extra slots, so fewer partitions move.
    for member in sorted(members, key=lambda m: (-_count(previous.get(m, {})), m)):
        cap = quota + (1 if extra > 0 else 0)
        kept = 0
        for topic_id, parts in sorted(previous.get(member, {}).items(),
                                      key=lambda kv: by_id.get(kv[0], "")):
            name = by_id.get(topic_id)
            if name is None or name not in subscriptions[member]:
                continue
            for p in sorted(parts):
                tp = (topic_id, p)
                if tp in wanted and tp not in taken and (kept < cap or not homogeneous):
                    result[member].append(tp)
                    taken.add(tp)
                    kept += 1
        if homogeneous and kept > quota and extra > 0:
            extra -= 1
    for name, p in every:
        tp = (topics[name].topic_id, p)
        if tp in taken:
            continue
        candidates = [m for m in members if name in subscriptions[m]]
        chosen = min(candidates, key=lambda m: (len(result[m]), m))
        result[chosen].append(tp)
        taken.add(tp)
    if not homogeneous:
        _rebalance_heterogeneous(result, subscriptions, by_id)
    return {m: as_assignment(tps) for m, tps in result.items()}


def _rebalance_heterogeneous(
    result: dict[str, list[tuple[UUID, int]]],
    subscriptions: Subscriptions,
    by_id: Mapping[UUID, str],
) -> None:
    """Move partitions from the most to the least loaded member that may take them, until
    no move narrows the gap (stickiness kept at most one partition above a fair share)."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(result, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[giver], key=lambda x: (by_id[x[0]], x[1])):
                takers = [m for m in result if by_id[tp[0]] in subscriptions[m]
                          and len(result[m]) + 1 < len(result[giver])]
                if takers:
                    taker = min(takers, key=lambda m: (len(result[m]), m))
                    result[giver].remove(tp)
                    result[taker].append(tp)
                    moved = True
                    break
            if moved:
                break


def _count(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())


def range_(
    subscriptions: Subscriptions,
    topics: Mapping[str, TopicInfo],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Per topic, its subscribers sorted by member id get contiguous ranges; the first
    `partitions % subscribers` get one more. Members with the same subscriptions get the
    same partition numbers of every topic (joins stay co-partitioned)."""
    result: dict[str, list[tuple[UUID, int]]] = {m: [] for m in subscriptions}
    names = sorted({t for s in subscriptions.values() for t in s})
    for name in names:
        info = topics[name]
        subscribers = sorted(m for m, s in subscriptions.items() if name in s)
        quota, extra = divmod(info.partitions, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            result[member].extend((info.topic_id, p) for p in range(start, start + size))
            start += size
    return {m: as_assignment(tps) for m, tps in result.items()}


ASSIGNORS: dict[str, Assignor] = {UNIFORM: uniform, RANGE: range_}
