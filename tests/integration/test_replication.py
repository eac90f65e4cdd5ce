"""Replication between real brokers in one process (tests/integration/replication_cluster.py):
follower fetch and the high watermark, acks=all and min.insync.replicas, ISR shrink and
expand through AlterPartition, and truncation by leader epochs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from replication_cluster import InProcessCluster, batch

from logbus.client.errors import KafkaError
from logbus.client.requests.alter_partition import IsrChange, alter_partition
from logbus.client.requests.fetch import (
    FetchedData,
    FetchOptions,
    FetchPosition,
    fetch_partitions,
)
from logbus.client.requests.leader_epochs import (
    EpochEndOffset,
    EpochQuery,
    offset_for_leader_epoch,
)
from logbus.client.requests.produce import produce
from logbus.protocol import ErrorCode
from logbus.records.reader import iter_record_set
from logbus.types import TopicPartition

T = "events"


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., InProcessCluster]]:
    started: list[InProcessCluster] = []

    def make(**overrides: str) -> InProcessCluster:
        running = InProcessCluster(tmp_path, **overrides)
        started.append(running)
        return running.start()

    yield make
    for running in started:
        running.close()


@pytest.fixture
def cluster(make_cluster: Callable[..., InProcessCluster]) -> InProcessCluster:
    return make_cluster()


FAST_LAG = {"replica_lag_time_max_ms": "1000", "replica_fetch_wait_max_ms": "100"}
SLOW_LAG = {"replica_lag_time_max_ms": "60000"}


def leo(cluster: InProcessCluster, broker_id: int, topic: str = T, index: int = 0) -> int:
    return cluster.call(lambda: cluster.partition(broker_id, topic, index).log.log_end_offset)


def hw(cluster: InProcessCluster, broker_id: int, topic: str = T, index: int = 0) -> int:
    return cluster.call(lambda: cluster.partition(broker_id, topic, index).high_watermark)


def send(
    cluster: InProcessCluster,
    broker_id: int,
    values: list[bytes],
    acks: int = -1,
    timeout_ms: int = 20_000,
    topic: str = T,
) -> int:
    conn = cluster.connect(broker_id)
    result = cluster.run(produce(conn, topic, 0, batch(values), acks, timeout_ms=timeout_ms))
    assert result is not None
    return result.base_offset


def consumer_fetch(cluster: InProcessCluster, broker_id: int, offset: int = 0) -> tuple[int, int]:
    """(error, bytes) of a consumer's fetch of partition 0 from `broker_id`."""
    conn = cluster.connect(broker_id)
    response = cluster.run(
        fetch_partitions(
            conn, {TopicPartition(T, 0): FetchPosition(offset)}, FetchOptions(max_wait_ms=0)
        )
    )
    data = response.partitions[TopicPartition(T, 0)]
    return data.error_code, len(data.records or b"")


def test_acks_all_records_are_identical_on_every_replica(cluster: InProcessCluster) -> None:
    cluster.create_topic(T, {0: [0, 1, 2]})
    for i in range(20):
        send(cluster, 0, [f"v{i}-{j}".encode() for j in range(i % 4 + 1)])
    end = leo(cluster, 0)
    assert hw(cluster, 0) == end  # every acks=all answer waited for the whole ISR
    cluster.wait_for(
        lambda: all(cluster.partition(b, T, 0).log.log_end_offset == end for b in (1, 2)),
        "followers to catch up",
    )
    leader = cluster.log_bytes(0, T, 0)
    assert leader and cluster.log_bytes(1, T, 0) == leader
    assert cluster.log_bytes(2, T, 0) == leader
    cluster.wait_for(lambda: cluster.partition(2, T, 0).high_watermark == end, "follower HW")


