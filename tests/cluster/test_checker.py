"""The fault tests' checker: each anomaly is found in a hand-made history, a clean one
passes, and a real broker under acks=all load with concurrent producers comes out clean."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from checker import (
    Backwards,
    Consumed,
    History,
    LogBatch,
    Outcome,
    ReplicaLogs,
    check,
    replica_batches,
)
from load import Client, ProducerLoad, read_all

import logbus


def two_producers() -> tuple[History, list[Any]]:
    """p0 sends a, b, c to t-0; p1 sends x to t-1, y to t-0: all acknowledged."""
    h = History()
    sends = [h.send("p0", "t", partition=0) for _ in range(3)]
    sends.append(h.send("p1", "t", partition=1))
    sends.append(h.send("p1", "t", partition=0))
    for send, (partition, offset) in zip(
        sends, [(0, 0), (0, 1), (0, 3), (1, 0), (0, 2)], strict=True
    ):
        send.ok(partition, offset)
    return h, sends


def read_back(sends: list[Any]) -> list[Consumed]:
    """Each acknowledged send read where it was acknowledged, in offset order per partition."""
    ok = [s for s in sends if s.outcome is Outcome.OK]
    ok.sort(key=lambda s: (s.partition, s.offset))
    return [Consumed(s.topic, s.partition, s.offset, s.value) for s in ok]


def test_a_clean_history_passes() -> None:
    h, sends = two_producers()
    result = check(h, read_back(sends))
    assert result.ok, result
    assert (result.sent, result.acknowledged, result.read) == (5, 5, 5)
    assert str(result) == "5 sent (5 ok, 0 failed, 0 unknown), 5 read: no anomalies"


def test_values_are_unique_and_name_their_producer() -> None:
    h = History()
    values = {h.send(f"p{i % 3}", "t").value for i in range(30)}
    assert len(values) == 30
    assert b"p1:4" in values


def test_a_missing_acknowledged_record_is_lost() -> None:
    h, sends = two_producers()
    result = check(h, [r for r in read_back(sends) if r.value != sends[1].value])
    assert [lost.send for lost in result.lost] == [sends[1]]
    assert not result.ok
    assert "lost: 1" in str(result)


def test_unknown_and_failed_sends_may_be_missing() -> None:
    h, sends = two_producers()
    maybe = h.send("p0", "t", partition=0)
    maybe.unknown("request timed out")
    refused = h.send("p0", "t", partition=0)
    refused.failed("NOT_ENOUGH_REPLICAS")
    never = h.send("p0", "t", partition=0)  # no outcome at all: pending counts as unknown
    result = check(h, read_back(sends))
    assert result.ok, result
    assert (result.failed, result.unknown) == (1, 2)
    assert never.outcome is Outcome.PENDING


def test_an_unknown_send_that_was_written_is_fine() -> None:
    h, sends = two_producers()
    maybe = h.send("p0", "t", partition=0)
    maybe.unknown("connection lost")
    records = [*read_back(sends), Consumed("t", 0, 4, maybe.value)]
    assert check(h, records).ok


def test_a_failed_send_that_was_written_is_unexpected() -> None:
    h, sends = two_producers()
    refused = h.send("p0", "t", partition=0)
    refused.failed("NOT_ENOUGH_REPLICAS")
    records = [*read_back(sends), Consumed("t", 0, 4, refused.value)]
    result = check(h, records)
    assert [(u.value, u.reason) for u in result.unexpected] == [
        (refused.value, "failed: NOT_ENOUGH_REPLICAS")
    ]


def test_a_value_never_sent_is_unexpected() -> None:
    h, sends = two_producers()
    result = check(h, [*read_back(sends), Consumed("t", 0, 4, b"ghost:1")])
    assert [(u.value, u.place, u.reason) for u in result.unexpected] == [
        (b"ghost:1", ("t", 0, 4), "never sent")
    ]


def test_a_value_at_two_offsets_is_duplicated() -> None:
    h, sends = two_producers()
    records = [*read_back(sends), Consumed("t", 0, 4, sends[0].value)]
    result = check(h, records)
    assert [(d.value, d.places) for d in result.duplicated] == [
        (sends[0].value, (("t", 0, 0), ("t", 0, 4)))
    ]
    assert not result.offset_mismatches  # read where acknowledged (too)


def test_an_offset_other_than_acknowledged_is_a_mismatch() -> None:
    h, sends = two_producers()
    records = read_back(sends)
    # the record acknowledged at t-1 offset 0 is read at t-1 offset 7
    records = [r._replace(offset=7) if r.value == sends[3].value else r for r in records]
    result = check(h, records)
    assert [(m.send, m.read_at) for m in result.offset_mismatches] == [(sends[3], ("t", 1, 7))]
    assert not result.lost and not result.duplicated


def test_one_producers_records_in_the_wrong_order_are_reordered() -> None:
    h = History()
    a, b, c = (h.send("p0", "t", partition=0) for _ in range(3))
    for send, offset in ((a, 0), (b, 1), (c, 2)):
        send.ok(0, offset)
    # c's batch was retried ahead of b's: b at 2, c at 1
    records = [
        Consumed("t", 0, 0, a.value),
        Consumed("t", 0, 1, c.value),
        Consumed("t", 0, 2, b.value),
    ]
    result = check(h, records)
    assert [(r.earlier, r.later, r.earlier_offset, r.later_offset) for r in result.reordered] == [
        (b, c, 2, 1)
    ]
    assert len(result.offset_mismatches) == 2  # b and c were acknowledged at each other's


def test_order_between_producers_or_partitions_is_free() -> None:
    h = History()
    p0 = h.send("p0", "t", partition=0)
    p1 = h.send("p1", "t", partition=0)
    other = h.send("p0", "t", partition=1)
    p0.ok(0, 1)
    p1.ok(0, 0)
    other.ok(1, 0)
    records = [
        Consumed("t", 0, 0, p1.value),
        Consumed("t", 0, 1, p0.value),
        Consumed("t", 1, 0, other.value),
    ]
    assert check(h, records).ok


def test_offsets_polled_out_of_order_go_backwards() -> None:
    h, sends = two_producers()
    records = read_back(sends)
    swapped = [records[1], records[0], *records[2:]]
    result = check(h, swapped)
    assert result.backwards == [Backwards(("t", 0), 1, 0, 1)]


def test_batches_that_differ_between_isr_members_below_the_high_watermark() -> None:
    leader = [LogBatch(0, 4, 0, 111), LogBatch(5, 9, 0, 222), LogBatch(10, 12, 1, 333)]
    same = list(leader)
    truncated_wrongly = [LogBatch(0, 4, 0, 111), LogBatch(5, 9, 1, 999)]
    logs = {1: leader, 2: same, 3: truncated_wrongly}
    h, sends = two_producers()

    in_sync = ReplicaLogs(high_watermark=10, isr=[1, 2], logs=logs)
    assert check(h, read_back(sends), {("t", 0): in_sync}).ok

    diverged = ReplicaLogs(high_watermark=10, isr=[1, 2, 3], logs=logs)
    result = check(h, read_back(sends), {("t", 0): diverged})
    assert [(d.partition, d.base_offset, dict(d.replicas)) for d in result.divergent_batches] == [
        (("t", 0), 5, {1: leader[1], 2: leader[1], 3: truncated_wrongly[1]})
    ]

    # above the high watermark a follower may lag: not an anomaly
    lagging = ReplicaLogs(high_watermark=10, isr=[1, 2], logs={1: leader, 2: leader[:2]})
    assert check(h, read_back(sends), {("t", 0): lagging}).ok
    # below it, a missing batch is one
    behind = ReplicaLogs(high_watermark=13, isr=[1, 2], logs={1: leader, 2: leader[:2]})
    found = check(h, read_back(sends), {("t", 0): behind}).divergent_batches
    assert [(d.base_offset, d.replicas[2]) for d in found] == [(10, None)]


def test_a_replica_with_older_segments_deleted_is_compared_over_the_common_offsets() -> None:
    leader = [LogBatch(0, 4, 0, 111), LogBatch(5, 9, 0, 222)]
    follower = [LogBatch(5, 9, 0, 222)]
    h = History()
    logs = ReplicaLogs(high_watermark=10, isr=[1, 2], logs={1: leader, 2: follower})
    assert check(h, [], {("t", 0): logs}).ok


# --- against a real broker -----------------------------------------------------------------


def produce_load(bootstrap: str, history: History, topic: str, producers: int, each: int) -> None:
    """`producers` threads, each with its own acks=all idempotent logbus producer."""
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            with logbus.Producer(
                bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=2
            ) as producer:
                for i in range(each):
                    send = history.send(name, topic, key=f"k{i % 7}".encode())
                    send.record_future(producer.send(topic, send.value, key=send.key))
                producer.flush()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"p{i}",)) for i in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors


def read_everything(bootstrap: str, topic: str, expected: int) -> list[Consumed]:
    records: list[Consumed] = []
    with logbus.Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    ) as consumer:
        partitions = consumer.partitions_for_topic(topic)
        consumer.assign([logbus.TopicPartition(topic, p) for p in sorted(partitions)])
        idle = 0
        while len(records) < expected or idle < 3:
            got = [Consumed.of(r) for r in consumer.poll(0.5)]
            records.extend(got)
            idle = 0 if got else idle + 1
            if idle > 40:
                break
    return records


def test_acks_all_load_against_a_real_broker_is_clean(broker_factory: Any) -> None:
    broker = broker_factory(num_partitions="3")
    history = History()
    produce_load(broker.bootstrap, history, "load", producers=3, each=400)
    assert history.count(Outcome.OK) == 1200
    records = read_everything(broker.bootstrap, "load", 1200)
    logs = {
        ("load", p): ReplicaLogs(
            high_watermark=1 + max(r.offset for r in records if r.partition == p),
            isr=[0],
            logs={0: replica_batches(broker.data_dir, "load", p)},
        )
        for p in range(3)
    }
    result = check(history, records, logs)
    assert result.ok, result
    assert (result.acknowledged, result.read) == (1200, 1200)


def test_replica_logs_read_from_segment_files_find_a_changed_batch(
    broker: Any, tmp_path: Path
) -> None:
    history = History()
    produce_load(broker.bootstrap, history, "copied", producers=1, each=200)
    records = read_everything(broker.bootstrap, "copied", 200)
    original = replica_batches(broker.data_dir, "copied", 0)
    assert original[0].base_offset == 0 and original[-1].last_offset == 199
    assert sum(b.last_offset - b.base_offset + 1 for b in original) == 200

    copy = tmp_path / "replica-1"
    shutil.copytree(broker.data_dir / "copied-0", copy / "copied-0")
    segment = next((copy / "copied-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[17] ^= 0xFF  # the first batch's CRC (after offset, length, epoch, magic)
    segment.write_bytes(bytes(data))

    logs = {0: original, 1: replica_batches(copy, "copied", 0)}
    clean = check(history, records, {("copied", 0): ReplicaLogs(200, [0], logs)})
    assert clean.ok, clean  # replica 1 is not in the ISR
    result = check(history, records, {("copied", 0): ReplicaLogs(200, [0, 1], logs)})
    assert [d.base_offset for d in result.divergent_batches] == [0]


@pytest.mark.parametrize(
    ("client", "config"),
    [
        ("logbus", {"acks": "all", "enable_idempotence": True}),
        ("confluent", {"acks": "all", "enable.idempotence": True, "linger.ms": 2}),
    ],
)
def test_a_background_load_of_either_client_against_a_real_broker_is_clean(
    broker_factory: Any, client: Client, config: dict[str, Any]
) -> None:
    broker = broker_factory(num_partitions="2")
    history = History()
    with ProducerLoad(
        broker.bootstrap, history, "bg", producers=2, client=client, **config
    ) as load:
        load.wait_acknowledged(300)
    assert not load.errors
    assert history.count(Outcome.PENDING) == 0  # stop() waited for every outcome
    records = read_all(broker.bootstrap, "bg")
    result = check(history, records)
    assert result.ok, result
    assert result.acknowledged == result.read >= 300
