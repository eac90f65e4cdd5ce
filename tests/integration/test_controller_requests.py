"""The controller's requests over the wire: `NetworkChannel` sends LeaderAndIsr,
UpdateMetadata and StopReplica to real brokers (in this process, each stand-alone with
its own broker.id), and their effect is checked through real clients: confluent-kafka's
metadata and producer, logbus's DescribeCluster, the log directories on disk. Fencing:
an older controller epoch, an older broker epoch and a leader epoch that is not newer are
refused with Kafka's codes and change nothing."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from wire import run

from brokers import RunningBroker
from kafka_wire import WireClient, wait_for
from logbus.client.connection import Connection
from logbus.client.loop_thread import LoopThread
from logbus.client.metadata import ClusterMetadata
from logbus.client.requests.cluster import describe_cluster
from logbus.client.requests.controller import (
    ControlHeader,
    ControlResult,
    build_leader_and_isr,
    build_stop_replica,
    build_update_metadata,
    read_leader_and_isr,
    read_stop_replica,
    stop_replica,
)
from logbus.client.requests.metadata import metadata
from logbus.controller.cluster_metadata import BrokerInfo, EndPoint, PartitionState, TopicMetadata
from logbus.controller.network_channel import NetworkChannel
from logbus.protocol import ApiKey, ErrorCode

pytestmark = pytest.mark.timeout(120)

TOPIC = "wired"
EPOCH = 10  # above the epochs the stand-alone brokers' own controllers reach


class Responses:
    """What the channel's brokers answered, in order (filled on the channel's loop)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.items: list[tuple[int, ApiKey, ControlResult]] = []

    def __call__(self, broker_id: int, api_key: ApiKey, result: ControlResult) -> None:
        with self._lock:
            self.items.append((broker_id, api_key, result))
            self._lock.notify_all()

    def next(self, broker_id: int, api_key: ApiKey, timeout: float = 30) -> ControlResult:
        """The first answer of `broker_id` to `api_key` not taken yet."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for i, (b, key, result) in enumerate(self.items):
                    if b == broker_id and key == api_key:
                        del self.items[i]
                        return result
                left = deadline - time.monotonic()
                assert left > 0, f"no {api_key.name} answer from broker {broker_id}"
                self._lock.wait(left)


@pytest.fixture
def channel() -> Iterator[tuple[NetworkChannel, Responses]]:
    loop = LoopThread()
    responses = Responses()
    net = NetworkChannel(
        loop.loop, on_response=responses, retry_backoff=0.02, max_retry_backoff=0.2
    )
    yield net, responses
    loop.run(net.close())
    loop.close()


@pytest.fixture
def brokers(broker_factory: Any) -> tuple[RunningBroker, RunningBroker]:
    first = broker_factory(broker_id="1", log_segment_delete_delay_ms="0")
    second = broker_factory(broker_id="2", log_segment_delete_delay_ms="0")
    return first, second


def info(running: RunningBroker) -> BrokerInfo:
    return BrokerInfo(int(running.overrides.get("broker.id", "0")), "127.0.0.1", running.port)


def topic(
    partitions: dict[int, PartitionState], topic_id: uuid.UUID | None = None
) -> TopicMetadata:
    return TopicMetadata(TOPIC, topic_id or TOPIC_ID, partitions)


TOPIC_ID = uuid.uuid4()
# partition 0 led by broker 1 alone; partition 1 led by broker 2, broker 1 in its ISR
LED_BY_1 = PartitionState(1, 3, (1,), (1,), EPOCH, 4)
LED_BY_2 = PartitionState(2, 6, (2, 1), (2, 1), EPOCH, 9)


def cluster_metadata(bootstrap: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(timeout=30)


def broker_view(running: RunningBroker) -> ClusterMetadata:
    """What this one broker answers to Metadata (a client such as librdkafka may send its
    metadata requests to any broker it has learned of)."""

    async def every_topic(conn: Connection) -> ClusterMetadata:
        return await metadata(conn, None)

    return run(running.bootstrap, every_topic)


def setup_cluster(
    net: NetworkChannel, responses: Responses, first: RunningBroker, second: RunningBroker
) -> None:
    """Broker 1 leads partition 0; both brokers learn the topic and broker 1 as controller."""
    net.set_controller(1, EPOCH)
    net.add_broker(info(first), -1)
    net.add_broker(info(second), -1)
    net.send_leader_and_isr(1, topic({0: LED_BY_1, 1: LED_BY_2}), [0])
    result = responses.next(1, ApiKey.LEADER_AND_ISR)
    assert result.error == ErrorCode.NONE and result.partitions == {(TOPIC, 0): ErrorCode.NONE}
    net.send_update_metadata([info(first), info(second)], [topic({0: LED_BY_1, 1: LED_BY_2})], [])
    for broker_id in (1, 2):
        assert responses.next(broker_id, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE


def test_update_metadata_is_what_clients_see(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    setup_cluster(net, responses, first, second)
    for running in brokers:
        md = cluster_metadata(running.bootstrap)
        assert md.controller_id == 1
        assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
            1: ("127.0.0.1", first.port),
            2: ("127.0.0.1", second.port),
        }
        parts = md.topics[TOPIC].partitions
        assert (parts[0].leader, parts[0].replicas, parts[0].isrs) == (1, [1], [1])
        assert (parts[1].leader, parts[1].replicas, parts[1].isrs) == (2, [2, 1], [2, 1])
        described = run(running.bootstrap, describe_cluster)
        assert described.controller_id == 1
    # A leadership change of one partition leaves the other as it was.
    moved = PartitionState(1, 7, (1,), (2, 1), EPOCH, 10)
    net.send_update_metadata([info(first), info(second)], [topic({1: moved})], [])
    assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert responses.next(1, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    parts = cluster_metadata(second.bootstrap).topics[TOPIC].partitions
    assert (parts[0].leader, parts[1].leader, parts[1].isrs) == (1, 1, [1])


def test_leader_and_isr_makes_a_broker_leader_that_producers_write_to(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    setup_cluster(net, responses, first, second)
    assert (Path(first.data_dir) / f"{TOPIC}-0").is_dir()
    assert not (Path(second.data_dir) / f"{TOPIC}-0").exists()
    delivered: list[tuple[Any, int]] = []
    # bootstrapped through broker 2, which only knows that broker 1 leads the partition
    producer = Producer({"bootstrap.servers": second.bootstrap, "acks": "all"})
    for i in range(3):
        producer.produce(
            TOPIC,
            f"v{i}".encode(),
            partition=0,
            on_delivery=lambda e, m: delivered.append((e, m.offset())),
        )
    assert producer.flush(30) == 0
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    # (through broker 1: broker 2's own stand-alone controller would announce only itself
    # as a live broker if the consumer's group made it create __consumer_offsets)
    consumer = Consumer(
        {"bootstrap.servers": first.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([CTopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [b"v0", b"v1", b"v2"]
    finally:
        consumer.close()


def test_an_older_controller_epoch_is_refused_and_changes_nothing(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    setup_cluster(net, responses, first, second)
    net.set_controller(2, EPOCH - 1)  # a deposed controller
    deposed = topic({0: PartitionState(2, 8, (2,), (1, 2), EPOCH - 1, 5)})
    net.send_leader_and_isr(1, deposed, [0])
    result = responses.next(1, ApiKey.LEADER_AND_ISR)
    assert result.error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert result.partitions == {(TOPIC, 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    net.send_update_metadata([info(second)], [deposed], [])
    net.send_stop_replica(1, TOPIC, [0], True)
    for broker_id in (1, 2):
        refused = responses.next(broker_id, ApiKey.UPDATE_METADATA)
        assert refused.error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert responses.next(1, ApiKey.STOP_REPLICA).error == ErrorCode.STALE_CONTROLLER_EPOCH
    for running in brokers:
        md = cluster_metadata(running.bootstrap)
        assert md.controller_id == 1 and set(md.brokers) == {1, 2}
        assert md.topics[TOPIC].partitions[0].leader == 1
    assert first.broker is not None
    assert first.broker.services.controller_link.controller_epoch == EPOCH
    part = first.broker.replica_manager.partition(TOPIC, 0)  # type: ignore[union-attr]
    assert part is not None and part.is_leader and part.leader_epoch == 3
    assert (Path(first.data_dir) / f"{TOPIC}-0").is_dir()
    # a newer controller is obeyed, and becomes the newest seen
    net.set_controller(2, EPOCH + 1)
    net.send_update_metadata([info(first), info(second)], [], [])
    assert responses.next(1, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert cluster_metadata(first.bootstrap).controller_id == 2
    assert first.broker.services.controller_link.controller_epoch == EPOCH + 1


def test_an_older_broker_epoch_is_refused(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    assert second.broker is not None
    second.broker.services.controller_link.registered(500)
    net.set_controller(1, EPOCH)
    net.add_broker(info(second), 499)  # a request meant for the previous incarnation
    net.send_leader_and_isr(2, topic({0: LED_BY_2}), [0])
    result = responses.next(2, ApiKey.LEADER_AND_ISR)
    assert result.error == ErrorCode.STALE_BROKER_EPOCH
    assert result.partitions == {(TOPIC, 0): ErrorCode.STALE_BROKER_EPOCH}
    net.send_update_metadata([info(first), info(second)], [topic({0: LED_BY_2})], [])
    assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.STALE_BROKER_EPOCH
    net.send_stop_replica(2, TOPIC, [0], False)
    assert responses.next(2, ApiKey.STOP_REPLICA).error == ErrorCode.STALE_BROKER_EPOCH
    assert second.broker.replica_manager.partition(TOPIC, 0) is None  # type: ignore[union-attr]
    assert TOPIC not in broker_view(second).topics
    # a refused request teaches nothing
    assert second.broker.services.controller_link.controller_epoch < EPOCH
    # the current epoch is obeyed; so is a newer one (the controller may learn of a new
    # registration before the broker does)
    for epoch in (500, 501):
        net.add_broker(info(second), epoch)
        net.send_update_metadata([info(first), info(second)], [topic({0: LED_BY_2})], [])
        assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert broker_view(second).topics[TOPIC].partitions[0].leader == 2


def test_a_leader_epoch_that_is_not_newer_is_refused_per_partition(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    setup_cluster(net, responses, first, second)  # broker 1 leads partition 0 at epoch 3
    other = TopicMetadata("other", uuid.uuid4(), {0: PartitionState(1, 0, (1,), (1,))})
    older = topic({0: PartitionState(1, 2, (1,), (1,), EPOCH, 3)})
    for stale in (older, topic({0: LED_BY_1})):  # an older epoch, then the same one
        net.send_leader_and_isr(1, stale, [0])
        # Kafka's ReplicaManager answers STALE_CONTROLLER_EPOCH for such a partition
        assert responses.next(1, ApiKey.LEADER_AND_ISR).partitions == {
            (TOPIC, 0): ErrorCode.STALE_CONTROLLER_EPOCH
        }
    net.send_leader_and_isr(1, other, [0])  # other partitions are not held back
    assert responses.next(1, ApiKey.LEADER_AND_ISR).partitions == {("other", 0): ErrorCode.NONE}
    assert first.broker is not None and first.broker.replica_manager is not None
    part = first.broker.replica_manager.partition(TOPIC, 0)
    assert part is not None and part.leader_epoch == 3
    # not a replica of the partition: UNKNOWN_TOPIC_OR_PARTITION
    net.send_leader_and_isr(1, topic({5: PartitionState(2, 1, (2,), (2,))}), [5])
    assert responses.next(1, ApiKey.LEADER_AND_ISR).partitions == {
        (TOPIC, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    }
    # another topic id for a partition this broker has: INCONSISTENT_TOPIC_ID
    net.send_leader_and_isr(1, topic({0: PartitionState(1, 9, (1,), (1,))}, uuid.uuid4()), [0])
    assert responses.next(1, ApiKey.LEADER_AND_ISR).partitions == {
        (TOPIC, 0): ErrorCode.INCONSISTENT_TOPIC_ID
    }
    # StopReplica with a leader epoch that is not newer: FENCED_LEADER_EPOCH, still hosted
    header = ControlHeader(1, EPOCH)

    async def stop(conn: Connection) -> ControlResult:
        return await stop_replica(conn, header, {TOPIC: [(0, 3)]}, False)

    assert run(first.bootstrap, stop).partitions == {(TOPIC, 0): ErrorCode.FENCED_LEADER_EPOCH}
    assert first.broker.replica_manager.partition(TOPIC, 0) is part
    # a newer leader epoch is applied
    net.send_leader_and_isr(1, topic({0: PartitionState(1, 4, (1,), (1,))}), [0])
    assert responses.next(1, ApiKey.LEADER_AND_ISR).partitions == {(TOPIC, 0): ErrorCode.NONE}
    assert part.leader_epoch == 4


def test_stop_replica_with_delete_removes_the_log_directory(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    setup_cluster(net, responses, first, second)
    log_dir = Path(first.data_dir) / f"{TOPIC}-0"
    assert log_dir.is_dir()
    net.send_stop_replica(1, TOPIC, [0], True)
    assert responses.next(1, ApiKey.STOP_REPLICA).partitions == {(TOPIC, 0): ErrorCode.NONE}
    assert not log_dir.exists()
    assert first.broker is not None and first.broker.replica_manager is not None
    assert first.broker.replica_manager.partition(TOPIC, 0) is None
    wait_for(
        lambda: not any(p.name.startswith(f"{TOPIC}-0") for p in Path(first.data_dir).iterdir()),
        what="the renamed log directory to be removed",
    )
    # the deletion reaches every broker's metadata: partitions led by -2 are forgotten
    net.send_update_metadata([info(first), info(second)], [], [TOPIC])
    for broker_id in (1, 2):
        assert responses.next(broker_id, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    for running in brokers:
        assert TOPIC not in cluster_metadata(running.bootstrap).topics


def test_requests_wait_for_a_broker_that_is_down(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    net.set_controller(1, EPOCH)
    net.add_broker(info(second), -1)
    second.stop()
    net.send_update_metadata([info(first), info(second)], [topic({0: LED_BY_2})], [])
    time.sleep(0.5)  # a few failed attempts
    second.start()  # on the same port
    assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert broker_view(second).topics[TOPIC].partitions[0].leader == 2


def test_a_removed_broker_gets_nothing_more(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    net.set_controller(1, EPOCH)
    unreachable = BrokerInfo(3, "127.0.0.1", 1)  # nothing listens: retried until removed
    net.add_broker(unreachable, -1)
    net.add_broker(info(first), -1)
    net.send_update_metadata([info(first)], [topic({0: LED_BY_1})], [])
    assert responses.next(1, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    net.remove_broker(3)
    net.remove_broker(1)
    net.send_update_metadata([], [], [TOPIC])  # to no one
    net.add_broker(info(second), -1)
    net.send_update_metadata([info(second)], [], [])
    assert responses.next(2, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    assert [b for b, _, _ in responses.items] == []
    assert TOPIC in broker_view(first).topics


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.LEADER_AND_ISR, 7),
        (ApiKey.UPDATE_METADATA, 8),
        (ApiKey.STOP_REPLICA, 4),
        (ApiKey.LEADER_AND_ISR, 1),
        (ApiKey.UPDATE_METADATA, 0),
    ],
)
def test_a_malformed_body_closes_the_connection(
    broker: RunningBroker, api_key: ApiKey, version: int
) -> None:
    flexible = version >= {ApiKey.LEADER_AND_ISR: 4, ApiKey.UPDATE_METADATA: 6}.get(api_key, 2)
    header = struct.pack(">hhih", api_key, version, 3, 3) + b"bad" + (b"\x00" if flexible else b"")
    # a controller id and epoch, then an array claiming 2**30 entries, then nothing
    body = header + b"\x00\x00\x00\x01\x00\x00\x00\x00" + b"\x40\x00\x00\x00"
    with WireClient(broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">i", len(body)) + body)
        assert conn.wait_closed(5.0), "the broker kept the connection open"
    assert TOPIC not in broker_view(broker).topics


def test_api_versions_advertise_the_controller_requests(broker: RunningBroker) -> None:
    async def versions(conn: Connection) -> dict[int, tuple[int, int]]:
        return conn.api_versions

    ranges = run(broker.bootstrap, versions)
    assert ranges[ApiKey.LEADER_AND_ISR] == (0, 7)
    assert ranges[ApiKey.STOP_REPLICA] == (0, 4)
    assert ranges[ApiKey.UPDATE_METADATA] == (0, 8)


def test_requests_from_the_controller_thread_arrive_in_order(
    brokers: tuple[RunningBroker, RunningBroker], channel: tuple[NetworkChannel, Responses]
) -> None:
    first, second = brokers
    net, responses = channel
    net.set_controller(1, EPOCH)
    net.add_broker(info(first), -1)
    net.add_broker(info(second), -1)
    partition = {"state": LED_BY_1}

    def controller_thread() -> None:
        # the controller changes its own objects right after each call
        moving = topic({0: partition["state"]})
        for epoch in range(1, 31):
            moving.partitions[0] = PartitionState(1 + epoch % 2, epoch, (1, 2), (1, 2), EPOCH)
            net.send_update_metadata([info(first), info(second)], [moving], [])
        moving.partitions[0] = PartitionState(1, 99, (1,), (1, 2), EPOCH)  # never sent

    thread = threading.Thread(target=controller_thread)
    thread.start()
    thread.join(30)
    for broker_id in (1, 2):
        for _ in range(30):
            assert responses.next(broker_id, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    for running in brokers:
        assert running.broker is not None
        state = running.broker.metadata_cache.partition(TOPIC, 0)
        assert state is not None and (state.leader, state.leader_epoch) == (1, 30)


def test_close_while_retrying_leaves_nothing_behind(broker: RunningBroker) -> None:
    loop = LoopThread()
    net = NetworkChannel(loop.loop, retry_backoff=0.01, max_retry_backoff=0.05)
    try:
        net.set_controller(0, EPOCH)
        net.add_broker(BrokerInfo(7, "127.0.0.1", 1), -1)  # nothing listens there
        net.add_broker(info(broker), -1)
        net.send_update_metadata([info(broker)], [topic({0: LED_BY_1})], [])
        wait_for(lambda: TOPIC in broker_view(broker).topics, what="the update")
        net.send_stop_replica(7, TOPIC, [0], True)
        time.sleep(0.2)  # several attempts to reach broker 7
        loop.run(net.close(), timeout=10)
        tasks = loop.run(_other_tasks())
        assert tasks == []
        net.send_update_metadata([], [], [TOPIC])  # after close: dropped
        time.sleep(0.1)
        assert TOPIC in broker_view(broker).topics
    finally:
        loop.run(net.close(), timeout=10)
        loop.close()


async def _other_tasks() -> list[str]:
    current = asyncio.current_task()
    return [t.get_name() for t in asyncio.all_tasks() if t is not current]


def test_the_channel_uses_the_inter_broker_listener(
    broker_factory: Any, channel: tuple[NetworkChannel, Responses]
) -> None:
    running = broker_factory(
        broker_id="1",
        listeners="CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        listener_security_protocol_map="CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        inter_broker_listener_name="INTERNAL",
    )
    assert running.broker is not None
    internal_port = running.broker.listeners[1].port
    net, responses = channel
    net.listener_name = "INTERNAL"
    # the client-facing endpoint is a port where nothing listens: the request must go to
    # the inter-broker one
    registered = BrokerInfo(
        1,
        "127.0.0.1",
        1,
        "rack-x",
        "CLIENT",
        (EndPoint("CLIENT", "127.0.0.1", 1), EndPoint("INTERNAL", "127.0.0.1", internal_port)),
    )
    net.set_controller(1, EPOCH)
    net.add_broker(registered, -1)
    net.send_update_metadata([registered], [topic({0: LED_BY_1})], [])
    assert responses.next(1, ApiKey.UPDATE_METADATA).error == ErrorCode.NONE
    # clients are told each broker's endpoint of the listener they use
    view = broker_view(running)
    assert view.brokers[1].port == 1 and view.brokers[1].rack == "rack-x"
    cached = running.broker.metadata_cache.brokers[1]
    assert cached.endpoint("INTERNAL").port == internal_port


def _at_version(api_key: ApiKey, version: int, body: dict[str, Any]) -> Callable[..., Any]:
    async def send(conn: Connection) -> dict[str, Any]:
        return await conn.request(api_key, body, version)

    return send


@pytest.mark.parametrize("version", range(8))
def test_every_leader_and_isr_version(broker: RunningBroker, version: int) -> None:
    name = f"lai-v{version}"
    made = TopicMetadata(
        name,
        uuid.uuid4(),
        {0: PartitionState(0, 1, (0,), (0,)), 1: PartitionState(0, 1, (0,), (0,))},
    )
    header = ControlHeader(0, EPOCH, -1)
    # the same topic twice in one request: each entry answered for itself
    body = build_leader_and_isr(version, header, [(made, [0]), (made, [1])])
    response = run(broker.bootstrap, _at_version(ApiKey.LEADER_AND_ISR, version, body))
    result = read_leader_and_isr(response, version, {made.topic_id: name})
    assert result.error == ErrorCode.NONE
    assert result.partitions == {(name, 0): ErrorCode.NONE, (name, 1): ErrorCode.NONE}
    assert broker.broker is not None and broker.broker.replica_manager is not None
    part = broker.broker.replica_manager.partition(name, 1)
    assert part is not None and part.is_leader and part.leader_epoch == 1
    assert part.topic_id == (made.topic_id if version >= 5 else uuid.UUID(int=0))


@pytest.mark.parametrize("version", range(9))
def test_every_update_metadata_version(broker: RunningBroker, version: int) -> None:
    name = f"um-v{version}"
    made = TopicMetadata(name, uuid.uuid4(), {0: PartitionState(0, 4, (0,), (0, 5), EPOCH, 2)})
    me = BrokerInfo(0, "127.0.0.1", broker.port, "rack-0")
    body = build_update_metadata(version, ControlHeader(3, EPOCH, -1), [me], [made])
    response = run(broker.bootstrap, _at_version(ApiKey.UPDATE_METADATA, version, body))
    assert response["error_code"] == ErrorCode.NONE
    view = broker_view(broker)
    assert view.controller_id == 3
    assert view.brokers[0].rack == ("rack-0" if version >= 2 else None)
    partition = view.topics[name].partitions[0]
    assert (partition.leader, partition.replicas, partition.isr) == (0, (0, 5), (0,))


@pytest.mark.parametrize("version", range(5))
def test_every_stop_replica_version(broker: RunningBroker, version: int) -> None:
    name = f"sr-v{version}"
    made = TopicMetadata(name, uuid.uuid4(), {0: PartitionState(0, 2, (0,), (0,))})
    header = ControlHeader(0, EPOCH, -1)
    body = build_leader_and_isr(7, header, [(made, [0])])
    run(broker.bootstrap, _at_version(ApiKey.LEADER_AND_ISR, 7, body))
    assert (Path(broker.data_dir) / f"{name}-0").is_dir()
    body = build_stop_replica(version, header, {name: [(0, 3)]}, True)
    response = run(broker.bootstrap, _at_version(ApiKey.STOP_REPLICA, version, body))
    assert read_stop_replica(response).partitions == {(name, 0): ErrorCode.NONE}
    assert not (Path(broker.data_dir) / f"{name}-0").exists()
