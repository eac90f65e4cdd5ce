"""The leader isolation guard over a real ReplicaManager, LogManager and MetadataCache (no
sockets): which partitions it steps aside from, what a parked acks=all append and the
broker's metadata then say, and when it leads again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from logbus.controller.cluster_metadata import MetadataCache, PartitionState, TopicMetadata
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.server.metadata_session import MetadataSession
from logbus.server.replica.leader_isolation import LeaderIsolationGuard, likely_successor
from logbus.server.replica.replica_manager import ReplicaManager
from logbus.storage.log_config import LogConfig
from logbus.storage.log_manager import LogManager
from logbus.types import TopicPartition

SILENCE_MS = 4000
TP = TopicPartition("t", 0)
LEADER_STATE = PartitionState(leader=0, leader_epoch=5, isr=(0, 1, 2), replicas=(0, 2, 1),
                              version=3)  # fmt: skip


class Broker:
    """Broker 0's replica manager, metadata cache and guard; `stored` is what the
    controller wrote for t-0 (read by the guard when its session comes back)."""

    def __init__(self, tmp_path: Path) -> None:
        self.logs = LogManager([tmp_path / "logs"], broker_id=0, cluster_id="c")
        self.logs.startup(now_ms=0)
        self.replicas = ReplicaManager(0, self.logs, lambda _t: LogConfig(min_insync_replicas=2))
        self.cache = MetadataCache("c", 1)
        self.session = MetadataSession()
        self.stored: dict[str, Any] | None = None
        self.guard = LeaderIsolationGuard(
            self.replicas, self.cache, self.session, self._read, silence_ms=SILENCE_MS
        )
        self.topic = TopicMetadata("t", uuid.uuid4(), {0: LEADER_STATE})
        self.cache.update_topic(self.topic)
        self.replicas.apply_leader_and_isr(self.topic, [0])

    async def _read(self, _topic: str, _partition: int) -> dict[str, Any] | None:
        return self.stored

    @property
    def part(self) -> Any:
        return self.replicas.partitions[TP]

    def cached_leader(self) -> int:
        return self.cache.topics["t"].partitions[0].leader

    def close(self) -> None:
        self.logs.shutdown()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    b.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def fetched(broker: Broker, replica: int, at_ms: int) -> None:
    part = broker.part
    state = part.follower(replica, True)
    part.update_follower_fetch_state(state, part.log.log_end_offset, 0, at_ms,
                                     part.log.log_end_offset, -1)  # fmt: skip


def test_the_likely_successor_is_the_first_other_isr_member_in_assignment_order() -> None:
    assert likely_successor(LEADER_STATE, 0) == 2
    assert likely_successor(PartitionState(0, 1, (0, 1), (0, 2, 1)), 0) == 1
    assert likely_successor(PartitionState(0, 1, (0,), (0, 2, 1)), 0) == -1


def test_a_leader_whose_followers_fetch_keeps_leading(broker: Broker) -> None:
    now = now_ms()
    fetched(broker, 1, now)
    fetched(broker, 2, now)
    broker.session.mark_lost()
    assert broker.guard.check(now + SILENCE_MS) == []
    assert broker.part.is_leader and broker.cached_leader() == 0


def test_an_isolated_leader_answers_its_parked_appends_and_names_the_successor(
    broker: Broker,
) -> None:
    async def scenario() -> list[Any]:
        batch = memoryview(build_batch([NewRecord(None, b"v", timestamp=0)]))
        waiting = asyncio.ensure_future(
            broker.replicas.append_records(-1, 30_000, [("t", 0, batch)], lambda *_: True)
        )
        await asyncio.sleep(0.05)
        assert not waiting.done()  # parked: the followers have not fetched it
        broker.session.mark_lost()
        assert broker.guard.check(now_ms() + SILENCE_MS + 1) == [TP]
        return await asyncio.wait_for(waiting, 5)

    [result] = asyncio.run(scenario())
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not broker.part.is_leader and broker.part.stepped_aside
    assert broker.cached_leader() == 2
    assert broker.guard.stepped_aside() == [TP]


def test_it_leads_again_when_the_same_session_returns_and_nothing_moved(broker: Broker) -> None:
    broker.session.mark_lost()
    broker.guard.check(now_ms() + SILENCE_MS + 1)
    broker.stored = {"leader": 0, "leader_epoch": 5, "isr": [0, 1], "partition_epoch": 4}

    async def regain() -> None:
        broker.session.mark_held()  # SUSPENDED -> CONNECTED: the same session
        for _ in range(100):
            if broker.part.is_leader:
                return
            await asyncio.sleep(0.01)

    asyncio.run(regain())
    assert broker.part.is_leader and broker.part.isr == (0, 1)
    assert broker.part.partition_epoch == 4
    state = broker.cache.topics["t"].partitions[0]
    assert (state.leader, state.isr, state.version) == (0, (0, 1), 4)


def test_it_waits_for_the_controller_when_the_state_moved_on(broker: Broker) -> None:
    broker.session.mark_lost()
    broker.guard.check(now_ms() + SILENCE_MS + 1)
    broker.stored = {"leader": 2, "leader_epoch": 6, "isr": [2, 1], "partition_epoch": 4}

    async def regain() -> None:
        broker.session.mark_held()
        await asyncio.sleep(0.1)

    asyncio.run(regain())
    assert not broker.guard.resume_if_current(TP, broker.stored)
    assert not broker.part.is_leader
    # the controller's LeaderAndIsr settles it: a follower of the new leader
    topic = TopicMetadata("t", broker.topic.topic_id,
                          {0: PartitionState(2, 6, (2, 1), (0, 2, 1), version=4)})  # fmt: skip
    broker.replicas.apply_leader_and_isr(topic, [0])
    assert not broker.part.stepped_aside and broker.part.leader_id == 2


def test_after_an_expiry_only_the_controller_decides(broker: Broker) -> None:
    broker.session.mark_lost(expired=True)
    broker.guard.check(now_ms() + SILENCE_MS + 1)
    broker.stored = {"leader": 0, "leader_epoch": 5, "isr": [0, 1, 2], "partition_epoch": 3}

    async def regain() -> None:
        broker.session.mark_held()
        await asyncio.sleep(0.1)

    asyncio.run(regain())
    assert broker.part.stepped_aside  # a new session: a LeaderAndIsr will come