def test_high_watermark_waits_for_followers_and_bounds_consumers(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"a", b"b"])
    assert hw(cluster, 0) == 2
    cluster.pause_fetching(2)
    send(cluster, 0, [b"c", b"d", b"e"], acks=1)
    cluster.wait_for(lambda: cluster.partition(1, T, 0).log.log_end_offset == 5, "broker 1")
    assert cluster.partition(0, T, 0).log.log_end_offset == 5
    assert hw(cluster, 0) == 2  # broker 2, still in the ISR, has not fetched them
    error, size = consumer_fetch(cluster, 0, 2)
    assert (error, size) == (ErrorCode.NONE, 0)  # nothing above the high watermark
    error, _ = consumer_fetch(cluster, 1)
    assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER  # consumers read from the leader
    cluster.resume_fetching(2)
    cluster.wait_for(lambda: cluster.partition(0, T, 0).high_watermark == 5, "HW to advance")
    error, size = consumer_fetch(cluster, 0, 2)
    assert error == ErrorCode.NONE and size > 0
    assert cluster.log_bytes(2, T, 0) == cluster.log_bytes(0, T, 0)


def test_lagging_follower_leaves_the_isr_and_rejoins_after_catching_up(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**FAST_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"first"])
    cluster.pause_fetching(2)
    send(cluster, 0, [b"while 2 is away"], acks=1)
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0, 1), "ISR to shrink")
    assert cluster.controller_isr(T, 0) == (0, 1)
    assert cluster.state(T, 0).isr == (0, 1)
    assert hw(cluster, 0) == leo(cluster, 0) == 2  # the smaller ISR has everything
    send(cluster, 0, [b"acks=all without broker 2"])  # completes without it
    cluster.resume_fetching(2)
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0, 1, 2), "ISR to expand")
    assert cluster.controller_isr(T, 0) == (0, 1, 2)
    cluster.wait_for(
        lambda: cluster.brokers[1].metadata_cache.partition(T, 0).isr == (0, 1, 2),  # type: ignore[union-attr]
        "UpdateMetadata with the new ISR",
    )
    assert cluster.log_bytes(2, T, 0) == cluster.log_bytes(0, T, 0)


def test_min_insync_replicas_refuses_acks_all_but_not_acks_1(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**FAST_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]}, {"min.insync.replicas": "2"})
    send(cluster, 0, [b"ok"])
    cluster.stop_broker(1)
    cluster.stop_broker(2)
    # (as Kafka's, a follower whose log end equals the leader's never falls out of sync)
    send(cluster, 0, [b"not copied"], acks=1)
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0,), "ISR to shrink to 0")
    end = cluster.partition(0, T, 0).log.log_end_offset
    with pytest.raises(KafkaError) as refused:
        send(cluster, 0, [b"refused"])
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leo(cluster, 0) == end  # refused before the append
    assert send(cluster, 0, [b"acks=1"], acks=1) == end


def test_isr_shrinking_below_min_insync_while_waiting(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**FAST_LAG)
    cluster.create_topic(T, {0: [0, 1]}, {"min.insync.replicas": "2"})
    send(cluster, 0, [b"ok"])
    cluster.stop_broker(1)
    with pytest.raises(KafkaError) as failed:
        send(cluster, 0, [b"appended, then the ISR shrank"], timeout_ms=30_000)
    assert failed.value.code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # answered once the shrink is proposed, which the controller then writes
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0,), "the ISR shrink")


def test_leadership_moving_while_acks_all_waits(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"ok"])
    cluster.stop_broker(2)
    conn = cluster.connect(0)
    waiting = asyncio.run_coroutine_threadsafe(
        produce(conn, T, 0, batch([b"waits for broker 2"]), -1, timeout_ms=30_000),
        cluster.loop.loop,
    )
    cluster.wait_for(lambda: cluster.partition(0, T, 0).log.log_end_offset == 2, "the append")
    cluster.elect(T, 0, 1, (0, 1))
    with pytest.raises(KafkaError) as moved:
        waiting.result(30)
    assert moved.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_request_timeout_while_waiting_for_followers(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1]})
    cluster.stop_broker(1)
    with pytest.raises(KafkaError) as timed_out:
        send(cluster, 0, [b"never replicated"], timeout_ms=300)
    assert timed_out.value.code == ErrorCode.REQUEST_TIMED_OUT


