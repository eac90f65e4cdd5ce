"""A minimal blocking Kafka client over raw sockets, for tests that must control every byte.

It encodes requests with `logbus.protocol.codec` and reads size-prefixed responses; no
retries, no metadata cache. Integration and compat tests use it to set up topics and to
read stored bytes back exactly, independently of any third-party client. Not thread-safe:
one per thread.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.reader import iter_record_set
from logbus.records.record import Record

# Versions this helper speaks; all within what the broker declares today.
METADATA_V = 12
CREATE_TOPICS_V = 5
PRODUCE_V = 9
FETCH_V = 12
LIST_OFFSETS_V = 7

EARLIEST = -2
LATEST = -1


def split_bootstrap(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


class WireClient:
    """One connection to one broker."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(split_bootstrap(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            try:
                got = self.sock.recv(n - len(chunks))
            except ConnectionResetError:
                return None
            if not got:
                return None
            chunks += got
        return bytes(chunks)

    def recv_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None if the broker closed."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._recv_exact(size)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """Whether the broker closes the connection within `timeout` without answering
        (any bytes it sends instead make this False)."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return data == b""

    def request(
        self, api_key: int, version: int, body: dict[str, Any], client_id: str | None = "wire"
    ) -> dict[str, Any]:
        self._correlation += 1
        header = codec.RequestHeader(api_key, version, self._correlation, client_id)
        self.send_raw(codec.encode_request(header, body))
        frame = self.recv_frame()
        if frame is None:
            raise ConnectionError(f"broker closed the connection on {ApiKey(api_key).name}")
        correlation_id, response = codec.decode_response(api_key, version, frame)
        assert correlation_id == self._correlation
        return response

    # -- conveniences -------------------------------------------------------------------

    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> dict[str, Any]:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        return self.request(ApiKey.METADATA, METADATA_V, body)

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> tuple[int, str | None]:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        }
        result = self.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, body)["topics"][0]
        return result["error_code"], result["error_message"]

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> dict[str, Any]:
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": 10000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        }
        response = self.request(ApiKey.PRODUCE, PRODUCE_V, body)
        return dict(response["responses"][0]["partition_responses"][0])

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int = 64 << 20
    ) -> dict[str, Any]:
        return self.fetch_partitions(topic, {partition: offset}, max_bytes)[0]

    def fetch_partitions(
        self, topic: str, offsets: dict[int, int], max_bytes: int = 64 << 20
    ) -> list[dict[str, Any]]:
        """One Fetch of several partitions of a topic (partition -> fetch offset); each
        answer's `records` as bytes."""
        body = fetch_body_many(topic, offsets, max_bytes)
        response = self.request(ApiKey.FETCH, FETCH_V, body)
        parts = [dict(part) for part in response["responses"][0]["partitions"]]
        for part in parts:
            records = part.get("records")
            part["records"] = b"" if records is None else bytes(records)
        return parts

    def list_offset(self, topic: str, partition: int, timestamp: int) -> tuple[int, int, int]:
        """(error_code, offset, timestamp) for a ListOffsets query (-2 earliest, -1 latest)."""
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": -1,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        response = self.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, body)
        part = response["topics"][0]["partitions"][0]
        return part["error_code"], part["offset"], part["timestamp"]

    def read_all(self, topic: str, partition: int, start: int = 0) -> list[Record]:
        """Every record from `start` to the high watermark, fetching until it is reached."""
        out: list[Record] = []
        offset = start
        while True:
            part = self.fetch(topic, partition, offset)
            assert part["error_code"] == ErrorCode.NONE, ErrorCode(part["error_code"]).name
            for _header, records in iter_record_set(part["records"]):
                out.extend(r for r in records if r.offset >= offset)
            if out:
                offset = out[-1].offset + 1
            if offset >= part["high_watermark"] or not part["records"]:
                return out


def fetch_body(
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int = 64 << 20,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> dict[str, Any]:
    """A Fetch request (FETCH_V) for one partition."""
    return fetch_body_many(
        topic, {partition: offset}, max_bytes, max_wait_ms=max_wait_ms, min_bytes=min_bytes
    )


def fetch_body_many(
    topic: str,
    offsets: dict[int, int],
    max_bytes: int = 64 << 20,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> dict[str, Any]:
    """A Fetch request (FETCH_V) for several partitions of a topic (partition -> offset)."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                    for partition, offset in offsets.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def wait_for(
    predicate: Any, timeout: float = 30.0, interval: float = 0.05, *, what: str = "condition"
) -> Any:
    """Poll `predicate` until it returns something truthy, and return that. The timeout
    only bounds a hang (a loaded machine, parallel workers): fail after `timeout` seconds,
    naming `what` was awaited. The tests' one polling helper (the cluster suite's
    `zk_cluster.wait_for` also rides out a broker not answering yet)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(interval)


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> str:
    """Create a topic (replication factor 1) over the wire and return its name; fails
    unless the broker answers NONE. The tests' one way to set up a topic on a single
    broker (clusters have `ProcessCluster.create_topic`)."""
    with WireClient(bootstrap) as client:
        error, message = client.create_topic(name, partitions, configs)
    assert error == ErrorCode.NONE, (name, error, message)
    return name
