"""Malformed and hostile input over raw sockets: oversized, truncated and garbage frames,
unknown APIs and versions, corrupt record batches, oversized records, invalid and unknown
topics, and random bytes. After each one the broker still serves other connections and
the data it stored before is unchanged, byte for byte."""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_wire import PRODUCE_V, WireClient, split_bootstrap
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.batch import HEADER_SIZE, LOG_OVERHEAD, compute_crc, split_batches
from logbus.records.builder import NewRecord, build_batch

pytestmark = pytest.mark.timeout(60)

STABLE = "stable"


@dataclass
class Seeded:
    """A broker holding known data, and the raw bytes a fetch of it returned."""

    broker: Any
    fetched: bytes
    end_offset: int
    client: WireClient  # opened before any bad input; must survive all of it

    def assert_unharmed(self) -> None:
        with WireClient(self.broker.bootstrap) as fresh:
            metadata = fresh.metadata([STABLE])
            assert metadata["topics"][0]["error_code"] == ErrorCode.NONE
            part = fresh.fetch(STABLE, 0, 0)
            assert part["error_code"] == ErrorCode.NONE
            assert part["high_watermark"] == self.end_offset
            assert part["records"] == self.fetched
            assert fresh.list_offset(STABLE, 0, -1)[:2] == (ErrorCode.NONE, self.end_offset)
        # the connection opened before the bad input was never disturbed
        assert self.client.fetch(STABLE, 0, 0)["records"] == self.fetched


def seed(broker: Any) -> Seeded:
    client = WireClient(broker.bootstrap)
    assert client.create_topic(STABLE, 1)[0] == ErrorCode.NONE
    for i in range(3):
        batch = build_batch(
            [NewRecord(f"k{i}-{j}".encode(), os.urandom(50), (("h", b"v"),)) for j in range(4)]
        )
        assert client.produce(STABLE, 0, batch)["error_code"] == ErrorCode.NONE
    part = client.fetch(STABLE, 0, 0)
    assert part["high_watermark"] == 12
    return Seeded(broker, part["records"], 12, client)


@pytest.fixture
def seeded(broker: Any) -> Any:
    s = seed(broker)
    yield s
    s.client.close()


def raw_request(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 7) -> bytes:
    return codec.encode_request(codec.RequestHeader(api_key, version, correlation_id, "bad"), body)


def produce_request(topic: str, records: bytes, acks: int = -1) -> bytes:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return raw_request(ApiKey.PRODUCE, PRODUCE_V, body)


def send_and_expect_close(bootstrap: str, data: bytes, then_close_write: bool = False) -> None:
    with WireClient(bootstrap) as conn:
        conn.send_raw(data)
        if then_close_write:
            conn.sock.shutdown(socket.SHUT_WR)
        assert conn.wait_closed(5.0), "the broker kept the connection open"


# -- framing --------------------------------------------------------------------------------


def test_frame_over_socket_request_max_bytes_closes_the_connection(broker_factory: Any) -> None:
    limit = 10_000
    broker = broker_factory(socket_request_max_bytes=str(limit))
    s = seed(broker)
    try:
        metadata = raw_request(ApiKey.METADATA, 12, {"topics": None})
        # A frame of exactly the limit is served (trailing bytes are tolerated)...
        at_limit = metadata[4:] + bytes(limit - len(metadata) + 4)
        with WireClient(broker.bootstrap) as conn:
            conn.send_raw(struct.pack(">i", limit) + at_limit)
            response = conn.recv_frame()
            assert response is not None
            assert codec.decode_response(ApiKey.METADATA, 12, response)[0] == 7
        # ...one byte more closes the connection, before the broker reads the body.
        send_and_expect_close(broker.bootstrap, struct.pack(">i", limit + 1) + at_limit[:100])
        s.assert_unharmed()
    finally:
        s.client.close()


def test_huge_announced_frame_is_refused_without_waiting_for_it(seeded: Seeded) -> None:
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", 2**31 - 1) + b"\0" * 16)
    seeded.assert_unharmed()


def test_negative_frame_size_closes_the_connection(seeded: Seeded) -> None:
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", -5) + b"\0" * 16)
    seeded.assert_unharmed()


