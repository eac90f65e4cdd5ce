"""The sink's fast path (`ArrowProducer`, through `sink.write_batches`): rows land where
Kafka's default partitioner puts them, in order, once each, idempotent and compressed as
configured; the errors a producer gives for impossible rows. Read back with confluent-kafka
and, for the batch headers, with raw Fetch requests. The sticky partitioner's arithmetic
and the grouping of rows by partition are also checked on their own, against their
definitions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from spark_support import consume_all, create_topic

from logbus.client.cluster import Cluster
from logbus.client.partitioner import StickyPartitioner
from logbus.client.requests.fetch import FetchOptions, fetch_many_raw
from logbus.client.requests.produce import produce_many
from logbus.records.batch import BatchHeader
from logbus.records.columnar_encode import encode_batches
from logbus.records.compression import CompressionType
from logbus.spark import sink
from logbus.spark.arrow_producer import ArrowProducer, _by_partition
from logbus.spark.options import LogbusSparkError, parse_write_options
from logbus.spark.sink import write_batches


def write(bootstrap: str, batches: list[pa.RecordBatch], **options: str) -> int:
    raw = {"kafka.bootstrap.servers": bootstrap}
    raw.update({k.replace("__", "."): v for k, v in options.items()})
    return write_batches(parse_write_options(raw), iter(batches))


def raw_batches(bootstrap: str, topic: str, partition: int) -> list[BatchHeader]:
    async def fetch() -> list[BatchHeader]:
        async with await Cluster.connect(bootstrap) as cluster:
            conn = await cluster.leader(topic, partition)
            headers: list[BatchHeader] = []
            offset = 0
            while True:
                result = (await fetch_many_raw(conn, {(topic, partition): offset},
                                               FetchOptions(max_wait_ms=0)))[(topic, partition)]
                assert not isinstance(result, Exception)
                if not result.batches:
                    return headers
                headers.extend(h for _, h in result.batches)
                offset = result.next_offset

    return asyncio.run(fetch())


def kafka_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java client's choice for a keyed record, by kafka-python's murmur2."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


@pytest.mark.parametrize("group_rows", [None, 100])
def test_keys_partitions_and_topics_go_where_kafka_puts_them(
    broker: Any, group_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # group_rows 100: the sink joins Spark's batches (37 rows here) into several groups
    # of at least 100 rows before each call to its producer, not one group of all.
    if group_rows is not None:
        monkeypatch.setattr(sink, "_GROUP_ROWS", group_rows)
    b = broker.bootstrap
    create_topic(b, "left", 5)
    create_topic(b, "right", 3)
    n = 400
    # Null keys, null values (never both: a row is told apart by its value or its key).
    keys = [None if i % 7 == 0 and i % 11 else f"key-{i}".encode() for i in range(n)]
    values = [None if i % 11 == 0 else f"value-{i}" for i in range(n)]  # strings
    partitions = [i % 3 if i % 4 == 0 else None for i in range(n)]
    topics = ["left" if i % 2 else "right" for i in range(n)]
    batch = pa.RecordBatch.from_pydict(
        {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.string()),
         "topic": pa.array(topics), "partition": pa.array(partitions, pa.int32())}
    )
    pieces = [batch.slice(0, 150), batch.slice(150)]
    if group_rows is not None:
        pieces = [batch.slice(i, 37) for i in range(0, n, 37)]
    assert write(b, pieces) == n
    got = {}
    for topic, count in (("left", 5), ("right", 3)):
        for m in consume_all(b, topic, count, topics.count(topic)):
            got[int(m.value().split(b"-")[1]) if m.value() else (topic, m.key())] = (
                m.topic(), m.partition(), m.key(), m.value(), m.offset())
    for i in range(n):
        ident = i if values[i] is not None else (topics[i], keys[i])
        topic, partition, key, value, _ = got[ident]
        assert (topic, key, value) == (topics[i], keys[i], values[i] and values[i].encode())
        if partitions[i] is not None:
            assert partition == partitions[i]
        elif keys[i] is not None:
            assert partition == kafka_partition(keys[i], 5 if topic == "left" else 3)
    # Within a partition, rows keep the order they were given in.
    by_partition: dict[tuple[str, int], list[int]] = {}
    for i in sorted(k for k in got if isinstance(k, int)):
        topic, partition, _, _, offset = got[i]
        by_partition.setdefault((topic, partition), []).append(offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())


def test_keyless_rows_fill_each_partition_in_turn_and_stay_in_order(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "spread", 4)
    n = 3000
    values = [b"%06d" % i + b"x" * 94 for i in range(n)]
    batches = [pa.RecordBatch.from_pydict({"value": pa.array(values[i:i + 500], pa.binary())})
               for i in range(0, n, 500)]
    # Small batches and a small buffer: many batches per partition, several flushes.
    assert write(b, batches, topic="spread", kafka__batch__size="4096",
                 kafka__buffer__memory="50000") == n
    records = consume_all(b, "spread", 4, n)
    assert sorted(m.value() for m in records) == sorted(values)
    per_partition: dict[int, list[bytes]] = {}
    for m in sorted(records, key=lambda m: (m.partition(), m.offset())):
        per_partition.setdefault(m.partition(), []).append(m.value())
    assert set(per_partition) == {0, 1, 2, 3}
    assert all(v == sorted(v) for v in per_partition.values())
    for partition in range(4):
        headers = raw_batches(b, "spread", partition)
        # Idempotent by default: one producer id, sequences following on from 0.
        assert {h.producer_id for h in headers} != {-1}
        assert len({h.producer_id for h in headers}) == 1
        sequence = 0
        for h in headers:
            assert h.base_sequence == sequence and h.size <= 4096 + 200
            sequence += h.record_count


def test_keys_ignored_by_the_partitioner_stick_like_keyless_rows(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "unkeyed", 3)
    n = 1200
    keys = [b"k%d" % (i % 3) for i in range(n)]
    values = [b"%06d" % i + b"y" * 90 for i in range(n)]
    batches = [pa.RecordBatch.from_pydict({"key": pa.array(keys[i:i + 400], pa.binary()),
                                           "value": pa.array(values[i:i + 400], pa.binary())})
               for i in range(0, n, 400)]
    assert write(b, batches, topic="unkeyed", kafka__batch__size="4096",
                 kafka__partitioner__ignore__keys="true") == n
    records = consume_all(b, "unkeyed", 3, n)
    assert sorted((m.key(), m.value()) for m in records) == sorted(zip(keys, values, strict=True))
    partitions_of_key: dict[bytes, set[int]] = {}
    runs: dict[int, list[int]] = {}
    for m in sorted(records, key=lambda m: (m.partition(), m.offset())):
        partitions_of_key.setdefault(m.key(), set()).add(m.partition())
        runs.setdefault(m.partition(), []).append(int(m.value()[:6]))
    # By key, each key would have one partition; sticky, every key is everywhere, and
    # each partition holds runs of rows in order.
    assert all(found == {0, 1, 2} for found in partitions_of_key.values())
    assert all(rows == sorted(rows) for rows in runs.values())


def test_compression_and_idempotence_off(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "packed", 1)
    values = [b"v%d" % i * 20 for i in range(200)]
    batch = pa.RecordBatch.from_pydict({"key": pa.array([b"k"] * 200),
                                        "value": pa.array(values)})
    write(b, [batch], topic="packed", kafka__compression__type="zstd",
          kafka__enable__idempotence="false", kafka__acks="1")
    assert [m.value() for m in consume_all(b, "packed", 1, 200)] == values
    headers = raw_batches(b, "packed", 0)
    assert {h.compression for h in headers} == {CompressionType.ZSTD}
    assert {(h.producer_id, h.base_sequence) for h in headers} == {(-1, -1)}


def test_rows_a_producer_refuses(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "strict", 2)
    bad_partition = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"a", b"b"]), "partition": pa.array([1, 7], pa.int32())}
    )
    with pytest.raises(LogbusSparkError, match=r"Topic 'strict' has no partition 7 \(it has 2\)"):
        write(b, [bad_partition], topic="strict")
    negative = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"a", b"b"]), "partition": pa.array([None, -1], pa.int32())}
    )
    with pytest.raises(LogbusSparkError, match=r"Topic 'strict' has no partition -1"):
        write(b, [negative], topic="strict")
    huge = pa.RecordBatch.from_pydict({"value": pa.array([b"x" * 5000])})
    with pytest.raises(LogbusSparkError, match=r"larger than max\.request\.size=4000"):
        write(b, [huge], topic="strict", kafka__max__request__size="4000")
    nulls = pa.RecordBatch.from_pydict({"value": pa.array([b"a"]),
                                        "topic": pa.array([None], pa.string())})
    with pytest.raises(LogbusSparkError, match="a row has a null 'topic'"):
        write(b, [nulls])
    named = pa.RecordBatch.from_pydict({"value": pa.array([b"a"])})
    with pytest.raises(LogbusSparkError,
                       match=r"cannot write to topic 'bad name!'.*not a valid topic name"):
        write(b, [named], topic="bad name!")
    # Nothing of the refused writes reached the log (the bad rows were checked first).
    assert raw_batches(b, "strict", 0) == [] and raw_batches(b, "strict", 1) == []


def test_a_new_topic_is_created_on_first_write(broker: Any) -> None:
    b = broker.bootstrap
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"first", b"second"])})
    assert write(b, [batch], topic="fresh") == 2
    assert [m.value() for m in consume_all(b, "fresh", 1, 2)] == [b"first", b"second"]


def test_nothing_to_write(broker: Any) -> None:
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary())})
    assert write(broker.bootstrap, [empty], topic="unused") == 0
    assert write(broker.bootstrap, [], topic="unused") == 0


def test_a_broker_restarted_mid_write_loses_and_repeats_nothing(broker_process: Any) -> None:
    # Batches in flight when the broker dies are resent to the restarted broker, which
    # knows (from the producer state it recovered) the ones it had already written.
    proc = broker_process()
    create_topic(proc.bootstrap, "restart", 3)
    n, per_call = 6000, 500
    values = [b"%06d" % i + b"r" * 60 for i in range(n)]

    def calls() -> Iterator[pa.RecordBatch]:
        for start in range(0, n, per_call):
            if start == n // 2:
                proc.kill()
                proc.start()
            yield pa.RecordBatch.from_pydict(
                {"value": pa.array(values[start:start + per_call], pa.binary())}
            )

    options = parse_write_options({"kafka.bootstrap.servers": proc.bootstrap,
                                   "topic": "restart", "kafka.batch.size": "3000",
                                   "kafka.retry.backoff.ms": "20"})
    assert write_batches(options, calls()) == n
    records = consume_all(proc.bootstrap, "restart", 3, n)
    assert sorted(m.value() for m in records) == values
    for partition in range(3):
        mine = [m.value() for m in sorted(records, key=lambda m: m.offset())
                if m.partition() == partition]
        assert mine == sorted(mine)


def test_a_batch_the_broker_refuses_fails_the_write(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "small", 1, **{"max.message.bytes": "2000"})
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v" * 100] * 100)})
    with pytest.raises(LogbusSparkError, match=r"writing to logbus failed: .*max\.message\.bytes"):
        write(b, [batch], topic="small")


def test_a_buffer_smaller_than_the_open_batches(broker: Any) -> None:
    # buffer.memory below one batch per partition: the open batches are sent as they are.
    b = broker.bootstrap
    create_topic(b, "tight", 4)
    keys = [b"k%d" % (i % 13) for i in range(2000)]
    values = [b"%05d" % i for i in range(2000)]
    batches = [pa.RecordBatch.from_pydict({"key": pa.array(keys[i:i + 100]),
                                           "value": pa.array(values[i:i + 100])})
               for i in range(0, 2000, 100)]
    assert write(b, batches, topic="tight", kafka__batch__size="65536",
                 kafka__buffer__memory="1000") == 2000
    records = consume_all(b, "tight", 4, 2000)
    for key in set(keys):
        mine = [m.value() for m in sorted(records, key=lambda m: m.offset()) if m.key() == key]
        assert mine == sorted(mine) and len(mine) == keys.count(key)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3000), st.integers(-1, 3000)), min_size=1,
                max_size=300),
       st.integers(1, 20000), st.integers(1, 7), st.integers(0, 6), st.integers(0, 19999),
       st.booleans())
def test_keyless_rows_stick_to_a_partition_for_batch_size_bytes(
    lengths: list[tuple[int, int]], batch_size: int, count: int, current: int, filled: int,
    keys_null: bool,
) -> None:
    # KIP-480: each row goes (current + bytes before it // batch.size) % count on, its
    # bytes counted as Kafka's producer counts them; the next rows go on from there.
    producer = ArrowProducer({"bootstrap.servers": "127.0.0.1:9",
                              "batch.size": str(batch_size + 61)})
    assert producer.batch_size == batch_size
    current, filled = current % count, filled % batch_size
    producer.sticky["t"] = StickyPartitioner(count, current, filled)
    key_lengths = np.array([-1 if keys_null else k for k, _ in lengths], np.int64)
    value_lengths = np.array([v for _, v in lengths], np.int64)
    sizes = np.maximum(key_lengths, 0) + np.maximum(value_lengths, 0) + 21
    before = filled + np.cumsum(sizes) - sizes
    chosen = producer._sticky("t", count, None if keys_null else key_lengths, value_lengths)
    assert chosen.tolist() == ((current + before // batch_size) % count).tolist()
    total = filled + int(sizes.sum())
    sticky = producer.sticky["t"]
    assert (sticky.current, sticky.filled) == ((current + total // batch_size) % count,
                                               total % batch_size)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 40)), min_size=1, max_size=30),
       st.integers(0, 3))
def test_rows_by_partition_keep_their_order(runs: list[tuple[int, int]], gaps: int) -> None:
    # Runs of rows to one partition (sticky rows) or rows all over (keyed ones): each
    # partition gets its rows in order, every row once.
    chosen = np.array([p for p, n in runs for _ in range(n)], np.int64)
    rows = np.arange(len(chosen), dtype=np.int64) * (gaps + 1)
    got: dict[int, list[int]] = {}
    for partition, part_rows in _by_partition(chosen, rows, 5):
        assert len(part_rows)
        got.setdefault(partition, []).extend(part_rows.tolist())
    assert got == {p: rows[chosen == p].tolist() for p in set(chosen.tolist())}


def test_spark_batches_are_joined_in_order_up_to_a_group_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sink, "_GROUP_ROWS", 100)
    monkeypatch.setattr(sink, "_GROUP_BYTES", 1 << 30)
    sizes = [30, 0, 50, 40, 120, 10, 0, 5]
    batches, start = [], 0
    for size in sizes:
        batches.append(pa.RecordBatch.from_pydict({
            "value": pa.array([b"v%d" % i for i in range(start, start + size)], pa.binary()),
            "key": pa.array([None if i % 3 else b"k%d" % i for i in range(start, start + size)],
                            pa.binary()),
        }))
        start += size
    groups = list(sink._groups(iter(batches)))
    # A group ends once it holds 100 rows; empty batches are dropped; the rest at the end.
    assert [g.num_rows for g in groups] == [120, 120, 15]
    assert groups[1] is batches[4]  # a batch that fills a group alone is not copied
    joined = pa.Table.from_batches(groups)
    assert joined.column("value").to_pylist() == [b"v%d" % i for i in range(start)]
    assert joined.column("key").to_pylist() == [
        None if i % 3 else b"k%d" % i for i in range(start)
    ]
    monkeypatch.setattr(sink, "_GROUP_BYTES", 1)  # every batch is a group of its own
    assert [g.num_rows for g in sink._groups(iter(batches))] == [30, 50, 40, 120, 10, 5]


def test_a_sequence_the_broker_lost_bumps_the_epoch_and_the_write_goes_on(broker: Any) -> None:
    # The sink's batches go through the producer's own sender, so when the broker no
    # longer agrees with it on the sequence (here: a batch of its producer id and epoch
    # written behind its back), the sender asks for a bumped epoch and resends from
    # sequence 0 (KIP-360), as `Producer.send` does, rather than failing the task. (The
    # broker follows Kafka 2.5+ and answers OUT_OF_ORDER_SEQUENCE_NUMBER there, never
    # UNKNOWN_PRODUCER_ID; the sender handles both by bumping the epoch.)
    b = broker.bootstrap
    create_topic(b, "lost", 1)
    first = [b"first-%d" % i for i in range(50)]
    second = [b"second-%d" % i for i in range(20)]

    def rows(values: list[bytes]) -> tuple[pa.Array, pa.Array, list[tuple[str, Any]]]:
        return (pa.nulls(len(values), pa.binary()), pa.array(values, pa.binary()),
                [("lost", np.arange(len(values), dtype=np.int64))])

    async def main() -> None:
        producer = ArrowProducer({"bootstrap.servers": b, "retry.backoff.ms": "10"})
        try:
            keys, values, topics = rows(first)
            await producer.send(keys, values, topics, None)
            await producer.flush()
            (header,) = await asyncio.to_thread(raw_batches, b, "lost", 0)
            intruder = encode_batches(
                pa.nulls(1, pa.binary()), pa.array([b"intruder"], pa.binary()), [1],
                timestamp=0, producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequences=[header.base_sequence + len(first)],
            )[0]
            async with await Cluster.connect(b) as cluster:
                conn = await cluster.leader("lost", 0)
                result = (await produce_many(conn, {("lost", 0): intruder}))
                assert result is not None
                assert not isinstance(result[("lost", 0)], Exception)
            keys, values, topics = rows(second)
            await producer.send(keys, values, topics, None)
            await producer.flush()
        finally:
            await producer.close()

    asyncio.run(main())
    headers = raw_batches(b, "lost", 0)
    assert len({h.producer_id for h in headers}) == 1
    epochs = [(h.producer_epoch, h.base_sequence) for h in headers]
    epoch = epochs[0][0]
    assert epochs == [(epoch, 0), (epoch, len(first)), (epoch + 1, 0)]
    assert [m.value() for m in consume_all(b, "lost", 1, 71)] == [*first, b"intruder", *second]
