"""A raw Kafka wire connection for R1: the Produce request is encoded once (logbus's own
codec) and resent, as the Redis side resends one encoded XADD, so both clients cost the
same next to nothing and the figure is the server's turnaround."""

from __future__ import annotations

import socket
import struct

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
    error = body["responses"][0]["partition_responses"][0]["error_code"]
    if error != ErrorCode.NONE:
        raise RuntimeError(f"produce failed: {ErrorCode(error).name}")