def test_truncated_frame_then_close(seeded: Seeded) -> None:
    frame = produce_request(STABLE, build_batch([(b"k", b"never stored")]))
    with WireClient(seeded.broker.bootstrap) as conn:
        conn.send_raw(frame[: len(frame) // 2])
    seeded.assert_unharmed()
    # Half a frame and a half-closed socket: the broker answers nothing and closes.
    send_and_expect_close(seeded.broker.bootstrap, frame[: len(frame) // 2], then_close_write=True)
    seeded.assert_unharmed()


def test_frame_shorter_than_a_request_header(seeded: Seeded) -> None:
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", 3) + b"\x00\x12\x00")
    seeded.assert_unharmed()


def test_garbage_header_closes_the_connection(seeded: Seeded) -> None:
    # Metadata v1 whose client id claims 30000 bytes of a 20-byte frame.
    body = struct.pack(">hhih", ApiKey.METADATA, 1, 9, 30000) + b"x" * 10
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", len(body)) + body)
    # ApiVersions v3 (flexible header) with a tagged-field count that runs off the end.
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 9, -1) + b"\xff\xff\xff\xff\x0f"
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", len(body)) + body)
    seeded.assert_unharmed()


def test_garbage_body_closes_the_connection(seeded: Seeded) -> None:
    # A Metadata v9 header followed by a topic array claiming 2**30 entries.
    frame = raw_request(ApiKey.METADATA, 9, {"topics": []})
    # the body ends: topics (compact array, 1 byte), two booleans, empty tagged fields
    body = frame[4:-4] + b"\x80\x80\x80\x80\x04"
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", len(body)) + body)
    seeded.assert_unharmed()


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_lookup_by_id_before_v12_closes_the_connection(
    seeded: Seeded, version: int
) -> None:
    """v10-11 carry nullable topic names but their responses cannot hold a null name:
    Kafka refuses such a request as invalid (found by tests/fuzz: the broker answered with
    a response no client could decode)."""
    frame = raw_request(ApiKey.METADATA, version, {"topics": [{"name": None}]})
    send_and_expect_close(seeded.broker.bootstrap, frame)
    seeded.assert_unharmed()


# -- API keys and versions -------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [999, 32767, -1])
def test_unknown_api_key_closes_the_connection(seeded: Seeded, api_key: int) -> None:
    body = struct.pack(">hhih", api_key, 0, 11, -1)
    send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", len(body)) + body)
    seeded.assert_unharmed()


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    with WireClient(bootstrap) as conn:
        response = conn.request(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "wire", "client_software_version": "1.0"},
        )
    assert response["error_code"] == ErrorCode.NONE
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}


@pytest.mark.parametrize(
    "api_key",
    [ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.CREATE_TOPICS],
)
def test_unsupported_version_of_a_known_api_closes_the_connection(
    seeded: Seeded, api_key: int
) -> None:
    low, high = api_versions(seeded.broker.bootstrap)[api_key]
    unsupported = [high + 1, 99, -1] + ([low - 1] if low > 0 else [])
    for version in unsupported:
        body = struct.pack(">hhih", api_key, version, 11, -1) + b"\0" * 32
        send_and_expect_close(seeded.broker.bootstrap, struct.pack(">i", len(body)) + body)
    seeded.assert_unharmed()


def test_api_versions_with_an_unknown_version_answers_v0_with_the_api_list(
    seeded: Seeded,
) -> None:
    supported = api_versions(seeded.broker.bootstrap)
    assert supported[ApiKey.API_VERSIONS][0] == 0
    assert supported[ApiKey.API_VERSIONS][1] >= 3
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS):
        assert key in supported
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 4242, 3) + b"abc" + b"\x01\x02garbage"
    with WireClient(seeded.broker.bootstrap) as conn:
        conn.send_raw(struct.pack(">i", len(body)) + body)
        frame = conn.recv_frame()
        assert frame is not None
        correlation_id, response = codec.decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert correlation_id == 4242
        assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION == 35
        # the same list a supported version gets, so the client can pick a version
        listed = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
        assert listed == supported
        # The client retries with a version it now knows; same connection.
        retry = codec.encode_request(
            codec.RequestHeader(ApiKey.API_VERSIONS, 3, 4243, "bad"),
            {"client_software_name": "wire", "client_software_version": "1.0"},
        )
        conn.send_raw(retry)
        frame = conn.recv_frame()
        assert frame is not None
        correlation_id, response = codec.decode_response(ApiKey.API_VERSIONS, 3, frame)
        assert (correlation_id, response["error_code"]) == (4243, ErrorCode.NONE)
    seeded.assert_unharmed()


