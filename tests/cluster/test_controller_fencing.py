"""Controller fencing with in-process controllers on a real ZooKeeper: a controller whose
`/controller_epoch` moved on (another one won while it was paused) cannot write partition
state any more and resigns; only the active controller acts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from zk_cluster import wait_for

from logbus.controller.broker_registration import BrokerRegistration
from logbus.controller.cluster_controller import ClusterController
from logbus.controller.cluster_metadata import BrokerInfo, EndPoint, TopicMetadata
from logbus.controller.controller import NewTopic
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.zookeeper_store import ZooKeeperStore
from logbus.protocol import ErrorCode


class RecordingChannel:
    """The controller's channel, recording what it would send."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def set_controller(self, controller_id: int, epoch: int) -> None:
        self.sent.append(("controller", (controller_id, epoch)))

    def add_broker(self, info: BrokerInfo, epoch: int) -> None:
        self.sent.append(("add", (info.broker_id, epoch)))

    def remove_broker(self, broker_id: int) -> None:
        self.sent.append(("remove", broker_id))

    def send_leader_and_isr(self, broker_id: int, topic: TopicMetadata, parts: list[int]) -> None:
        self.sent.append(("leader_and_isr", (broker_id, topic.name, list(parts))))

    def send_update_metadata(self, brokers: list[BrokerInfo], topics: Any, deleted: Any) -> None:
        self.sent.append(("update_metadata", sorted(b.broker_id for b in brokers)))

    def send_stop_replica(self, broker_id: int, topic: str, parts: list[int], delete: bool) -> None:
        self.sent.append(("stop_replica", (broker_id, topic)))


class Member:
    """One broker's controller side: its session, registration and controller thread."""

    def __init__(self, zk_connect: str, broker_id: int) -> None:
        self.store = ZooKeeperStore(zk_connect, 4000, 10_000)
        endpoint = EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
        self.registration = BrokerRegistration(self.store, broker_id, [endpoint], None)
        self.registration.register()
        self.events = ControllerEventManager()
        self.channel = RecordingChannel()
        info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
        self.controller = ClusterController(
            self.store, self.channel, info, self.events, self.registration
        )
        self.events.start()
        self.controller.startup()

    def call(self, action: Any) -> Any:
        return self.events.submit(action).result(30)

    def close(self) -> None:
        self.events.stop()
        self.store.close()


@pytest.fixture
def members(zk_connect: str) -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for member in made:
        member.close()


def state(store: ZooKeeperStore, topic: str, p: int) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(
        store.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0]
    )
    return value


def test_only_one_controller_acts_and_the_next_bumps_the_epoch(
    zk_connect: str, members: list[Member]
) -> None:
    first = Member(zk_connect, 1)
    members.append(first)
    wait_for(lambda: first.controller.active, 30, "broker 1 to become controller")
    second = Member(zk_connect, 2)
    members.append(second)
    wait_for(lambda: 2 in first.controller.brokers, 30, "the controller to see broker 2")
    assert not second.controller.active
    assert first.call(lambda: first.controller.create_topic(NewTopic("t", 2, 2, {}, {}))).error == (
        ErrorCode.NONE
    )
    # the inactive controller elected nothing and sent nothing
    assert second.channel.sent == []
    epoch = first.controller.epoch
    first.close()  # its session ends: /controller and /brokers/ids/1 vanish
    members.remove(first)
    wait_for(lambda: second.controller.active, 30, "broker 2 to take over")
    assert second.controller.epoch == epoch + 1
    assert int(second.store.get("/controller_epoch")[0]) == epoch + 1
    # broker 1 is gone: broker 2 leads every partition, broker 1 left the ISR (the new
    # controller writes that after it became active)
    wait_for(
        lambda: all(state(second.store, "t", p)["isr"] == [2] for p in (0, 1)),
        30,
        "broker 1 to leave the ISR of t",
    )
    for p in (0, 1):
        after = state(second.store, "t", p)
        assert (after["leader"], after["isr"]) == (2, [2])
        assert after["controller_epoch"] == epoch + 1


def test_a_zombie_controller_cannot_write_and_resigns(
    zk_connect: str, members: list[Member]
) -> None:
    zombie = Member(zk_connect, 1)
    members.append(zombie)
    wait_for(lambda: zombie.controller.active, 30, "broker 1 to become controller")
    follower = Member(zk_connect, 2)
    members.append(follower)
    wait_for(lambda: 2 in zombie.controller.brokers, 30, "the controller to see broker 2")
    topic = NewTopic("z", -1, -1, {0: [1, 2]}, {})
    assert zombie.call(lambda: zombie.controller.create_topic(topic)).error == ErrorCode.NONE
    before = state(follower.store, "z", 0)
    assert before["isr"] == [1, 2]
    # Another controller won meanwhile (as after broker 1's session expired while it was
    # paused, and it has not noticed yet): the epoch node moved on.
    data, version = follower.store.get("/controller_epoch")
    follower.store.set("/controller_epoch", str(int(data) + 1).encode(), version)
    # broker 2 dies: the zombie tries to take it out of the ISR, and may not
    follower.registration.deregister()
    wait_for(lambda: not zombie.controller.active, 30, "the zombie to resign")
    assert state(follower.store, "z", 0) == before
    assert zombie.controller.brokers == {} and zombie.controller.topics == {}
