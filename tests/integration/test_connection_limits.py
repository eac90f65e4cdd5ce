"""What one connection may cost, against a real broker process: frame buffers follow the
bytes that arrive, and Kafka's connection settings (`max.connections`,
`max.connections.per.ip` and its overrides, `max.connection.creation.rate`,
`connections.max.idle.ms`, `queued.max.request.bytes`) are enforced."""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from broker_cli import start_broker

from kafka_wire import FETCH_V, PRODUCE_V, WireClient, fetch_body, split_bootstrap, wait_for
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.builder import NewRecord, build_batch

pytestmark = pytest.mark.timeout(120)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc/<pid>/status (VmRSS, in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def served(bootstrap: str) -> bool:
    """Whether a new connection gets a Metadata answer."""
    with WireClient(bootstrap) as client:
        return client.metadata([])["brokers"] != []


def test_size_prefixes_alone_allocate_nothing_large(broker_process: Any) -> None:
    proc = broker_process()
    assert proc.proc is not None
    assert served(proc.bootstrap)
    before = rss_bytes(proc.proc.pid)
    hostile = []
    for _ in range(8):
        sock = socket.create_connection(split_bootstrap(proc.bootstrap))
        sock.sendall(struct.pack(">i", 100 << 20))  # 100 MiB announced, nothing sent
        hostile.append(sock)
    try:
        # The broker has read every prefix once it has answered a later connection.
        for _ in range(3):
            assert served(proc.bootstrap)
        grown = rss_bytes(proc.proc.pid) - before
        # Allocating what was announced would take 800 MiB.
        assert grown < 100 << 20, f"RSS grew by {grown >> 20} MiB"
    finally:
        for sock in hostile:
            sock.close()


# --- max.connections, max.connections.per.ip and its overrides ---------------------------


def open_clients(bootstrap: str, count: int) -> list[WireClient]:
    clients = []
    for _ in range(count):
        client = WireClient(bootstrap)
        assert client.metadata([])["brokers"], "an allowed connection was not served"
        clients.append(client)
    return clients


def refused(bootstrap: str) -> bool:
    """Whether a new connection is closed without an answer to a Metadata request."""
    with WireClient(bootstrap) as client:
        try:
            client.metadata([])
        except OSError:  # ConnectionError: closed before or while the request was sent
            return True
        return False


def close_all(clients: list[WireClient]) -> None:
    for client in clients:
        client.close()


@pytest.mark.parametrize(
    "limits",
    [
        {"max_connections": "3"},
        {"max_connections_per_ip": "3"},
        {"max_connections_per_ip": "0", "max_connections_per_ip_overrides": "127.0.0.1:3"},
        {"max_connections_per_ip": "1", "max_connections_per_ip_overrides": "localhost:3"},
    ],
    ids=["max.connections", "per.ip", "per.ip.override", "per.host.override"],
)
def test_connections_beyond_the_limit_are_closed(
    broker_factory: Any, limits: dict[str, str]
) -> None:
    broker = broker_factory(**limits)
    clients = open_clients(broker.bootstrap, 3)
    try:
        assert refused(broker.bootstrap)
        assert refused(broker.bootstrap)
        # the connections within the limit are still served
        for client in clients:
            assert client.metadata([])["brokers"]
        # a closed connection frees its place
        clients.pop().close()
        wait_for(lambda: not refused(broker.bootstrap))
    finally:
        close_all(clients)


def test_max_connections_can_be_changed_at_run_time(broker_factory: Any) -> None:
    broker = broker_factory()
    clients = open_clients(broker.bootstrap, 2)
    try:
        with WireClient(broker.bootstrap) as admin:
            response = admin.request(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 4,  # BROKER
                            "resource_name": "",
                            "configs": [
                                {"name": "max.connections", "config_operation": 0, "value": "3"}
                            ],
                        }
                    ],
                    "validate_only": False,
                },
            )
            assert response["responses"][0]["error_code"] == ErrorCode.NONE
            # the admin connection is the third: the limit counts connections already open
            assert refused(broker.bootstrap)
    finally:
        close_all(clients)


# --- max.connection.creation.rate ---------------------------------------------------------


def test_connections_beyond_the_creation_rate_wait_to_be_accepted(broker_factory: Any) -> None:
    broker = broker_factory(max_connection_creation_rate="4")
    started = time.monotonic()
    clients = open_clients(broker.bootstrap, 12)  # every one is served: none is refused
    elapsed = time.monotonic() - started
    close_all(clients)
    # 4 at once, then 4 a second: the last is accepted 2 s after the first at the earliest.
    assert elapsed >= 1.5, f"12 connections accepted in {elapsed:.2f}s at 4 per second"


# --- connections.max.idle.ms ---------------------------------------------------------------


def test_idle_connections_are_closed(broker_factory: Any) -> None:
    broker = broker_factory(connections_max_idle_ms="300")
    with WireClient(broker.bootstrap) as idle, WireClient(broker.bootstrap) as silent:
        assert idle.metadata([])["brokers"]
        assert idle.wait_closed(timeout=30), "an idle connection was not closed"
        assert silent.wait_closed(timeout=30), "a connection that never sent was not closed"
    # the broker goes on serving
    assert served(broker.bootstrap)


