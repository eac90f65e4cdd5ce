"""The generic codec against every generated message table, and against kafka-python."""

from __future__ import annotations

import contextlib
import struct
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbus.protocol import ApiKey, codec, schema
from logbus.protocol.errors import ProtocolError, UnsupportedVersion
from logbus.protocol.messages import MESSAGES

ALL = [
    (name, v)
    for name, _m, _k, _t in MESSAGES
    for v in range(
        schema.message(name).valid_versions[0], schema.message(name).valid_versions[1] + 1
    )
]


def _normalise(value: Any) -> Any:
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


@pytest.mark.parametrize(("name", "version"), ALL)
def test_defaults_round_trip_every_version(name: str, version: int) -> None:
    msg = schema.message(name)
    encoded = msg.encode({}, version)
    assert _normalise(msg.decode(encoded, version)) == _normalise(msg.defaults())


def _sample_metadata_response() -> dict[str, Any]:
    return {
        "throttle_time_ms": 5,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "abc",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": UUID(int=7),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -2147483648,
            }
        ],
        "cluster_authorized_operations": -2147483648,
    }


@pytest.mark.parametrize("version", range(1, 13))
def test_values_round_trip(version: int) -> None:
    msg = schema.response(ApiKey.METADATA)
    value = _sample_metadata_response()
    decoded = msg.decode(msg.encode(value, version), version)
    assert decoded["brokers"][0]["host"] == "h"
    assert decoded["topics"][0]["partitions"][0]["replica_nodes"] == [1]
    if version >= 10:
        assert decoded["topics"][0]["topic_id"] == UUID(int=7)
    if version >= 7:
        assert decoded["topics"][0]["partitions"][0]["leader_epoch"] == 3


def test_request_frame_round_trip_with_tagged_and_trailing_bytes() -> None:
    header = codec.RequestHeader(ApiKey.METADATA, 12, 42, "client-1")
    frame = codec.encode_request(header, {"topics": None, "allow_auto_topic_creation": True})
    body_frame = frame[4:] + b"\x00\x00\x00"  # trailing bytes are tolerated
    got_header, body = codec.decode_request(body_frame)
    assert got_header == header
    assert body["topics"] is None
    assert body["allow_auto_topic_creation"] is True


def test_unknown_tagged_fields_are_skipped() -> None:
    msg = schema.request(ApiKey.API_VERSIONS)
    encoded = bytearray(
        msg.encode({"client_software_name": "x", "client_software_version": "1"}, 3)
    )
    # replace the empty tag section (last byte) with one unknown tag 99 of 2 bytes
    encoded[-1:] = bytes([1, 99, 2, 0xAB, 0xCD])
    decoded = msg.decode(bytes(encoded), 3)
    assert decoded["client_software_name"] == "x"


def test_known_tagged_field_is_read_and_written() -> None:
    msg = schema.response(ApiKey.API_VERSIONS)
    value = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0, "finalized_features_epoch": 7}
    assert msg.decode(msg.encode(value, 3), 3)["finalized_features_epoch"] == 7


def test_matches_kafka_python_encoding() -> None:
    from kafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]

    theirs = MetadataRequest[1](topics=["a", "bc"]).encode()
    ours = schema.request(ApiKey.METADATA).encode({"topics": [{"name": "a"}, {"name": "bc"}]}, 1)
    assert ours == theirs


def test_unsupported_api_key_and_version() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        codec.decode_request(struct.pack(">hhi", 9999, 0, 77))
    assert info.value.correlation_id == 77
    with pytest.raises(UnsupportedVersion):
        codec.decode_request(struct.pack(">hhi", ApiKey.PRODUCE, 99, 1))


def test_truncated_request_is_a_protocol_error() -> None:
    header = codec.RequestHeader(ApiKey.METADATA, 1, 1, "c")
    frame = codec.encode_request(header, {"topics": [{"name": "abc"}]})[4:]
    for cut in range(len(frame) - 1):
        with pytest.raises(ProtocolError):
            codec.decode_request(frame[:cut])


def test_array_count_larger_than_message_is_rejected() -> None:
    body = (
        struct.pack(">hhi", ApiKey.METADATA, 1, 1)
        + struct.pack(">h", -1)
        + struct.pack(">i", 2_000_000_000)
    )
    with pytest.raises(ProtocolError):
        codec.decode_request(body)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(list(ApiKey)), st.integers(0, 20))
def test_fuzz_decoder_raises_only_protocol_errors(data: bytes, key: ApiKey, version: int) -> None:
    frame = struct.pack(">hhi", key, version, 1) + data
    with contextlib.suppress(ProtocolError):
        codec.decode_request(frame)
