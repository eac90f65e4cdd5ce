"""KIP-848 consumer-group members of confluent-kafka (`group.protocol=consumer`) run in
threads, and the ownership log their rebalance callbacks write, shared by the compat and
cluster suites."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError


class Ownership:
    """Every member's assign, revoke and lost callbacks in one ordered log: a partition
    handed to a member while another still holds it is a violation, unless the holder
    then reports it lost. A member the coordinator fenced (its session expired, say while
    the coordinator moved) loses its partitions at once, as in Kafka, and learns so only at
    its next heartbeat."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.confirmed: list[str] = []
        self.pending: dict[tuple[int, str], str] = {}
        """Overlaps waiting for the holder's word: lost excuses them, revoked confirms."""
        self.phase = 0
        self.revoked_in_phase: dict[tuple[int, str], set[int]] = {}
        self.taken_back: dict[tuple[int, str], set[int]] = {}
        """Partitions revoked from a member and given back to it within one change: a
        member that keeps a partition must never have stopped consuming it."""
        self.events: list[tuple[int, str, str, tuple[int, ...]]] = []
        """(phase, member, assigned/revoked/lost, partitions): what a failure shows."""

    def history_of(
        self, members: Iterable[tuple[int, str] | str]
    ) -> list[tuple[int, str, str, tuple[int, ...]]]:
        """The callbacks of these members (or of the members of `taken_back`'s keys)."""
        names = {m[1] if isinstance(m, tuple) else m for m in members}
        with self.lock:
            return [e for e in self.events if e[1] in names]

    @property
    def violations(self) -> list[str]:
        with self.lock:
            return [*self.confirmed, *self.pending.values()]

    def assigned(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            self.events.append((self.phase, member, "assigned", tuple(partitions)))
            for p in partitions:
                holder = self.owner.get(p)
                if holder is not None and holder != member:
                    self.pending[(p, holder)] = f"p{p} given to {member} while {holder} owns it"
                self.owner[p] = member
                if p in self.revoked_in_phase.get((self.phase, member), set()):
                    self.taken_back.setdefault((self.phase, member), set()).add(p)

    def revoked(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            self.events.append((self.phase, member, "revoked", tuple(partitions)))
            for p in partitions:
                if (p, member) in self.pending:
                    self.confirmed.append(self.pending.pop((p, member)))
                if self.owner.get(p) == member:
                    del self.owner[p]
            self.revoked_in_phase.setdefault((self.phase, member), set()).update(partitions)

    def lost(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            self.events.append((self.phase, member, "lost", tuple(partitions)))
            for p in partitions:
                self.pending.pop((p, member), None)
                if self.owner.get(p) == member:
                    del self.owner[p]
            self.revoked_in_phase.setdefault((self.phase, member), set()).update(partitions)

    def next_phase(self) -> None:
        with self.lock:
            self.phase += 1


class ConsumerProtocolMember(threading.Thread):
    """A confluent-kafka consumer with group.protocol=consumer, polled in its own thread
    until `stop()`; `consumed` keeps every record it polled (topic, partition, offset,
    value), `assignment` what it owned at its last poll."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, ownership: Ownership | None = None,
        **config: Any,
    ) -> None:
        self.member_name = f"member-{uuid.uuid4().hex[:6]}"
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 200,
                "client.id": self.member_name,
                **config,
            }
        )
        self._owned: frozenset[int] = frozenset()
        log = ownership

        def on_assign(_c: Any, partitions: list[Any]) -> None:
            if log is not None:
                log.assigned(self.member_name, [p.partition for p in partitions])

        def on_revoke(_c: Any, partitions: list[Any]) -> None:
            if log is not None:
                log.revoked(self.member_name, [p.partition for p in partitions])

        def on_lost(_c: Any, partitions: list[Any]) -> None:
            if log is not None:
                log.lost(self.member_name, [p.partition for p in partitions])

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke,
                                on_lost=on_lost)
        super().__init__(daemon=True)
        self.consumed: list[tuple[str, int, int, bytes]] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            while not self._stop_requested.is_set():
                self._poll_once()
        except BaseException as exc:  # reported by the test thread
            self.error = exc
        finally:
            self.consumer.close()

    def _poll_once(self) -> None:
        msg = self.consumer.poll(0.1)
        # Only the polling thread touches the handle.
        self._owned = frozenset(p.partition for p in self.consumer.assignment())
        if msg is None:
            return
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                return
            raise AssertionError(msg.error())
        with self._lock:
            self.consumed.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    def received(self) -> list[bytes]:
        with self._lock:
            return [value for *_, value in self.consumed]

    def records(self) -> list[tuple[str, int, int, bytes]]:
        with self._lock:
            return list(self.consumed)

    def stop(self) -> None:
        """Close the consumer (it leaves the group) and re-raise what its thread hit."""
        self._stop_requested.set()
        self.join(30)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error

    @property
    def assignment(self) -> set[int]:
        return set(self._owned)
