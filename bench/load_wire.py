"""A raw Kafka wire connection: Produce requests are encoded once (logbus's own codec) and
resent, as the Redis side resends one encoded XADD pipeline, so both clients cost next to
nothing and the figure is the server's. Used by R1 (one small request in flight) and by
P1's "raw wire" rows (large batches for every partition, two requests in flight)."""

from __future__ import annotations

import socket
import struct
import time

from bench.core import Metrics
from bench.load_kafka import VALUE_POOL, make_values
from bench.progress import Progress
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.builder import build_batch

PRODUCE_VERSION = 9
_SIZE = struct.Struct(">i")


class WireConnection:
    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data

    def request(self, frame: bytes) -> bytes:
        """Send a complete request frame, return the response frame (without its size)."""
        self.sock.sendall(frame)
        return self.response()

    def response(self) -> bytes:
        (size,) = _SIZE.unpack(self._exactly(4))
        return self._exactly(size)


def produce_request(topic: str, partition: int, value: bytes, acks: int) -> bytes:
    """One record batch of one record, in a Produce request (no idempotence: the same bytes
    can be sent again and again, each time appended at a new offset)."""
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": build_batch([(None, value)])}]}],
    }
    return codec.encode_request(
        codec.RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "bench"), body)


def check_produce_response(frame: bytes) -> None:
    _correlation, body = codec.decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame)
    for topic in body["responses"]:
        for partition in topic["partition_responses"]:
            if partition["error_code"] != ErrorCode.NONE:
                raise RuntimeError(f"produce failed: {ErrorCode(partition['error_code']).name}")


def produce_batches(bootstrap: str, topic: str, partitions: int, value_size: int,
                    total_bytes: int, progress: Progress, batch_bytes: int = 1_000_000,
                    in_flight: int = 2) -> Metrics:
    """Produce `total_bytes` of values as requests holding one batch of ~`batch_bytes` for
    every partition (what librdkafka sends with batch.size=1 MB), acks=1, `in_flight`
    requests pipelined on one connection. Every response is checked."""
    values = make_values(value_size)
    per_batch = max(1, batch_bytes // (value_size + 8))  # the record framing: ~8 bytes
    batch = build_batch([(None, values[i % VALUE_POOL]) for i in range(per_batch)])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": p, "records": batch} for p in range(partitions)]}],
    }
    frame = codec.encode_request(
        codec.RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "bench"), body)
    per_request = per_batch * partitions
    requests = max(1, total_bytes // (per_request * value_size))
    count = requests * per_request
    progress.begin(f"raw produce {count:,} x {value_size} B", count)
    with WireConnection(bootstrap) as conn:
        check_produce_response(conn.request(frame))  # connected, topic known
        start = time.perf_counter()
        sent = answered = 0
        while answered < requests:
            while sent < requests and sent - answered < in_flight:
                conn.sock.sendall(frame)
                sent += 1
            check_produce_response(conn.response())
            answered += 1
            progress.advance(per_request, per_request * value_size)
        elapsed = time.perf_counter() - start
    progress.end()
    return {"mb_s": count * value_size / elapsed / 1e6, "records_s": count / elapsed,
            "seconds": elapsed, "records": float(count), "written": float(count + per_request)}