# -- record batches ---------------------------------------------------------------------------


def produce_error(bootstrap: str, frame: bytes) -> tuple[int, int]:
    with WireClient(bootstrap) as conn:
        conn.send_raw(frame)
        response = conn.recv_frame()
        assert response is not None, "the broker closed instead of answering"
        _cid, body = codec.decode_response(ApiKey.PRODUCE, PRODUCE_V, response)
        part = body["responses"][0]["partition_responses"][0]
        return part["error_code"], part["base_offset"]


def test_wrong_crc_is_corrupt_message(seeded: Seeded) -> None:
    batch = bytearray(build_batch([(b"k", b"value-with-a-flipped-byte")] * 3))
    batch[-5] ^= 0x40  # inside the last record, covered by the CRC
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch)))
    assert error == ErrorCode.CORRUPT_MESSAGE == 2
    seeded.assert_unharmed()


def test_wrong_crc_with_acks_0_closes_the_connection(seeded: Seeded) -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[HEADER_SIZE + 2] ^= 0x01
    send_and_expect_close(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch), acks=0))
    seeded.assert_unharmed()


@pytest.mark.parametrize(
    "batch_length",
    [
        0,
        -1,
        13,  # below even the oldest record format's overhead
        HEADER_SIZE - LOG_OVERHEAD - 1,  # shorter than the v2 batch header itself
    ],
)
def test_impossible_batch_length_is_corrupt_message(seeded: Seeded, batch_length: int) -> None:
    batch = bytearray(build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", batch, 8, batch_length)
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch)))
    assert error == ErrorCode.CORRUPT_MESSAGE
    seeded.assert_unharmed()


def test_batch_length_beyond_the_request_is_rejected(seeded: Seeded) -> None:
    batch = bytearray(build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", batch, 8, 1 << 30)
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch)))
    # Kafka finds no whole batch in the request and answers INVALID_RECORD (87).
    assert error in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
    seeded.assert_unharmed()


def test_stray_bytes_after_a_batch_are_never_stored(broker: Any) -> None:
    """Kafka trims trailing bytes that do not form a batch (or rejects the request); either
    way they never reach the log, and the partition keeps working."""
    with WireClient(broker.bootstrap) as conn:
        assert conn.create_topic("stray", 1)[0] == ErrorCode.NONE
        batch = build_batch([(b"k", b"v")] * 2)
        error, _ = produce_error(
            broker.bootstrap, produce_request("stray", batch + b"\x00\x01\x02")
        )
        assert error in (ErrorCode.NONE, ErrorCode.CORRUPT_MESSAGE)
        stored = 2 if error == ErrorCode.NONE else 0
        assert conn.produce("stray", 0, build_batch([(b"k", b"next")]))["base_offset"] == stored
        records = conn.read_all("stray", 0)
        assert [r.value for r in records] == [b"v"] * stored + [b"next"]
        # what is served is whole batches, nothing else
        raw = conn.fetch("stray", 0, 0)["records"]
        assert sum(header.size for _pos, header in split_batches(raw)) == len(raw)


def test_record_count_inconsistent_with_offsets_is_invalid_record(seeded: Seeded) -> None:
    batch = bytearray(build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", batch, HEADER_SIZE - 4, 5)  # recordCount: 5, but 2 present
    struct.pack_into(">I", batch, 17, compute_crc(batch))  # a valid CRC over the lie
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch)))
    # Kafka's LogValidator: "Inconsistent batch offset range ... and count of records"
    assert error == ErrorCode.INVALID_RECORD == 87
    seeded.assert_unharmed()


def test_records_missing_from_the_batch_body_are_rejected(seeded: Seeded) -> None:
    batch = bytearray(build_batch([(b"k", b"v")] * 2))
    struct.pack_into(">i", batch, HEADER_SIZE - 4, 5)  # recordCount 5 ...
    struct.pack_into(">i", batch, 23, 4)  # ... and lastOffsetDelta 4: consistent, but a lie
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, bytes(batch)))
    # Kafka: "Incorrect declared batch size, premature EOF reached" (INVALID_RECORD)
    assert error in (ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE)
    seeded.assert_unharmed()