def test_divergent_follower_truncates_at_the_divergence_point(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"r0", b"r1"])
    send(cluster, 0, [b"r2", b"r3", b"r4"])
    cluster.wait_for(
        lambda: all(cluster.partition(b, T, 0).log.log_end_offset == 5 for b in (1, 2)),
        "replication",
    )
    # Broker 1 stalls; broker 0 appends records it does not copy (and is about to be
    # deposed).
    cluster.pause_fetching(1)
    deposed = cluster.partition(0, T, 0)
    epoch0 = deposed.leader_epoch
    cluster.call(
        lambda: deposed.log.append_as_leader(batch([b"lost-5", b"lost-6", b"lost-7"]), epoch0)
    )
    cluster.wait_for(
        lambda: cluster.partition(2, T, 0).log.log_end_offset == 8, "broker 2 to copy them"
    )
    cluster.pause_fetching(2)
    truncations = cluster.call(lambda: cluster.partition(0, T, 0).log.truncations)
    # Broker 1 (offsets 0-4) becomes leader in a new epoch and takes new writes at 5-6.
    cluster.elect(T, 0, 1, (1, 2))
    assert send(cluster, 1, [b"new-5", b"new-6"], acks=1) == 5

    # Broker 0 (0-7, epoch 0) follows: it truncates at 5, where epoch 0 ended on the new
    # leader, and copies the new epoch's records.
    def converged() -> bool:
        logs = {b: cluster.partition(b, T, 0).log for b in (0, 1, 2)}
        return all(log.log_end_offset == 7 for log in logs.values())

    cluster.wait_for(converged, "brokers 0 and 2 to converge")
    assert cluster.log_bytes(0, T, 0) == cluster.log_bytes(1, T, 0)
    assert cluster.log_bytes(2, T, 0) == cluster.log_bytes(1, T, 0)
    assert cluster.call(lambda: cluster.partition(0, T, 0).log.truncations) == truncations + 1
    entries = cluster.call(lambda: cluster.partition(0, T, 0).log.leader_epoch_cache.entries)
    assert [(e.epoch, e.start_offset) for e in entries] == [(epoch0, 0), (epoch0 + 1, 5)]


def test_follower_with_the_same_history_is_not_truncated_to_its_high_watermark(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"a", b"b", b"c"])
    send(cluster, 0, [b"d", b"e"])
    cluster.wait_for(
        lambda: all(cluster.partition(b, T, 0).log.log_end_offset == 5 for b in (1, 2)),
        "replication",
    )
    follower = cluster.partition(2, T, 0)
    # As if broker 2 restarted from an old replication-offset-checkpoint.
    cluster.call(lambda: setattr(follower.log, "high_watermark", 1))
    before = cluster.call(lambda: follower.log.truncations)
    cluster.elect(T, 0, 1, (0, 1, 2))
    assert send(cluster, 1, [b"f"]) == 5
    cluster.wait_for(
        lambda: cluster.partition(2, T, 0).log.log_end_offset == 6, "broker 2 to follow broker 1"
    )
    assert cluster.call(lambda: follower.log.truncations) == before  # kept 1-4
    assert cluster.log_bytes(2, T, 0) == cluster.log_bytes(1, T, 0)


