"""The same produce and consume operations through each third-party client.

Each `*_produce` sends `Msg`s in order and returns one `Delivery` per message (partition,
offset, error code) as the client reported it; each `*_consume` reads `count` records of
one partition from `start` with manual assignment (consumer groups are tested in
`test_groups_*.py`) and returns them as `Got`s, in the shape every client can express.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_wire import WireClient
from logbus.protocol import ApiKey
from logbus.records.batch import BatchHeader, split_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# The broker's default message.max.bytes: the largest record batch it accepts.
MESSAGE_MAX_BYTES = 1048588
# Client-side limits well above the broker's, so that the broker is the one to decide.
CLIENT_MAX_REQUEST = 4 * 1024 * 1024

CONSUME_TIMEOUT = 20.0
KCAT = shutil.which("kcat")


@dataclass(frozen=True)
class Msg:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class Delivery:
    partition: int
    offset: int
    error: int | None  # Kafka error code (or the client's code) when delivery failed


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def sample_messages(
    n: int = 40, base_ts: int | None = None, *, null_header: bool = True
) -> list[Msg]:
    """Records covering keys, null keys, headers (repeated, empty and null values),
    tombstones, empty values, binary bytes and explicit timestamps. kafka-python cannot
    send a header with a null value: `null_header=False` leaves that one out."""
    base = base_ts if base_ts is not None else int(time.time() * 1000) - 60_000
    out: list[Msg] = []
    for i in range(n):
        kind = i % 8
        key: bytes | None = f"key-{i}".encode()
        value: bytes | None = (
            f"value-{i}-".encode() + b"pad" * 20 + bytes(range(256))[: i * 7 % 256]
        )
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if kind == 1:
            key = None
        elif kind == 2:
            value = None  # tombstone
        elif kind == 3:
            value = b""
        elif kind == 4:
            headers = (("h1", b"one"), ("h2", bytes([0, 255, 10])), ("h1", b"again"))
        elif kind == 5:
            headers = (("empty", b""), ("null", None)) if null_header else (("empty", b""),)
        elif kind == 6:
            key = b""
        out.append(Msg(key, value, headers, base + i * 10))
    return out


def expected(msgs: Sequence[Msg], partition: int = 0, start: int = 0) -> list[Got]:
    return [
        Got(partition, start + i, m.key, m.value, m.headers, m.timestamp or -1)
        for i, m in enumerate(msgs)
    ]


def strip_timestamps(records: Sequence[Got]) -> list[Got]:
    return [Got(r.partition, r.offset, r.key, r.value, r.headers, -1) for r in records]


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> list[BatchHeader]:
    """The headers of the batches the broker stored, fetched raw from offset 0."""
    with WireClient(bootstrap) as client:
        part = client.fetch(topic, partition, 0)
    assert part["error_code"] == 0, part["error_code"]
    return [header for _position, header in split_batches(part["records"])]


def advertised_apis(bootstrap: str) -> dict[int, tuple[int, int]]:
    with WireClient(bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "compat", "client_software_version": "1"
        })  # fmt: skip
    return {e["api_key"]: (e["min_version"], e["max_version"]) for e in response["api_keys"]}


def check_librdkafka_codec(
    bootstrap: str, topic: str, codec: str, *, old_feature_map: bool
) -> None:
    """The broker stored the batches compressed as asked.

    librdkafka decides which codecs a broker supports from the API versions it advertises:
    lz4 needs FindCoordinator (advertised); older librdkafka (kcat from
    Debian 12 has 2.0.2) also ties gzip and snappy to Produce v2, which this broker, like
    Kafka 4.0, no longer serves. Without them librdkafka silently sends batches
    uncompressed; these cases are expected failures until the broker advertises the APIs.
    """
    codecs = {b.compression for b in stored_batches(bootstrap, topic)}
    apis = advertised_apis(bootstrap)
    reason = None
    if codec == "lz4" and ApiKey.FIND_COORDINATOR not in apis:
        reason = "librdkafka disables lz4 for brokers without FindCoordinator"
    elif old_feature_map and codec in ("gzip", "snappy") and apis[ApiKey.PRODUCE][0] > 2:
        reason = f"old librdkafka disables {codec} for brokers without Produce v2"
    if reason is not None:
        assert codecs == {CODEC_IDS["none"]}
        pytest.xfail(reason)
    assert codecs == {CODEC_IDS[codec]}


def log_end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    with WireClient(bootstrap) as client:
        error, offset, _ts = client.list_offset(topic, partition, -1)
    assert error == 0, error
    return offset


# -- confluent-kafka ------------------------------------------------------------------------


def confluent_produce(
    bootstrap: str, topic: str, msgs: Sequence[Msg], config: dict[str, Any] | None = None
) -> list[Delivery]:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "message.max.bytes": CLIENT_MAX_REQUEST,
        "message.timeout.ms": 20000,
        **(config or {}),
    }
    producer = Producer(conf)
    results: list[Delivery | None] = [None] * len(msgs)

    def on_delivery(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            results[i] = Delivery(
                msg.partition(), msg.offset(), None if err is None else err.code()
            )

        return cb

    for i, m in enumerate(msgs):
        kwargs: dict[str, Any] = {}
        if m.partition is not None:
            kwargs["partition"] = m.partition
        if m.timestamp is not None:
            kwargs["timestamp"] = m.timestamp
        if m.headers:
            kwargs["headers"] = list(m.headers)
        producer.produce(topic, value=m.value, key=m.key, on_delivery=on_delivery(i), **kwargs)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def confluent_consumer(bootstrap: str, config: dict[str, Any] | None = None) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "logbus-compat",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **(config or {}),
        }
    )


def confluent_poll(consumer: Any, count: int, timeout: float = CONSUME_TIMEOUT) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            from confluent_kafka import KafkaError

            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"consume error: {msg.error()}")
        got.append(
            Got(
                msg.partition(),
                msg.offset(),
                msg.key(),
                msg.value(),
                tuple(msg.headers() or ()),
                msg.timestamp()[1],
            )
        )
    return got


def confluent_consume(
    bootstrap: str, topic: str, partition: int, start: int, count: int
) -> list[Got]:
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(bootstrap)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        return confluent_poll(consumer, count)
    finally:
        consumer.close()


# -- kafka-python ---------------------------------------------------------------------------


def kafka_python_produce(
    bootstrap: str, topic: str, msgs: Sequence[Msg], config: dict[str, Any] | None = None
) -> list[Delivery]:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=5,
        max_request_size=CLIENT_MAX_REQUEST,
        request_timeout_ms=20000,
        **(config or {}),
    )
    try:
        futures = [
            producer.send(
                topic,
                value=m.value,
                key=m.key,
                headers=list(m.headers) or None,
                partition=m.partition,
                timestamp_ms=m.timestamp,
            )
            for m in msgs
        ]
        producer.flush(30)
        results = []
        for fut in futures:
            try:
                md = fut.get(timeout=30)
                results.append(Delivery(md.partition, md.offset, None))
            except KafkaError as exc:
                results.append(Delivery(-1, -1, getattr(exc, "errno", -1)))
        return results
    finally:
        producer.close(10)


def kafka_python_consumer(bootstrap: str, **config: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20000,
        **config,
    )


def kafka_python_poll(consumer: Any, count: int, timeout: float = CONSUME_TIMEOUT) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            for r in records:
                got.append(
                    Got(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                )
    return got


def kafka_python_consume(
    bootstrap: str, topic: str, partition: int, start: int, count: int
) -> list[Got]:
    from kafka import TopicPartition

    consumer = kafka_python_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        return kafka_python_poll(consumer, count)
    finally:
        consumer.close()


# -- aiokafka -------------------------------------------------------------------------------


async def aiokafka_produce_async(
    bootstrap: str, topic: str, msgs: Sequence[Msg], config: dict[str, Any] | None = None
) -> list[Delivery]:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=5,
        max_request_size=CLIENT_MAX_REQUEST,
        request_timeout_ms=20000,
        **(config or {}),
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=m.value,
                key=m.key,
                partition=m.partition,
                timestamp_ms=m.timestamp,
                headers=list(m.headers) or None,
            )
            for m in msgs
        ]
        results = []
        for fut in futures:
            try:
                md = await asyncio.wait_for(fut, 30)
                if md is None:  # acks=0: nothing to report
                    results.append(Delivery(-1, -1, None))
                else:
                    results.append(Delivery(md.partition, md.offset, None))
            except KafkaError as exc:
                results.append(Delivery(-1, -1, getattr(exc, "errno", -1)))
        return results
    finally:
        await producer.stop()


def aiokafka_produce(
    bootstrap: str, topic: str, msgs: Sequence[Msg], config: dict[str, Any] | None = None
) -> list[Delivery]:
    return asyncio.run(aiokafka_produce_async(bootstrap, topic, msgs, config))


def aiokafka_consumer(bootstrap: str, **config: Any) -> Any:
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20000,
        **config,
    )


async def aiokafka_poll(consumer: Any, count: int, within: float = CONSUME_TIMEOUT) -> list[Got]:
    got: list[Got] = []
    deadline = time.monotonic() + within
    while len(got) < count and time.monotonic() < deadline:
        batches = await consumer.getmany(timeout_ms=200)
        for records in batches.values():
            for r in records:
                got.append(
                    Got(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                )
    return got


async def aiokafka_consume_async(
    bootstrap: str, topic: str, partition: int, start: int, count: int
) -> list[Got]:
    from aiokafka import TopicPartition

    consumer = aiokafka_consumer(bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        return await aiokafka_poll(consumer, count)
    finally:
        await consumer.stop()


def aiokafka_consume(
    bootstrap: str, topic: str, partition: int, start: int, count: int
) -> list[Got]:
    return asyncio.run(aiokafka_consume_async(bootstrap, topic, partition, start, count))


# -- kcat -----------------------------------------------------------------------------------
# kcat reads messages as lines from stdin ("key<TAB>value"), so its records are text
# without tabs or newlines, and its -H headers apply to every message it sends.


def kcat(
    *args: str, stdin: bytes | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    return subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def kcat_produce(
    bootstrap: str,
    topic: str,
    lines: Sequence[tuple[bytes | None, bytes]],
    *,
    partition: int | None = None,
    headers: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> subprocess.CompletedProcess[bytes]:
    """Send (key, value) lines; a None key sends the whole line as the value, keyless."""
    stdin = b"".join(
        (value if key is None else key + b"\t" + value) + b"\n" for key, value in lines
    )
    args = ["-b", bootstrap, "-P", "-t", topic, "-K", "\t", "-X", "message.max.bytes=4000000"]
    if partition is not None:
        args += ["-p", str(partition)]
    for h in headers:
        args += ["-H", h]
    return kcat(*args, *extra, stdin=stdin)


def _kcat_bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def kcat_consume(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int | str,
    count: int,
    extra: Sequence[str] = (),
) -> list[Got]:
    proc = kcat(
        "-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", str(start),
        "-c", str(count), "-e", "-J", "-q", *extra,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    got = []
    for line in proc.stdout.decode().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        flat = rec.get("headers") or []
        headers = tuple((flat[i], _kcat_bytes(flat[i + 1])) for i in range(0, len(flat), 2))
        got.append(
            Got(
                rec["partition"],
                rec["offset"],
                _kcat_bytes(rec["key"]),
                _kcat_bytes(rec["payload"]),
                headers,
                rec["ts"],
            )
        )
    return got


CONSUMERS: dict[str, Callable[[str, str, int, int, int], list[Got]]] = {
    "confluent": confluent_consume,
    "kafka-python": kafka_python_consume,
    "aiokafka": aiokafka_consume,
}
PRODUCERS: dict[str, Callable[..., list[Delivery]]] = {
    "confluent": confluent_produce,
    "kafka-python": kafka_python_produce,
    "aiokafka": aiokafka_produce,
}
