"""The consumer fetches ahead of poll(): the next fetch of a partition goes out as soon as
poll() takes its last buffered record. Prefetched records must obey pause, seek and
max.poll.records exactly as records fetched on demand, and a partition with nothing new
must not hold up the others (one fetch that makes the broker wait per leader)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from consumer_data import make_topic, poll_until, write

from kafka_wire import wait_for
from logbus import Consumer, TopicPartition, aio

# Longer than any test may take: a fetch that makes the broker wait this long would
# show as a test that never finishes, not as a slow one.
NEVER_MS = 120_000


def _offsets(records: list[Any], partition: int) -> list[int]:
    return [r.offset for r in records if r.partition == partition]


def test_a_partition_at_its_log_end_does_not_hold_up_the_others(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    write(broker.bootstrap, topic, 0, [b"a0", b"a1"])
    for i in range(12):  # one batch per fetch (max.partition.fetch.bytes below)
        write(broker.bootstrap, topic, 1, [b"%d-%d" % (i, j) + b"x" * 300 for j in range(4)])
    expected = 2 + 12 * 4

    async def run() -> list[Any]:
        config = {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest",
                  "fetch.max.wait.ms": NEVER_MS, "max.partition.fetch.bytes": 100,
                  "max.poll.records": 3}
        out: list[Any] = []
        async with aio.Consumer(config) as consumer:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            deadline = time.monotonic() + 60
            while len(out) < expected and time.monotonic() < deadline:
                out += await consumer.poll(timeout_ms=200)
                await asyncio.sleep(0)  # an application that awaits between polls
        return out

    records = asyncio.run(run())
    # Partition 0 is at its end after the first fetch; fetching it alone with
    # fetch.max.wait.ms would park the leader's fetch for two minutes.
    assert len(records) == expected
    assert _offsets(records, 0) == [0, 1]
    assert _offsets(records, 1) == list(range(48))


def test_paused_partition_keeps_its_prefetched_records_until_resumed(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    for p in (0, 1):
        write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(10)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=2) as c:
        c.assign([tp0, tp1])
        first: list[Any] = []
        while not _offsets(first, 0):
            first += poll_until(c.poll, 2)
        c.pause(tp0)
        read0 = _offsets(first, 0)
        assert read0 == list(range(len(read0))) and len(read0) < 10
        # The rest of partition 0 is buffered; none of it comes while it is paused.
        during = poll_until(c.poll, 10 - len(_offsets(first, 1)))
        assert _offsets(during, 0) == []
        assert _offsets(first, 1) + _offsets(during, 1) == list(range(10))
        assert c.poll(0.3) == []
        write(broker.bootstrap, topic, 0, [b"0-late"])
        assert c.poll(0.3) == []
        c.resume(tp0)
        after = poll_until(c.poll, 11 - len(read0))
    assert read0 + _offsets(after, 0) == list(range(11))
    assert after[-1].value == b"0-late"


def test_seek_discards_prefetched_records(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"%d" % i for i in range(6)])
    write(broker.bootstrap, topic, 0, [b"%d" % i for i in range(6, 12)])
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=4) as c:
        c.assign([tp])
        assert [r.offset for r in poll_until(c.poll, 4)] == [0, 1, 2, 3]
        c.seek(tp, 1)  # back, into the buffered batch
        assert [r.offset for r in poll_until(c.poll, 4)] == [1, 2, 3, 4]
        c.seek(tp, 9)  # forward, past what is buffered
        assert [r.offset for r in poll_until(c.poll, 3)] == [9, 10, 11]
        # The first batch was taken whole, so the next fetch went out at offset 6, then
        # 12; a seek back must still start exactly where asked.
        c.seek(tp, 5)
        again = poll_until(c.poll, 7)
    assert [r.offset for r in again] == list(range(5, 12))
    assert [r.value for r in again] == [b"%d" % i for i in range(5, 12)]


def test_reads_a_long_topic_across_many_prefetches(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=3)
    for p in range(3):
        for b in range(20):
            write(broker.bootstrap, topic, p, [b"%d-%d-%d" % (p, b, i) for i in range(25)])
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=2000, max_poll_records=37) as c:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        records = poll_until(c.poll, 3 * 500)
    for p in range(3):
        assert _offsets(records, p) == list(range(500))
        assert [r.value for r in records if r.partition == p] == [
            b"%d-%d-%d" % (p, b, i) for b in range(20) for i in range(25)]


def _write_batches(bootstrap: str, topic: str, batches: int) -> None:
    """`batches` batches of 4 records, each larger than max.partition.fetch.bytes=100
    below, so every fetch brings one batch."""
    for b in range(batches):
        write(bootstrap, topic, 0, [b"%d-%d" % (b, i) + b"x" * 300 for i in range(4)])


def test_fetches_ahead_while_the_application_holds_buffered_records(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    _write_batches(broker.bootstrap, topic, 12)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=100, max_poll_records=1) as c:
        c.assign([tp])
        assert [r.offset for r in poll_until(c.poll, 1)] == [0]
        # poll() is not called again, yet the partition's next fetches keep going out,
        # each from where the one before ended, until the whole log is buffered.
        wait_for(lambda: c.metrics()["fetch-total"] >= 12, what="12 fetches ahead of poll()")
        assert c.position(tp) == 1
        records = poll_until(lambda: c.poll(0.2, max_records=50), 47)
        assert c.position(tp) == 48
    assert [r.offset for r in records] == list(range(1, 48))
    assert [r.value[:4] for r in records[:4]] == [b"0-1x", b"0-2x", b"0-3x", b"1-0x"]


def test_seek_drops_every_fetch_made_ahead(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    _write_batches(broker.bootstrap, topic, 10)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=100, max_poll_records=2) as c:
        c.assign([tp])
        assert [r.offset for r in poll_until(c.poll, 2)] == [0, 1]
        wait_for(lambda: c.metrics()["fetch-total"] >= 10, what="10 fetches ahead of poll()")
        c.seek(tp, 30)  # forward, into data fetched ahead
        assert c.position(tp) == 30
        assert [r.offset for r in poll_until(c.poll, 4)] == [30, 31, 32, 33]
        c.seek(tp, 5)  # back, before everything buffered
        assert c.position(tp) == 5
        first = poll_until(c.poll, 2)
        c.seek_to_beginning(tp)
        again = poll_until(lambda: c.poll(0.2, max_records=50), 40)
    assert [r.offset for r in first] == [5, 6]
    assert [r.offset for r in again] == list(range(40))


def test_paused_partition_is_not_fetched_further_ahead(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    _write_batches(broker.bootstrap, topic, 6)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=100, max_poll_records=1) as c:
        c.assign([tp])
        assert [r.offset for r in poll_until(c.poll, 1)] == [0]
        wait_for(lambda: c.metrics()["fetch-total"] >= 6, what="6 fetches ahead of poll()")
        c.pause(tp)
        assert c.poll(0.2) == []
        _write_batches(broker.bootstrap, topic, 2)
        assert c.poll(0.2) == []
        c.resume(tp)
        records = poll_until(lambda: c.poll(0.2, max_records=50), 31)
    assert [r.offset for r in records] == list(range(1, 32))