def test_replica_fetch_fencing_and_non_replicas(cluster: InProcessCluster) -> None:
    cluster.create_topic(T, {0: [0, 1]})
    send(cluster, 0, [b"x"])
    epoch = cluster.state(T, 0).leader_epoch
    conn = cluster.connect(0)
    tp = TopicPartition(T, 0)

    def follower_fetch(replica_id: int, current_epoch: int) -> int:
        response = cluster.run(
            fetch_partitions(
                conn,
                {tp: FetchPosition(0, current_epoch)},
                FetchOptions(max_wait_ms=0, replica_id=replica_id),
            )
        )
        return response.partitions[tp].error_code

    assert follower_fetch(1, epoch) == ErrorCode.NONE
    cluster.elect(T, 0, 0, (0, 1))  # a new leader epoch on the same leader
    assert follower_fetch(1, epoch) == ErrorCode.FENCED_LEADER_EPOCH
    assert follower_fetch(1, epoch + 2) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert follower_fetch(2, epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH  # not a replica
    assert follower_fetch(2, -1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert follower_fetch(1, epoch + 1) == ErrorCode.NONE


def test_alter_partition_is_validated_by_the_controller(cluster: InProcessCluster) -> None:
    topic = cluster.create_topic(T, {0: [0, 1, 2]})
    state = cluster.state(T, 0)
    tp = TopicPartition(T, 0)

    def alter(broker: int, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int,
              sender: int = 0, broker_epoch: int = -1) -> int:
        conn = cluster.connect(broker)
        change = IsrChange(topic.topic_id, leader_epoch, isr, partition_epoch)
        response = cluster.run(alter_partition(conn, sender, broker_epoch, {tp: change}))
        if response.error_code:
            return response.error_code
        result = response.partitions[tp]
        return result.code if isinstance(result, KafkaError) else ErrorCode.NONE

    epoch, version = state.leader_epoch, state.version
    # (NOT_CONTROLLER needs brokers sharing one store: each in-process broker holds
    # /controller in its own.)
    assert alter(0, epoch, (0, 1), version, sender=7) == ErrorCode.STALE_BROKER_EPOCH
    registered = cluster.call(lambda: cluster.controller.store.stat("/brokers/ids/0").czxid)
    assert (
        alter(0, epoch, (0, 1), version, broker_epoch=registered - 1)
        == ErrorCode.STALE_BROKER_EPOCH
    )
    assert alter(0, epoch, (0, 1), version, sender=1) == ErrorCode.FENCED_LEADER_EPOCH
    assert alter(0, epoch, (0, 1, 5), version) == ErrorCode.INVALID_REQUEST
    assert alter(0, epoch, (0, 1), version) == ErrorCode.NONE
    assert cluster.controller_isr(T, 0) == (0, 1)
    assert alter(0, epoch, (0, 1), version) == ErrorCode.NONE  # a retry: already applied
    assert alter(0, epoch, (0,), version) == ErrorCode.INVALID_UPDATE_VERSION
    assert alter(0, epoch - 1, (0,), version + 1) == ErrorCode.FENCED_LEADER_EPOCH
    cluster.stop_broker(2)
    assert alter(0, epoch, (0, 1, 2), version + 1) == ErrorCode.INELIGIBLE_REPLICA


def test_offset_for_leader_epoch_on_the_leader(cluster: InProcessCluster) -> None:
    cluster.create_topic(T, {0: [0, 1]})
    send(cluster, 0, [b"a", b"b"])
    first = cluster.state(T, 0).leader_epoch
    cluster.elect(T, 0, 0, (0, 1))
    send(cluster, 0, [b"c"])
    tp = TopicPartition(T, 0)

    def ask(broker: int, epoch: int, current: int) -> EpochEndOffset | KafkaError:
        conn = cluster.connect(broker)
        return cluster.run(offset_for_leader_epoch(conn, {tp: EpochQuery(epoch, current)}))[tp]

    assert ask(0, first, first + 1) == EpochEndOffset(first, 2)
    assert ask(0, first + 1, first + 1) == EpochEndOffset(first + 1, 3)
    assert ask(0, first + 5, -1) == EpochEndOffset(-1, -1)  # UNDEFINED_EPOCH(_OFFSET)
    fenced = ask(0, first, first)
    assert isinstance(fenced, KafkaError) and fenced.code == ErrorCode.FENCED_LEADER_EPOCH
    unknown = ask(0, first, first + 2)
    assert isinstance(unknown, KafkaError) and unknown.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    follower = ask(1, first, first + 1)
    assert isinstance(follower, KafkaError)
    assert follower.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_with_an_old_leader_epoch_is_fenced_until_told(
    cluster: InProcessCluster,
) -> None:
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"a"])
    cluster.wait_for(lambda: cluster.partition(2, T, 0).log.log_end_offset == 1, "replication")
    # A new leader epoch on broker 0 that broker 2 has not heard of.
    cluster.elect(T, 0, 0, (0, 1), tell={0, 1})
    send(cluster, 0, [b"b"])
    cluster.wait_for(lambda: cluster.partition(1, T, 0).log.log_end_offset == 2, "broker 1")
    assert leo(cluster, 2) == 1  # its fetches at the old epoch are fenced
    cluster.tell(2, T, 0)
    cluster.wait_for(lambda: cluster.partition(2, T, 0).log.log_end_offset == 2, "broker 2")
    assert cluster.log_bytes(2, T, 0) == cluster.log_bytes(0, T, 0)


