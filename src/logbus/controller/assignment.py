"""Replica assignment of new partitions, as Kafka's `AdminUtils` computes it.

Without racks: leaders round-robin from a random broker, followers shifted so that the
replicas of one broker's partitions spread over the others. When every live broker has a
`broker.rack`: the brokers are ordered alternating between racks, and each partition's
followers are placed in racks without a replica of that partition first (and on brokers
without one), so a rack failure leaves every partition a replica.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from logbus.protocol import ErrorCode


class ControllerError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def check_replication_factor(replication_factor: int, live_brokers: int) -> None:
    """INVALID_REPLICATION_FACTOR when there are fewer live brokers than replicas."""
    if replication_factor > live_brokers:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{live_brokers}.",
        )


def assign_replicas(
    brokers: list[int],
    partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    start_index: int | None = None,
    racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """The replicas of partitions `first_partition ..`; rack-aware when every broker
    has a rack, an error when only some have one (as Kafka's assignment)."""
    check_replication_factor(replication_factor, len(brokers))
    known = {b: r for b, r in (racks or {}).items() if r is not None and b in brokers}
    if known and len(known) != len(brokers):
        raise ControllerError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    if known:
        return _rack_aware(known, partitions, replication_factor, first_partition, start_index)
    return _rack_unaware(brokers, partitions, replication_factor, first_partition, start_index)


def _replica_index(first: int, second_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_shift + index) % (n - 1)
    return (first + shift) % n


def _rack_unaware(
    brokers: list[int],
    partitions: int,
    replication_factor: int,
    first_partition: int,
    start_index: int | None,
) -> dict[int, list[int]]:
    ordered = sorted(brokers)
    n = len(ordered)
    start = random.randrange(n) if start_index is None else start_index
    shift = random.randrange(n) if start_index is None else start_index
    out: dict[int, list[int]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[_replica_index(first, shift, j, n)] if n > 1 else ordered[0])
        out[p] = replicas
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (racks sorted, brokers sorted within one)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    names = sorted(by_rack)
    iterators = {name: iter(by_rack[name]) for name in names}
    out: list[int] = []
    index = 0
    while len(out) < len(racks):
        nxt = next(iterators[names[index]], None)
        if nxt is not None:
            out.append(nxt)
        index = (index + 1) % len(names)
    return out


def _rack_aware(
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    first_partition: int,
    start_index: int | None,
) -> dict[int, list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start = random.randrange(n) if start_index is None else start_index
    shift = random.randrange(n) if start_index is None else start_index
    out: dict[int, list[int]] = {}
    for i in range(partitions):
        p = max(0, first_partition) + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {racks[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                if (rack not in racks_with or len(racks_with) == num_racks) and (
                    broker not in brokers_with or len(brokers_with) == n
                ):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[p] = replicas
    return out