def test_a_connection_waiting_for_its_answer_is_not_idle(broker_factory: Any) -> None:
    broker = broker_factory(connections_max_idle_ms="200")
    with WireClient(broker.bootstrap) as client:
        assert client.create_topic("quiet", 1)[0] == ErrorCode.NONE
        # a Fetch that waits 2 s for data: ten idle timeouts pass while it is under way
        client.send_raw(fetch_request("quiet", max_wait_ms=2000))
        frame = client.recv_frame()
        assert frame is not None, "the connection was closed while its request was under way"


# --- queued.max.request.bytes ----------------------------------------------------------------


def fetch_request(topic: str, *, max_wait_ms: int, size: int = 0) -> bytes:
    """A Fetch frame for partition 0 from offset 0 waiting for one byte, padded after its
    body (which the broker tolerates) to `size` bytes."""
    body = fetch_body(topic, 0, 0, 1 << 20, max_wait_ms=max_wait_ms, min_bytes=1)
    frame = codec.encode_request(codec.RequestHeader(ApiKey.FETCH, FETCH_V, 1, "wire"), body)
    payload = frame[4:] + bytes(max(0, size - len(frame) + 4))
    return struct.pack(">i", len(payload)) + payload


def produce_request(topic: str, batch: bytes, correlation_id: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    header = codec.RequestHeader(ApiKey.PRODUCE, PRODUCE_V, correlation_id, "wire")
    return codec.encode_request(header, body)


def test_requests_are_not_read_while_queued_bytes_are_over_the_limit(
    broker_factory: Any,
) -> None:
    # Kafka's rule: the pool holds at least the largest request.
    broker = broker_factory(
        queued_max_request_bytes=str(1 << 20), socket_request_max_bytes=str(1 << 20)
    )
    setup = WireClient(broker.bootstrap)
    assert setup.create_topic("held", 1)[0] == ErrorCode.NONE
    holder = WireClient(broker.bootstrap)
    producer = WireClient(broker.bootstrap)
    probes: list[WireClient] = []
    try:
        # A Fetch as large as the pool, waiting up to 3 s for data, uses all of it.
        holder.send_raw(fetch_request("held", max_wait_ms=3000, size=1 << 20))

        def pool_used_up() -> bool:
            """Whether a new connection's small request goes unread for a second."""
            probe = WireClient(broker.bootstrap)
            header = codec.RequestHeader(ApiKey.METADATA, 12, 1, "probe")
            body = {"topics": [], "allow_auto_topic_creation": False}
            probe.send_raw(codec.encode_request(header, body))
            if select.select([probe.sock], [], [], 1.0)[0]:
                probe.close()
                return False
            probes.append(probe)
            return True

        wait_for(pool_used_up, timeout=30, interval=0)
        # Large produce requests are sent while the pool is used up: they are not read
        # until the fetch is answered, so the fetch finds no data.
        batches = [
            build_batch([NewRecord(None, os.urandom(1000)) for _ in range(200)])
            for _ in range(3)
        ]
        for i, batch in enumerate(batches):
            producer.send_raw(produce_request("held", batch, i + 1))
        readable, _, _ = select.select([holder.sock, producer.sock], [], [], 60)
        assert holder.sock in readable, "a produce was answered before the held fetch"
        frame = holder.recv_frame()
        assert frame is not None
        _, fetched = codec.decode_response(ApiKey.FETCH, FETCH_V, frame)
        part = fetched["responses"][0]["partitions"][0]
        assert part["high_watermark"] == 0, "a produce was read while the pool was used up"
        # Then every produce request is read and answered; none is lost.
        offsets = []
        for i in range(len(batches)):
            frame = producer.recv_frame()
            assert frame is not None
            correlation_id, response = codec.decode_response(ApiKey.PRODUCE, PRODUCE_V, frame)
            assert correlation_id == i + 1
            result = response["responses"][0]["partition_responses"][0]
            assert result["error_code"] == ErrorCode.NONE
            offsets.append(result["base_offset"])
        assert offsets == [0, 200, 400]
        assert len(setup.read_all("held", 0)) == 600
        for probe in probes:  # the probes held back are answered too
            assert probe.recv_frame() is not None
    finally:
        close_all([setup, holder, producer, *probes])


# --- start-up refusals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("max.connections.per.ip.overrides=127.0.0.1:lots", "is not a number"),
        ("max.connections.per.ip.overrides=no-colon", "Expected host:count"),
        ("max.connections.per.ip.overrides=host.invalid:3", "Cannot resolve host"),
        ("max.connections.per.ip=0", "only if max.connections.per.ip.overrides is set"),
        ("queued.max.request.bytes=1000", "Must be at least socket.request.max.bytes"),
    ],
)
def test_bad_connection_settings_refuse_to_start(
    tmp_path: Path, override: str, message: str
) -> None:
    result = start_broker(tmp_path, override)
    assert result.returncode != 0
    assert "invalid configuration" in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
