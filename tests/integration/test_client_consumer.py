"""logbus.Consumer and logbus.aio.Consumer against a real broker: assign, poll,
iteration, seek, position, committed offsets, pause/resume, offsets_for_times."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import pytest
from consumer_data import make_topic, new_name, poll_until, values_of, write

from kafka_wire import wait_for
from logbus import (
    ConfigError,
    Consumer,
    ConsumerRebalanceListener,
    NoOffsetForPartitionError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    TopicPartition,
    aio,
)
from logbus.client.consumer.records import IllegalStateError


def test_assign_poll_reads_every_record_in_order(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    write(broker.bootstrap, topic, 0, [b"a0", b"a1", b"a2"], keys=[b"k", None, b"k"],
          headers=[("h", b"x")])
    write(broker.bootstrap, topic, 1, [b"b0", b"b1"])
    with Consumer({"bootstrap.servers": broker.bootstrap}, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        records = poll_until(c.poll, 5)
    by_partition = {p: [r for r in records if r.partition == p] for p in (0, 1)}
    assert values_of(by_partition[0]) == [b"a0", b"a1", b"a2"]
    assert values_of(by_partition[1]) == [b"b0", b"b1"]
    first = by_partition[0][0]
    assert (first.topic, first.offset, first.key, first.headers) == (topic, 0, b"k", (("h", b"x"),))
    assert by_partition[0][1].key is None
    assert first.timestamp > 0 and first.timestamp_type == 0


def test_latest_reset_reads_only_new_records(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"old"])
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([tp])
        assert c.position(tp) == 1
        write(broker.bootstrap, topic, 0, [b"new"])
        assert values_of(poll_until(c.poll, 1)) == [b"new"]


def test_iteration_yields_records(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"%d" % i for i in range(20)])
    got: list[bytes] = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=3) as c:
        c.assign([TopicPartition(topic, 0)])
        for record in c:
            got.append(record.value)
            if len(got) == 20:
                break
    assert got == [b"%d" % i for i in range(20)]


def test_max_poll_records_caps_each_poll(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"v"] * 10)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=4) as c:
        c.assign([TopicPartition(topic, 0)])
        sizes: list[int] = []
        poll_until(lambda: sizes.append(len(got := c.poll(1.0))) or got, 10)
    assert sum(sizes) == 10
    assert max(sizes) <= 4


def test_seek_position_and_seek_to_end_and_beginning(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"%d" % i for i in range(10)])
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 7)
        assert c.position(tp) == 7
        assert values_of(poll_until(c.poll, 3)) == [b"7", b"8", b"9"]
        assert c.position(tp) == 10
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        assert values_of(poll_until(c.poll, 10))[0] == b"0"
        c.seek(tp, 2)
        c.seek_to_end()
        assert c.position(tp) == 10
        assert c.poll(0.2) == []
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        with pytest.raises(ValueError, match="negative"):
            c.seek(tp, -1)
        with pytest.raises(IllegalStateError, match="not assigned"):
            c.seek(TopicPartition(topic, 5), 0)


def test_commit_and_committed_with_assign(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    write(broker.bootstrap, topic, 0, [b"a", b"b", b"c"])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    group = new_name("g")
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    with Consumer(conf) as c:
        c.assign([tp0, tp1])
        assert c.committed([tp0, tp1]) == {tp0: None, tp1: None}
        assert values_of(poll_until(c.poll, 3)) == [b"a", b"b", b"c"]
        c.commit()
        assert c.committed([tp0]) == {tp0: OffsetAndMetadata(3, "")}
        c.commit({tp0: OffsetAndMetadata(2, "note")})
        assert c.committed([tp0]) == {tp0: OffsetAndMetadata(2, "note")}
        done = c.commit_async({tp0: 1})
        done.result(10)
        assert c.committed([tp0])[tp0] == OffsetAndMetadata(1, "")
    # A new consumer of the group starts where the group left off.
    with Consumer(conf) as c:
        c.assign([tp0])
        assert c.position(tp0) == 1
        assert values_of(poll_until(c.poll, 2)) == [b"b", b"c"]


def test_auto_commit_commits_consumed_positions(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"a", b"b"])
    tp = TopicPartition(topic, 0)
    group = new_name("g")
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "auto.commit.interval.ms": 50}
    with Consumer(conf) as c:
        c.assign([tp])
        poll_until(c.poll, 2)
        deadline = time.monotonic() + 20
        while c.committed([tp])[tp] != OffsetAndMetadata(2, ""):
            assert time.monotonic() < deadline, "auto-commit never committed"
            c.poll(0.1)
    with Consumer(conf, enable_auto_commit=False) as c:
        assert c.committed([tp])[tp] == OffsetAndMetadata(2, "")


def test_close_commits_with_auto_commit(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"a", b"b", b"c"])
    tp = TopicPartition(topic, 0)
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": new_name("g"),
            "auto.offset.reset": "earliest"}
    with Consumer(conf) as c:
        c.assign([tp])
        poll_until(c.poll, 3)
    with Consumer(conf) as c:
        assert c.committed([tp])[tp] == OffsetAndMetadata(3, "")


def test_pause_and_resume(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    write(broker.bootstrap, topic, 0, [b"a0"])
    write(broker.bootstrap, topic, 1, [b"b0"])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp0, tp1])
        c.pause(tp1)
        assert c.paused() == {tp1}
        assert values_of(poll_until(c.poll, 1)) == [b"a0"]
        assert c.poll(0.5) == []
        c.resume(tp1)
        assert c.paused() == set()
        assert values_of(poll_until(c.poll, 1)) == [b"b0"]


def test_offsets_for_times(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"a", b"b", b"c"], timestamps=[1000, 2000, 3000])
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        found = c.offsets_for_times({tp: 1500})
        assert found[tp] is not None
        assert (found[tp].offset, found[tp].timestamp) == (1, 2000)
        assert c.offsets_for_times({tp: 3000})[tp] == (2, 3000)
        assert c.offsets_for_times({tp: 5000}) == {tp: None}


def test_bad_config_is_rejected_with_a_message() -> None:
    with pytest.raises(ConfigError, match=r"unknown consumer config 'auto\.offset\.rest'.*"
                                          r"auto\.offset\.reset"):
        Consumer({"auto.offset.rest": "earliest"})
    with pytest.raises(ConfigError, match="max_poll_recrds"):
        Consumer(max_poll_recrds=5)
    with pytest.raises(ConfigError, match=r"auto\.offset\.reset='sometimes' is not one of"):
        Consumer(auto_offset_reset="sometimes")
    with pytest.raises(ConfigError, match=r"unknown partition assignment strategy 'fancy'"):
        aio.Consumer(partition_assignment_strategy=["fancy"])
    with pytest.raises(ConfigError, match="must be a number"):
        aio.Consumer({"max.poll.records": "many"})


def test_subscribe_needs_a_group_and_poll_needs_a_subscription(broker: Any) -> None:
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        with pytest.raises(IllegalStateError, match=r"needs a group\.id"):
            c.subscribe(["t"])
        with pytest.raises(IllegalStateError, match="not subscribed"):
            c.poll(0)


def test_asyncio_consumer_poll_iteration_and_commit(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"%d" % i for i in range(5)])
    tp = TopicPartition(topic, 0)
    group = new_name("g")

    async def main() -> None:
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group}
        async with aio.Consumer(conf, auto_offset_reset="earliest",
                                enable_auto_commit=False) as c:
            c.assign([tp])
            got = []
            async for record in c:
                got.append(record.value)
                if len(got) == 5:
                    break
            assert got == [b"%d" % i for i in range(5)]
            assert await c.position(tp) == 5
            await c.commit()
            assert await c.committed([tp]) == {tp: OffsetAndMetadata(5, "")}
            assert await c.poll(timeout_ms=100) == []

    asyncio.run(main())


def test_deserializers(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b'{"n": 1}', None], keys=[b"k\xc3\xa9", None])
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  key_deserializer="str", value_deserializer="json") as c:
        c.assign([(topic, 0)])
        records = poll_until(c.poll, 2)
    assert [(r.key, r.value) for r in records] == [("ké", {"n": 1}), (None, None)]


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_offset_out_of_range_applies_auto_offset_reset(broker: Any, policy: str) -> None:
    topic = make_topic(broker.bootstrap)
    write(broker.bootstrap, topic, 0, [b"a", b"b", b"c"])
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset=policy) as c:
        c.assign([tp])
        c.seek(tp, 100)
        if policy == "none":
            with pytest.raises(OffsetOutOfRangeError, match=f"{topic}-0 at 100"):
                poll_until(lambda: c.poll(1.0), 1)
            # It stays raised until the application seeks somewhere valid.
            with pytest.raises(OffsetOutOfRangeError):
                c.poll(0)
            c.seek(tp, 1)
            assert values_of(poll_until(c.poll, 2)) == [b"b", b"c"]
        elif policy == "earliest":
            assert values_of(poll_until(c.poll, 3)) == [b"a", b"b", b"c"]
        else:
            wait_for(lambda: c.poll(0.1) == [] and c.position(tp) == 3)
            write(broker.bootstrap, topic, 0, [b"d"])
            assert values_of(poll_until(c.poll, 1)) == [b"d"]


def test_no_committed_offset_and_no_reset_policy_raises(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=new_name("g"),
                  auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(NoOffsetForPartitionError, match=f"{topic}-0"):
            c.poll(0.1)
        c.seek_to_beginning()
        assert c.position(tp) == 0


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_reads_every_codec_confluent_kafka_writes(broker: Any, codec: str) -> None:
    from confluent_kafka import Producer

    topic = make_topic(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "linger.ms": 20})
    values = [b"value-%d-" % i + b"x" * (i % 50) for i in range(300)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=b"k%d" % i, partition=0,
                         headers=[("n", b"%d" % i)])
    assert producer.flush(30) == 0
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        records = poll_until(c.poll, 300)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [b"k%d" % i for i in range(300)]
    assert [r.offset for r in records] == list(range(300))
    assert records[7].headers == (("n", b"7"),)


def test_blocking_listener_runs_in_the_polling_thread_and_may_use_the_consumer(
    broker: Any,
) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    for p in range(2):
        write(broker.bootstrap, topic, p, [b"%d-%d" % (p, i) for i in range(4)])
    seen: list[tuple[str, list[TopicPartition], bool]] = []

    class SkipTwo(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
            seen.append(("assigned", list(assigned), threading.current_thread() is caller))
            for tp in assigned:
                c.seek(tp, 2)
                assert c.position(tp) == 2

        def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
            seen.append(("revoked", list(revoked), threading.current_thread() is caller))
            c.commit()

    caller = threading.current_thread()
    group = new_name("g")
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                 auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.subscribe([topic], listener=SkipTwo())
        records = poll_until(c.poll, 4)
        assert sorted(r.value for r in records) == [b"0-2", b"0-3", b"1-2", b"1-3"]
    finally:
        c.close()
    both = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert seen == [("assigned", both, True), ("revoked", both, True)]
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group) as c2:
        assert c2.committed(both) == {tp: OffsetAndMetadata(4, "") for tp in both}


def test_consumer_carries_on_across_a_broker_restart(broker_factory: Any) -> None:
    broker = broker_factory()
    topic = make_topic(broker.bootstrap, partitions=2)
    for p in range(2):
        write(broker.bootstrap, topic, p, [b"%d-a" % p])
    group = new_name("g")
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group,
                  auto_offset_reset="earliest", heartbeat_interval_ms=200,
                  reconnect_backoff_ms=20, retry_backoff_ms=50) as c:
        c.subscribe([topic])
        assert sorted(values_of(poll_until(c.poll, 2))) == [b"0-a", b"1-a"]
        c.commit()
        broker.restart()
        for p in range(2):
            write(broker.bootstrap, topic, p, [b"%d-b" % p])
        assert sorted(values_of(poll_until(c.poll, 2))) == [b"0-b", b"1-b"]
        wait_for(lambda: _commits(c), 30)
        both = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert c.committed(both) == {tp: OffsetAndMetadata(2, "") for tp in both}


def _commits(c: Consumer) -> bool:
    """Commit, or report the retriable failure a just-restarted broker may give."""
    from logbus import KafkaError

    try:
        c.commit()
    except KafkaError:
        return False
    return True


def test_small_fetch_limits_still_read_everything(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    for p in range(2):
        for i in range(5):
            write(broker.bootstrap, topic, p, [b"%d-%d-" % (p, i) + b"x" * 500])
    # Each fetch returns at least one whole batch, whatever the limits say (KIP-74).
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=100, fetch_max_bytes=200, fetch_min_bytes=1,
                  fetch_max_wait_ms=10) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        records = poll_until(c.poll, 10)
    assert sorted(r.value[:4] for r in records) == sorted(
        b"%d-%d-" % (p, i) for p in range(2) for i in range(5))


def test_blocking_calls_after_close_raise(broker: Any) -> None:
    consumer = Consumer(bootstrap_servers=broker.bootstrap)
    consumer.close()
    consumer.close()  # closing twice is harmless
    with pytest.raises(RuntimeError, match="logbus-consumer is closed"):
        consumer.poll(0.1)
    with pytest.raises(RuntimeError, match="logbus-consumer is closed"):
        consumer.assignment()
    gc.collect()  # a call left unawaited would warn here (warnings are errors)


def test_poll_columns_hands_out_what_poll_does_as_columns(broker: Any) -> None:
    topic = make_topic(broker.bootstrap, partitions=2)
    write(broker.bootstrap, topic, 0, [b"a0", None, b"a2"], keys=[b"k", None, b"k"],
          timestamps=[5_000, 3_000, 9_000], headers=[("h", b"x")])
    write(broker.bootstrap, topic, 0, [b"a3", b"a4"])  # a batch without headers
    write(broker.bootstrap, topic, 1, [b"b%d" % i for i in range(700)],
          timestamps=list(range(700)))
    total = 705

    async def read(columns: bool) -> list[tuple[Any, ...]]:
        async with aio.Consumer({"bootstrap.servers": broker.bootstrap},
                                auto_offset_reset="earliest", max_poll_records=250) as c:
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            out: list[tuple[Any, ...]] = []
            deadline = time.monotonic() + 30
            while len(out) < total and time.monotonic() < deadline:
                if not columns:
                    polled = await c.poll(1000)
                    assert len(polled) <= 250
                    out += map(tuple, polled)
                    continue
                pieces = await c.poll_columns(1000)
                assert sum(len(piece.offsets) for piece in pieces) <= 250
                for piece in pieces:
                    count = len(piece.offsets)
                    assert len(piece.keys) == len(piece.values) == len(piece.timestamps) == count
                    out += zip(repeat(piece.topic), repeat(piece.partition), piece.offsets,
                               piece.timestamps, repeat(piece.timestamp_type), piece.keys,
                               piece.values, piece.headers or repeat((), count), strict=False)
            assert [await c.position(TopicPartition(topic, p)) for p in (0, 1)] == [5, 700]
        return out

    by_records = asyncio.run(read(columns=False))
    assert len(by_records) == total
    assert asyncio.run(read(columns=True)) == by_records


def test_poll_columns_refuses_a_consumer_with_deserializers(broker: Any) -> None:
    topic = make_topic(broker.bootstrap)

    async def main() -> None:
        async with aio.Consumer({"bootstrap.servers": broker.bootstrap},
                                value_deserializer="str") as c:
            c.assign([TopicPartition(topic, 0)])
            with pytest.raises(IllegalStateError, match="deserializers"):
                await c.poll_columns(0)

    asyncio.run(main())
