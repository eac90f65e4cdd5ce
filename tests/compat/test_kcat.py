"""kcat (the librdkafka command-line client) against a real broker: every codec, record
shapes, size limits, partitioning, idempotence, acks, offsets, timestamps and queries.

kcat reads messages as text lines, so these records are text; `-H` headers apply to every
message of a run. `make test` installs kcat from apt; without it these tests are skipped."""

from __future__ import annotations

import json
import random
import string
import time
import zlib
from typing import Any

import pytest
from compat_clients import (
    CODECS,
    KCAT,
    MESSAGE_MAX_BYTES,
    Got,
    check_librdkafka_codec,
    kcat,
    kcat_consume,
    kcat_produce,
    log_end_offset,
    new_topic,
    stored_batches,
)

from kafka_wire import WireClient, create_topic, wait_for
from logbus.records.builder import NewRecord, build_batch

pytestmark = [
    pytest.mark.skipif(KCAT is None, reason="kcat is not on PATH (`make test` installs it)"),
    pytest.mark.timeout(90),
]

HEADERS = ("h1=one", "h2=two", "h1=again")
HEADER_PAIRS = (("h1", b"one"), ("h2", b"two"), ("h1", b"again"))


def text(n: int, seed: int = 0) -> bytes:
    rnd = random.Random(seed)
    return "".join(rnd.choices(string.ascii_letters + string.digits, k=n)).encode()


def lines_for_round_trip() -> list[tuple[bytes | None, bytes]]:
    lines: list[tuple[bytes | None, bytes]] = []
    for i in range(30):
        if i % 5 == 1:
            lines.append((None, f"keyless-{i}".encode()))  # no delimiter: no key
        elif i % 5 == 2:
            lines.append((f"key-{i}".encode(), b""))  # empty value
        else:
            value = f"value-{i}-".encode() + b"pad" * 10 + text(i * 10, i)
            lines.append((f"key-{i}".encode(), value))
    return lines


def check_produced(proc: Any) -> None:
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_every_codec(broker: Any, codec: str) -> None:
    topic = new_topic()
    lines = lines_for_round_trip()
    # one batch (a long linger), so that compression always pays and librdkafka uses it
    compression = ["-X", "linger.ms=200"] + ([] if codec == "none" else ["-z", codec])
    check_produced(kcat_produce(broker.bootstrap, topic, lines, headers=HEADERS, extra=compression))
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", len(lines))
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (i, key, value, HEADER_PAIRS) for i, (key, value) in enumerate(lines)
    ]
    # What kcat reads is what the broker stored, byte for byte.
    with WireClient(broker.bootstrap) as client:
        stored = client.read_all(topic, 0)
    assert [Got(0, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in stored] == got
    check_librdkafka_codec(broker.bootstrap, topic, codec, old_feature_map=True)


def test_empty_messages_as_null_with_Z(broker: Any) -> None:
    topic = new_topic()
    lines: list[tuple[bytes | None, bytes]] = [(b"k1", b""), (b"k2", b"v2"), (b"k3", b"")]
    check_produced(kcat_produce(broker.bootstrap, topic, lines, extra=["-Z"]))
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", 3)
    assert [(r.key, r.value) for r in got] == [(b"k1", None), (b"k2", b"v2"), (b"k3", None)]
    with WireClient(broker.bootstrap) as client:
        assert [r.value for r in client.read_all(topic, 0)] == [None, b"v2", None]


def test_large_record_just_under_message_max_bytes(broker: Any) -> None:
    topic = new_topic()
    value = text(MESSAGE_MAX_BYTES - 200, 7)
    check_produced(kcat_produce(broker.bootstrap, topic, [(b"big", value)]))
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", 1)
    assert [(r.key, r.value) for r in got] == [(b"big", value)]


def test_record_over_message_max_bytes_is_rejected_and_not_stored(broker: Any) -> None:
    topic = new_topic()
    check_produced(kcat_produce(broker.bootstrap, topic, [(b"k", b"small")]))
    proc = kcat_produce(
        broker.bootstrap, topic, [(b"big", text(MESSAGE_MAX_BYTES, 3))], extra=["-X", "retries=0"]
    )
    assert proc.returncode != 0
    assert b"too large" in proc.stderr.lower(), proc.stderr
    assert log_end_offset(broker.bootstrap, topic) == 1
    check_produced(kcat_produce(broker.bootstrap, topic, [(b"k", b"after")]))
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", 2)
    assert [(r.offset, r.value) for r in got] == [(0, b"small"), (1, b"after")]


def test_keyed_records_over_twelve_partitions(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 12)
    keys = [f"user-{k}".encode() for k in range(48)]
    lines: list[tuple[bytes | None, bytes]] = [
        (keys[i % len(keys)], f"v{i}".encode()) for i in range(480)
    ]
    check_produced(kcat_produce(broker.bootstrap, topic, lines))
    by_partition: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for key, value in lines:
        assert key is not None
        # librdkafka's default partitioner: CRC-32 of the key
        by_partition.setdefault(zlib.crc32(key) % 12, []).append((key, value))
    assert len(by_partition) > 6
    for partition in range(12):
        sent = by_partition.get(partition, [])
        assert log_end_offset(broker.bootstrap, topic, partition) == len(sent)
        if sent:
            got = kcat_consume(broker.bootstrap, topic, partition, "beginning", len(sent))
            assert [(r.offset, r.key, r.value) for r in got] == [
                (i, k, v) for i, (k, v) in enumerate(sent)
            ]


def test_idempotent_producer(broker: Any) -> None:
    topic = new_topic()
    lines: list[tuple[bytes | None, bytes]] = [(b"k", f"v{i}".encode()) for i in range(200)]
    check_produced(
        kcat_produce(broker.bootstrap, topic, lines, extra=["-X", "enable.idempotence=true"])
    )
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", 200)
    assert [(r.offset, r.value) for r in got] == [(i, v) for i, (_k, v) in enumerate(lines)]
    batches = stored_batches(broker.bootstrap, topic)
    assert len({b.producer_id for b in batches}) == 1
    assert batches[0].producer_id >= 0
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: Any, acks: str) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    lines: list[tuple[bytes | None, bytes]] = [(None, f"a{acks}-{i}".encode()) for i in range(100)]
    check_produced(kcat_produce(broker.bootstrap, topic, lines, extra=["-X", f"acks={acks}"]))
    wait_for(lambda: log_end_offset(broker.bootstrap, topic) == 100)
    got = kcat_consume(broker.bootstrap, topic, 0, "beginning", 100)
    assert [r.value for r in got] == [v for _k, v in lines]


