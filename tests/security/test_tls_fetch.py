"""Large transfers over TLS, written in pieces. Fetch, where the broker cannot use
sendfile: file slices are read in pieces and encrypted (server/network/connection.py
`_send_through_tls`); a fetch of several partitions, each slice many pieces long and cut at
arbitrary record boundaries, must return over SSL exactly the bytes it returns over
PLAINTEXT, and a librdkafka consumer over SSL must read every value in order. Produce:
the logbus client hands its large requests to TLS in pieces (common/network/frame_stream.py
`TLS_PIECE`); what it sends over SSL must be read back unchanged."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

from client_round_trips import TIMEOUT
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from security_support import Pki, address, client_context, confluent_ssl, ssl_broker, tls_settings

import logbus
from kafka_wire import FETCH_V, fetch_body_many
from logbus.protocol import ApiKey
from logbus.server.network.connection import TLS_WRITE_SIZE
from ports import free_port

pytest_plugins = ["secure_fixtures"]

PARTITIONS = 3


def _values(partition: int) -> list[bytes]:
    """~1.2 MB per partition in values of 1 byte to 40 KB (random sizes, random bytes),
    so batches straddle the pieces the broker reads."""
    rnd = random.Random(partition)
    values, total = [], 0
    while total < 1_200_000:
        value = rnd.randbytes(rnd.choice((1, 100, 1000, rnd.randrange(1, 40_000))))
        values.append(value)
        total += len(value)
    return values


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)


def _read(config: dict[str, Any], topic: str, expected: int) -> dict[int, list[bytes]]:
    """Every partition from offset 0 with librdkafka, until `expected` values came."""
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 4 << 20})
    read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT
        count = 0
        while count < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                read[message.partition()].append(message.value())
                count += 1
    finally:
        consumer.close()
    return read


def _produce(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    _create(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 200_000, "message.max.bytes": 1_000_000})
    written = {p: _values(p) for p in range(PARTITIONS)}
    for partition, values in written.items():
        for value in values:
            producer.produce(topic, value, partition=partition)
            producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    return written


def _same_bytes_over_tls(plaintext: str, tls: str, pki: Pki, raw: Any) -> None:
    topic = f"tls-fetch-{uuid.uuid4().hex[:6]}"
    _produce(plaintext, topic)
    body = fetch_body_many(topic, dict.fromkeys(range(PARTITIONS), 0), 64 << 20)
    answers = []
    for conn in (raw(plaintext), raw(tls, client_context(pki))):
        response = conn.request(ApiKey.FETCH, FETCH_V, body)
        answers.append({part["partition_index"]: (part["error_code"], bytes(part["records"]))
                        for part in response["responses"][0]["partitions"]})
    plain, tls = answers
    assert sorted(plain) == list(range(PARTITIONS))
    for partition in range(PARTITIONS):
        assert plain[partition][0] == 0
        assert len(plain[partition][1]) > 10 * TLS_WRITE_SIZE  # many pieces per slice
    assert tls == plain


def test_a_large_fetch_over_tls_returns_the_same_bytes_as_plaintext(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = ssl_broker(secure_broker, pki)  # in this process: the standard asyncio loop
    _same_bytes_over_tls(address(running, "PLAINTEXT"), address(running, "SSL"), pki, raw)


def test_the_same_over_uvloops_tls_in_a_broker_process(
    broker_process: Any, pki: Pki, raw: Any
) -> None:
    """`logbus server start` runs uvloop, whose TLS transport is its own."""
    tls_port = free_port()
    settings = {**tls_settings(pki), "num.partitions": "1",
                "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SSL://127.0.0.1:{tls_port}"}
    port = free_port()
    broker = broker_process(*(arg for name, value in settings.items()
                              for arg in ("--override", f"{name}={value}".format(port=port))),
                            port=port)
    _same_bytes_over_tls(broker.bootstrap, f"127.0.0.1:{tls_port}", pki, raw)


def test_a_librdkafka_consumer_over_tls_reads_every_value_in_order(
    secure_broker: Any, pki: Pki
) -> None:
    running = ssl_broker(secure_broker, pki)
    topic = f"tls-read-{uuid.uuid4().hex[:6]}"
    written = _produce(address(running, "PLAINTEXT"), topic)
    config = confluent_ssl(pki, address(running, "SSL"))
    assert _read(config, topic, sum(len(v) for v in written.values())) == written


def test_large_requests_of_the_logbus_client_over_tls_arrive_unchanged(
    secure_broker: Any, pki: Pki
) -> None:
    running = ssl_broker(secure_broker, pki)
    topic = f"tls-produce-{uuid.uuid4().hex[:6]}"
    _create(address(running, "PLAINTEXT"), topic)
    written = {p: _values(p) for p in range(PARTITIONS)}
    config = confluent_ssl(pki, address(running, "SSL"), **{
        "batch.size": 1_000_000, "linger.ms": 50})
    with logbus.Producer(config) as producer:
        for partition, values in written.items():
            for value in values:
                producer.send(topic, value, partition=partition)
        producer.flush(TIMEOUT)
    plaintext = {"bootstrap.servers": address(running, "PLAINTEXT")}
    assert _read(plaintext, topic, sum(len(v) for v in written.values())) == written