@pytest.mark.parametrize("new_start", [4, 3])  # at a batch, inside one
def test_follower_behind_the_leaders_log_start_starts_over_there(
    make_cluster: Callable[..., InProcessCluster], new_start: int
) -> None:
    cluster = make_cluster(**FAST_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    send(cluster, 0, [b"a", b"b"])
    cluster.wait_for(lambda: cluster.partition(2, T, 0).log.log_end_offset == 2, "replication")
    cluster.pause_fetching(2)
    send(cluster, 0, [b"c0", b"c1"], acks=1)  # offsets 2-3
    send(cluster, 0, [b"c2"], acks=1)  # offset 4
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0, 1), "ISR to shrink")
    cluster.wait_for(lambda: cluster.partition(0, T, 0).high_watermark == 5, "HW")
    deleted = cluster.call(lambda: cluster.partition(0, T, 0).delete_records_on_leader(new_start))
    assert deleted == new_start
    cluster.resume_fetching(2)

    def caught_up() -> bool:
        log = cluster.partition(2, T, 0).log
        return log.log_start_offset == new_start and log.log_end_offset == 5

    cluster.wait_for(caught_up, "broker 2 to start over at the leader's log start")
    cluster.wait_for(lambda: cluster.partition(0, T, 0).isr == (0, 1, 2), "ISR to expand")


def test_several_fetchers_per_leader(make_cluster: Callable[..., InProcessCluster]) -> None:
    cluster = make_cluster(num_replica_fetchers="2")
    cluster.create_topic(T, {p: [0, 1] for p in range(6)})
    conn = cluster.connect(0)
    for p in range(6):
        cluster.run(produce(conn, T, p, batch([f"p{p}".encode()]), -1))
    for p in range(6):
        assert cluster.log_bytes(1, T, p) == cluster.log_bytes(0, T, p)
    fetchers = cluster.call(lambda: set(cluster.brokers[1].replica_manager.fetchers.fetchers))  # type: ignore[union-attr]
    assert fetchers == {(0, 0), (0, 1)}


