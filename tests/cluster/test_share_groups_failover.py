"""Share groups (KIP-932) on three `logbus server start` processes: four ShareConsumers (two
of confluent-kafka, two of logbus) read one partition (rf=3, `__share_group_state` rf=3)
while it is written, and its leader is killed (kill -9) half-way. The new leader reads the
partition's delivery state back from the share coordinator: records that were in flight
are delivered again, records whose acknowledgement the broker confirmed are never
delivered again, and in the end every record is acknowledged.

The oracle is the clients' acknowledgement-commit callback: it reports the offsets the
broker accepted. A delivery of an offset after that report would be a lost acknowledgement.
An acknowledgement in flight when the leader dies has an unknown outcome: its offsets must
either be delivered again (and then acknowledged) or never again (the broker applied it).
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import cluster_processes
import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import KafkaError, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from fault_checks import wait_isr

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect

TOPIC = "queue"
GROUP = "workers"
RECORDS = 600


# Errors of an acknowledgement whose request got no answer (the leader died with it in
# flight): the broker may have applied it or not.
UNANSWERED = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError.NETWORK_EXCEPTION})


def unanswered(error: object) -> bool:
    if isinstance(error, logbus.KafkaConnectionError):
        return True
    code = getattr(error, "code", None)
    return callable(code) and code() in UNANSWERED


class Journal:
    """What the members saw, in one order: deliveries, confirmed acknowledgements, and
    acknowledgements whose outcome is unknown (their request got no answer)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clock = itertools.count()
        self.deliveries: dict[int, list[int]] = {}
        self.confirmed: dict[int, int] = {}
        self.unknown: dict[int, int] = {}
        self.failed_commits = 0

    def delivered(self, offset: int) -> None:
        with self.lock:
            self.deliveries.setdefault(offset, []).append(next(self.clock))

    def acknowledged(self, offsets: dict[Any, set[int]], error: object) -> None:
        with self.lock:
            now = next(self.clock)
            if error is not None:
                self.failed_commits += 1
                if unanswered(error):
                    for found in offsets.values():
                        self.unknown.update(dict.fromkeys(found, now))
                return
            for found in offsets.values():
                for offset in found:
                    self.confirmed.setdefault(offset, now)

    def settled(self) -> set[int]:
        """Offsets acknowledged for sure, and those whose last acknowledgement got no
        answer and that were not delivered again since (the broker applied it)."""
        with self.lock:
            return set(self.confirmed) | {
                offset for offset, at in self.unknown.items()
                if not any(t > at for t in self.deliveries.get(offset, []))
            }

    def count_confirmed(self) -> int:
        with self.lock:
            return len(self.confirmed)

    def redelivered_after_confirmation(self) -> dict[int, list[int]]:
        with self.lock:
            return {
                offset: times
                for offset, confirmed_at in self.confirmed.items()
                if any(t > confirmed_at for t in self.deliveries.get(offset, []))
                for times in [self.deliveries[offset]]
            }


class Member(threading.Thread):
    """A ShareConsumer in implicit mode on its own thread."""

    def __init__(self, bootstrap: str, journal: Journal) -> None:
        super().__init__(daemon=True)
        self.consumer = ShareConsumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "socket.timeout.ms": 10000,
        })
        self.consumer.set_acknowledgement_commit_callback(journal.acknowledged)
        self.consumer.subscribe([TOPIC])
        self.journal = journal
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for message in self.consumer.poll(0.5) or []:
                if message.error() is None:
                    self.journal.delivered(message.offset())
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


class LogbusMember(threading.Thread):
    """A logbus ShareConsumer in implicit mode on its own thread."""

    def __init__(self, bootstrap: str, journal: Journal) -> None:
        super().__init__(daemon=True)
        # small polls, so its records are still in flight when the leader dies
        self.consumer = logbus.ShareConsumer(
            bootstrap_servers=bootstrap, group_id=GROUP, request_timeout_ms=10000,
            max_poll_records=50,
        )
        self.consumer.set_acknowledgement_commit_callback(journal.acknowledged)
        self.consumer.subscribe([TOPIC])
        self.journal = journal
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for record in self.consumer.poll(0.5):
                self.journal.delivered(record.offset)
                time.sleep(0.002)  # a little work per record
        self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def earliest(bootstrap: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP, GROUP,
        incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET,
        )],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer comes
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


class Feeder(threading.Thread):
    """Writes the records a few at a time while the members read (idempotent, so a retry
    across the leader's kill writes no record twice): every member has records in flight
    when the leader dies."""

    def __init__(self, bootstrap: str, count: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
        )
        self.count = count
        self.unflushed = -1
        self.start()

    def run(self) -> None:
        for i in range(self.count):
            self.producer.produce(TOPIC, b"job-%d" % i)
            if i % 10 == 9:
                self.producer.poll(0)
                time.sleep(0.1)
        self.unflushed = self.producer.flush(90)


@pytest.mark.timeout(300)
def test_share_group_survives_the_leaders_kill(zk_connect: str, tmp_path: Path) -> None:
    with ProcessCluster(
        zk_connect, 3, tmp_path,
        min_insync_replicas="2",
        share_coordinator_state_topic_replication_factor="3",
        share_coordinator_state_topic_num_partitions="3",
    ) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        wait_isr(cluster, TOPIC, 1)
        earliest(cluster.bootstrap)
        journal = Journal()
        members: list[Member | LogbusMember] = [
            Member(cluster.bootstrap, journal), Member(cluster.bootstrap, journal),
            LogbusMember(cluster.bootstrap, journal), LogbusMember(cluster.bootstrap, journal),
        ]
        feeder = Feeder(cluster.bootstrap, RECORDS)
        try:
            cluster.wait_for(
                lambda: journal.count_confirmed() >= RECORDS // 4, 120,
                "a quarter of the records acknowledged",
            )
            leader = cluster.leader_of(TOPIC, 0)
            cluster.kill(leader)
            cluster.wait_for(
                lambda: cluster.leader_of(TOPIC, 0) not in (-1, leader), 60, "a new leader"
            )
            cluster.wait_for(
                lambda: len(journal.settled()) == RECORDS, 180, "every record acknowledged"
            )
        finally:
            feeder.join(120)
            for member in members:
                member.stop()
    assert feeder.unflushed == 0
    assert journal.settled() == set(range(RECORDS))
    assert journal.redelivered_after_confirmation() == {}