def test_start_at_absolute_and_relative_offsets(broker: Any) -> None:
    topic = new_topic()
    lines: list[tuple[bytes | None, bytes]] = [(None, f"v{i}".encode()) for i in range(30)]
    check_produced(kcat_produce(broker.bootstrap, topic, lines))
    got = kcat_consume(broker.bootstrap, topic, 0, 17, 13)
    assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(17, 30)]
    got = kcat_consume(broker.bootstrap, topic, 0, -5, 5)  # the last five
    assert [r.offset for r in got] == list(range(25, 30))


def produce_with_timestamps(bootstrap: str, topic: str, base: int, n: int) -> None:
    batch = build_batch([NewRecord(None, f"v{i}".encode(), (), base + i * 1000) for i in range(n)])
    with WireClient(bootstrap) as client:
        assert client.produce(topic, 0, batch)["error_code"] == 0


def query_offset(bootstrap: str, topic: str, timestamp: int) -> int:
    proc = kcat("-b", bootstrap, "-Q", "-t", f"{topic}:0:{timestamp}", "-J")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    result = json.loads(proc.stdout)
    return int(result[topic]["0"]["offset"])


def test_consume_from_a_timestamp_and_query_offsets_for_times(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 100_000
    produce_with_timestamps(broker.bootstrap, topic, base, 20)
    got = kcat_consume(broker.bootstrap, topic, 0, f"s@{base + 12_345}", 7)
    assert [(r.offset, r.timestamp) for r in got] == [(i, base + i * 1000) for i in range(13, 20)]
    assert query_offset(broker.bootstrap, topic, base + 5000) == 5
    assert query_offset(broker.bootstrap, topic, base + 5500) == 6
    assert query_offset(broker.bootstrap, topic, base - 1) == 0


def test_query_earliest_and_latest(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 1)
    assert query_offset(broker.bootstrap, topic, -2) == 0
    assert query_offset(broker.bootstrap, topic, -1) == 0
    check_produced(kcat_produce(broker.bootstrap, topic, [(None, b"x")] * 25))
    assert query_offset(broker.bootstrap, topic, -2) == 0
    assert query_offset(broker.bootstrap, topic, -1) == 25


def test_metadata_listing(broker: Any) -> None:
    topic = new_topic()
    create_topic(broker.bootstrap, topic, 12)
    proc = kcat("-b", broker.bootstrap, "-L", "-J", "-t", topic)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    listing = json.loads(proc.stdout)
    (entry,) = [t for t in listing["topics"] if t["topic"] == topic]
    assert sorted(p["partition"] for p in entry["partitions"]) == list(range(12))
    assert [b["id"] for b in listing["brokers"]] == [0]