def test_kafka_clients_produce_acks_all_and_consume(cluster: InProcessCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster.create_topic(T, {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(300):
        producer.produce(T, value=f"v{i}".encode(), partition=i % 3, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(delivered) == 300
    del producer  # librdkafka closes its connections when the producer goes
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(T, p, 0) for p in range(3)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(300))
    finally:
        consumer.close()
    for p in range(3):
        leader = cluster.log_bytes(p, T, p)
        cluster.wait_for(
            lambda p=p: all(
                cluster.partition(b, T, p).log.log_end_offset
                == cluster.partition(p, T, p).log.log_end_offset
                for b in range(3)
            ),
            "replication",
        )
        assert all(cluster.log_bytes(b, T, p) == leader for b in range(3))


def test_leader_answers_a_diverged_follower_with_its_epoch_end(cluster: InProcessCluster) -> None:
    cluster.create_topic(T, {0: [0, 1]})
    send(cluster, 0, [b"a"])
    first = cluster.state(T, 0).leader_epoch
    cluster.elect(T, 0, 0, (0, 1))
    send(cluster, 0, [b"b", b"c"])
    conn = cluster.connect(0)
    tp = TopicPartition(T, 0)

    def fetch_at(offset: int, last_epoch: int) -> FetchedData:
        response = cluster.run(fetch_partitions(
            conn, {tp: FetchPosition(offset, first + 1, last_epoch)},
            FetchOptions(max_wait_ms=0, replica_id=1),
        ))
        return response.partitions[tp]

    # Epoch `first` ended at 1 here: a follower at 3 that last wrote in it diverged.
    diverged = fetch_at(3, first)
    assert diverged.error_code == ErrorCode.NONE
    assert diverged.diverging_epoch == (first, 1) and not diverged.records
    assert fetch_at(1, first).diverging_epoch is None
    assert fetch_at(3, first + 1).diverging_epoch is None


@pytest.mark.parametrize("found_by", ["OffsetForLeaderEpoch", "Fetch"])
def test_divergence_found_by_either_request(
    make_cluster: Callable[..., InProcessCluster], found_by: str
) -> None:
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1]})
    send(cluster, 0, [b"r0", b"r1"])
    cluster.wait_for(lambda: cluster.partition(1, T, 0).log.log_end_offset == 2, "replication")
    cluster.pause_fetching(1)
    deposed = cluster.partition(0, T, 0)
    epoch0 = deposed.leader_epoch
    cluster.call(lambda: deposed.log.append_as_leader(batch([b"lost-2", b"lost-3"]), epoch0))
    cluster.elect(T, 0, 1, (1,), tell={1})
    assert send(cluster, 1, [b"new-2"], acks=1) == 2

    def follow() -> None:
        broker = cluster.brokers[0]
        cluster.link(0).apply_leader_and_isr(cluster.controller.topics[T], [0])
        if found_by == "Fetch":
            # as a Kafka 2.7+ follower: fetch at once, the leader answers DivergingEpoch
            manager = broker.replica_manager
            assert manager is not None and manager.fetchers is not None
            for fetcher in manager.fetchers.fetchers.values():
                fetcher.states[TopicPartition(T, 0)].truncating = False

    cluster.call(follow)
    cluster.wait_for(
        lambda: cluster.partition(0, T, 0).log.log_end_offset == 3
        and cluster.partition(0, T, 0).log.leader_epoch_cache.latest_epoch == epoch0 + 1,
        "broker 0 to converge",
    )
    assert cluster.log_bytes(0, T, 0) == cluster.log_bytes(1, T, 0)


def test_leadership_moves_under_idempotent_acks_all_load_lose_nothing(
    make_cluster: Callable[..., InProcessCluster],
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster = make_cluster(**SLOW_LAG)
    cluster.create_topic(T, {0: [0, 1, 2]})
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": 20,
            "topic.metadata.refresh.interval.ms": 200,
        }
    )
    acked: dict[int, bytes] = {}
    failed: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]

    sent = 0
    # Leadership moves every few milliseconds: a broker often leads an epoch in which it
    # appends nothing, and the next leader must not take that epoch for a divergence.
    for leader in [1, 2, 0] * 6:
        for _ in range(60):
            producer.produce(T, value=f"v{sent}".encode(), partition=0, on_delivery=on_delivery)
            sent += 1
            producer.poll(0)
        time.sleep(0.005)
        cluster.elect(T, 0, leader, (0, 1, 2))
    assert producer.flush(60) == 0
    del producer
    assert failed == []
    assert len(acked) == sent  # every record acknowledged once, at its own offset
    final = cluster.state(T, 0).leader
    end = leo(cluster, final)
    cluster.wait_for(
        lambda: all(cluster.partition(b, T, 0).log.log_end_offset == end for b in range(3)),
        "replicas to converge",
    )
    stored = cluster.log_bytes(final, T, 0)
    assert all(cluster.log_bytes(b, T, 0) == stored for b in range(3))
    records = {r.offset: r.value for _h, rs in iter_record_set(stored) for r in rs}
    assert records == acked
    assert sorted(records.values()) == sorted(f"v{i}".encode() for i in range(sent))