def test_record_over_max_message_bytes_is_message_too_large(seeded: Seeded) -> None:
    with WireClient(seeded.broker.bootstrap) as conn:
        error, message = conn.create_topic("small", 1, {"max.message.bytes": "1000"})
        assert error == ErrorCode.NONE, message
        fits = build_batch([(b"k", b"x" * 800)])
        assert len(fits) <= 1000
        assert conn.produce("small", 0, fits)["error_code"] == ErrorCode.NONE
        too_big = build_batch([(b"k", b"x" * 1000)])
        result = conn.produce("small", 0, too_big)
        assert result["error_code"] == ErrorCode.MESSAGE_TOO_LARGE == 10
        assert conn.list_offset("small", 0, -1)[1] == 1
    # The broker-wide default (message.max.bytes = 1048588) applies to other topics.
    big = build_batch([(b"k", os.urandom(1048588))])
    error, _ = produce_error(seeded.broker.bootstrap, produce_request(STABLE, big))
    assert error == ErrorCode.MESSAGE_TOO_LARGE
    seeded.assert_unharmed()


# -- topics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad/name", "a b", ".", "..", "x" * 250, "ünïcode", ""])
def test_invalid_topic_name(seeded: Seeded, name: str) -> None:
    with WireClient(seeded.broker.bootstrap) as conn:
        error, _message = conn.create_topic(name, 1)
        assert error == ErrorCode.INVALID_TOPIC_EXCEPTION == 17
        metadata = conn.metadata([name], auto_create=True)
        (topic,) = metadata["topics"]
        assert topic["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert topic["partitions"] == []
        listed = {t["name"] for t in conn.metadata(None)["topics"]}
        assert name not in listed
    seeded.assert_unharmed()


def test_unknown_topic_with_auto_create_off(broker_factory: Any) -> None:
    broker = broker_factory(**{"auto.create.topics.enable": "false"})
    s = seed(broker)
    try:
        with WireClient(broker.bootstrap) as conn:
            (topic,) = conn.metadata(["nope"], auto_create=True)["topics"]
            assert topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
            result = conn.produce("nope", 0, build_batch([(b"k", b"v")]))
            assert result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert conn.fetch("nope", 0, 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            error, _offset, _ts = conn.list_offset("nope", 0, -1)
            assert error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # A partition that does not exist of a topic that does.
            result = conn.produce(STABLE, 5, build_batch([(b"k", b"v")]))
            assert result["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert "nope" not in {t["name"] for t in conn.metadata(None)["topics"]}
        s.assert_unharmed()
    finally:
        s.client.close()


# -- random bytes -----------------------------------------------------------------------------

# Requests that could legitimately change what the broker stores are left out of the
# structured fuzzing: the point is that garbage never does.
_FUZZ_KEYS = [
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.DESCRIBE_CLUSTER,
]

_random_frames = st.binary(min_size=0, max_size=300).map(lambda b: struct.pack(">i", len(b)) + b)
_structured_frames = st.builds(
    lambda key, version, cid, body: (
        struct.pack(">i", 8 + len(body)) + struct.pack(">hhi", key, version, cid) + body
    ),
    st.sampled_from(_FUZZ_KEYS),
    st.integers(min_value=0, max_value=17),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.binary(max_size=300),
)
_raw_bytes = st.binary(min_size=1, max_size=64)


@pytest.mark.timeout(240)
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.one_of(_random_frames, _structured_frames, _raw_bytes))
def test_fuzz_random_frames_never_break_the_broker(seeded: Seeded, data: bytes) -> None:
    host, port = split_bootstrap(seeded.broker.bootstrap)
    with socket.create_connection((host, port), timeout=2) as sock:
        sock.sendall(data)
        sock.settimeout(0.1)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            pass
    with WireClient(seeded.broker.bootstrap, timeout=5) as conn:
        assert conn.metadata([STABLE])["topics"][0]["error_code"] == ErrorCode.NONE
        assert conn.fetch(STABLE, 0, 0)["records"] == seeded.fetched
