"""The leader's bookkeeping of its followers (`Partition` over a real log): the high
watermark over the maximal ISR, when a follower counts as caught up, which ISR changes
are proposed and adopted, and what a parked acks=all append is answered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from logbus.coordinator.group.offsets_topic import java_string_hash, offsets_partition_for
from logbus.protocol import ErrorCode
from logbus.records.builder import NewRecord, build_batch
from logbus.server.replica.partition import Partition, PartitionError
from logbus.server.replica.replica_fetcher import fetcher_id
from logbus.storage.log import Log
from logbus.storage.log_config import LogConfig
from logbus.types import TopicPartition

LAG = 10_000
T0 = 1_700_000_000_000  # wall-clock milliseconds, as the broker passes


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log(tmp_path / "t-0", LogConfig(min_insync_replicas=2), now_ms=0)
    yield opened
    opened.close()


def leader(log: Log, isr: tuple[int, ...] = (0, 1, 2), now: int = T0 + 1000) -> Partition:
    part = Partition("t", 0, uuid.uuid4(), log, 0)
    part.replica_lag_time_max_ms = LAG
    part.make_leader(3, isr, (0, 1, 2), partition_epoch=7, now_ms=now)
    return part


def append(part: Partition, count: int = 1, acks: int = -1) -> int:
    batch = build_batch([NewRecord(None, b"v", timestamp=0)] * count)
    return part.append_as_leader(memoryview(batch), acks, 1000).last_offset


def fetch(part: Partition, replica: int, offset: int, now: int) -> bool:
    state = part.follower(replica, True)
    return part.update_follower_fetch_state(
        state, offset, 0, now, part.log.log_end_offset, -1
    )


def test_the_high_watermark_is_the_smallest_log_end_of_the_isr(log: Log) -> None:
    part = leader(log)
    append(part, 5)
    assert part.high_watermark == 0
    assert not fetch(part, 1, 5, T0 + 1100)
    assert fetch(part, 2, 3, T0 + 1100)
    assert part.high_watermark == 3
    assert fetch(part, 2, 5, T0 + 1200)
    assert part.high_watermark == 5
    fetch(part, 2, 1, T0 + 1300)  # a follower that went back (it truncated): the HW stays
    assert part.high_watermark == 5


def test_a_lone_replica_moves_the_high_watermark_at_each_append(log: Log) -> None:
    part = Partition("t", 0, uuid.uuid4(), log, 0)
    part.make_leader(0, (0,), (0,))
    append(part, 4, acks=1)
    assert part.high_watermark == 4


def test_followers_out_of_sync_after_the_lag(log: Log) -> None:
    part = leader(log, now=T0 + 1000)
    append(part, 2)
    fetch(part, 1, 2, T0 + 1500)  # caught up at 1500
    fetch(part, 2, 1, T0 + 1500)  # behind since the epoch started (1000)
    assert part.isr_to_shrink(T0 + 1000 + LAG) is None
    assert part.isr_to_shrink(T0 + 1001 + LAG) == (0, 1)
    append(part, 1)
    assert part.isr_to_shrink(T0 + 1501 + LAG) == (0,)
    # A follower whose log end equals the leader's is never out of sync (as Kafka's).
    fetch(part, 1, 3, T0 + 1600)
    fetch(part, 2, 3, T0 + 1600)
    assert part.isr_to_shrink(T0 + 10 * LAG) is None


def test_a_follower_rejoins_once_it_reaches_the_high_watermark(log: Log) -> None:
    part = leader(log, isr=(0, 1))
    append(part, 4)
    fetch(part, 1, 4, T0 + 1100)
    assert part.high_watermark == 4
    fetch(part, 2, 3, T0 + 1100)
    assert part.isr_to_expand(2) is None
    fetch(part, 2, 4, T0 + 1200)
    assert part.isr_to_expand(2) == (0, 1, 2)
    part.begin_isr_change((0, 1, 2))
    assert part.maximal_isr == (0, 1, 2)
    assert part.isr_to_expand(2) is None  # one change at a time
    append(part, 1)
    fetch(part, 1, 5, T0 + 1300)
    assert part.high_watermark == 4  # the pending member holds it (KIP-497)
    part.complete_isr_change((0, 1, 2), ErrorCode.NONE, 3, (0, 1, 2), 8, T0 + 1300)
    assert (part.isr, part.partition_epoch, part.pending_isr) == ((0, 1, 2), 8, None)


def test_refused_or_stale_isr_answers_are_dropped(log: Log) -> None:
    part = leader(log)
    part.begin_isr_change((0, 1))
    part.complete_isr_change((0, 1), ErrorCode.INVALID_UPDATE_VERSION, -1, (), -1, 0)
    assert (part.isr, part.pending_isr) == ((0, 1, 2), None)
    part.begin_isr_change((0, 1))
    part.complete_isr_change((0, 1), ErrorCode.NONE, 2, (0, 1), 9, 0)  # older epoch
    assert part.isr == (0, 1, 2)
    part.begin_isr_change((0, 1))
    part.make_leader(4, (0, 1, 2), (0, 1, 2), 8)  # a LeaderAndIsr came first
    part.complete_isr_change((0, 1), ErrorCode.NONE, 3, (0, 1), 9, 0)
    assert (part.isr, part.leader_epoch) == ((0, 1, 2), 4)


def test_acks_all_outcomes(log: Log) -> None:
    part = leader(log)
    last = append(part, 2)
    assert part.replication_outcome(3, last) is None
    fetch(part, 1, 2, T0 + 1100)
    fetch(part, 2, 2, T0 + 1100)
    assert part.replication_outcome(3, last) == ErrorCode.NONE
    last = append(part)
    part.begin_isr_change((0,))
    # (followers caught up within the lag would still hold the HW: long after)
    part.complete_isr_change((0,), ErrorCode.NONE, 3, (0,), 8, T0 + 2 * LAG)
    assert part.replication_outcome(3, last) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    with pytest.raises(PartitionError) as refused:
        append(part)
    assert refused.value.error == ErrorCode.NOT_ENOUGH_REPLICAS
    append(part, acks=1)
    part.make_follower(1, 4, (1,), (0, 1, 2), 9)
    assert part.replication_outcome(3, last) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetches_from_brokers_that_are_not_replicas(log: Log) -> None:
    part = leader(log)
    with pytest.raises(PartitionError) as with_epoch:
        part.follower(5, True)
    assert with_epoch.value.error == ErrorCode.UNKNOWN_LEADER_EPOCH
    with pytest.raises(PartitionError) as without:
        part.follower(5, False)
    assert without.value.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_stale_leader_and_isr_is_recognized(log: Log) -> None:
    part = leader(log)
    assert part.is_stale(2, 100)
    assert part.is_stale(3, 6)
    assert not part.is_stale(3, 7)
    assert not part.is_stale(4, 0)


def test_fetcher_ids_follow_kafkas_hash() -> None:
    assert java_string_hash("hello") == 99162322  # Java's "hello".hashCode()
    assert java_string_hash("a-much-longer-topic-name-that-overflows") < 0
    # Utils.abs(31 * hash + partition) % n, in 32-bit arithmetic: 31 * 99162322 + 3 wraps
    # to -1220935311
    tp = TopicPartition("hello", 3)
    assert fetcher_id(tp, 4) == 1220935311 % 4 == 3  # the low 31 bits would give 1


def test_groups_map_to_offsets_partitions_as_kafka_maps_them() -> None:
    # "my-txn".hashCode() is -1061187895: Utils.abs gives partition 45 of 50, where the
    # hash's low 31 bits would give 3
    assert java_string_hash("my-txn") == -1061187895
    assert offsets_partition_for("my-txn", 50) == 45
    assert offsets_partition_for("g1", 50) == 3242 % 50


def test_a_shrink_below_min_isr_not_yet_written_answers_acks_all_at_once(log: Log) -> None:
    part = leader(log)
    last = append(part)
    assert part.replication_outcome(3, last) is None
    part.begin_isr_change((0,))  # followers silent for the lag; the controller unreachable
    assert part.replication_outcome(3, last) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    with pytest.raises(PartitionError) as refused:
        append(part)
    assert refused.value.error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert append(part, acks=1) == last + 1  # acks=1 writes go on as in Kafka


def test_a_shrink_that_keeps_min_isr_keeps_acks_all_waiting(log: Log) -> None:
    part = leader(log)
    last = append(part)
    part.begin_isr_change((0, 1))
    assert part.replication_outcome(3, last) is None
    fetch(part, 1, last + 1, T0 + 1100)
    assert part.replication_outcome(3, last) is None  # the maximal ISR still has 2


def test_a_leader_is_cut_off_once_its_isr_followers_are_silent(log: Log) -> None:
    part = leader(log, now=T0)
    fetch(part, 1, 0, T0 + 100)
    fetch(part, 2, 0, T0 + 300)
    assert not part.cut_off_from_followers(T0 + 4100, 4000)  # both heard within 4 s
    assert not part.cut_off_from_followers(T0 + 4200, 4000)  # 2 and itself: min.isr=2
    assert part.cut_off_from_followers(T0 + 4400, 4000)


def test_a_leader_without_isr_followers_is_never_cut_off(log: Log) -> None:
    part = leader(log, isr=(0,), now=T0)
    assert not part.cut_off_from_followers(T0 + 60_000, 4000)


def test_one_silent_follower_of_three_cuts_off_a_leader_needing_three(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(min_insync_replicas=3), now_ms=0)
    try:
        part = leader(log, now=T0)
        fetch(part, 1, 0, T0 + 5000)
        assert part.cut_off_from_followers(T0 + 5000, 4000)
    finally:
        log.close()


def test_a_leader_that_stepped_aside_answers_not_leader(log: Log) -> None:
    part = leader(log)
    last = append(part)
    part.step_aside()
    assert not part.is_leader
    assert part.replication_outcome(3, last) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(PartitionError) as refused:
        append(part)
    assert refused.value.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not part.cut_off_from_followers(T0 + 60_000, 4000)
    # the controller's state names it leader at the same epoch: it leads again, and its
    # epoch cache and epoch start are those it had
    assert not part.make_leader(3, (0, 1, 2), (0, 1, 2), 8, T0 + 2000)
    assert part.is_leader and part.leader_epoch_start_offset == 0
    assert part.log.leader_epoch_cache.latest_epoch == 3
