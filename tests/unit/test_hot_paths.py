"""The hand-written Produce decoder and Fetch encoder agree with the generic codec."""

from __future__ import annotations

from uuid import UUID

import pytest

from logbus.protocol import ApiKey, codec, schema
from logbus.protocol import types as t
from logbus.protocol.errors import ProtocolError
from logbus.protocol.fetch import encode_fetch_response
from logbus.protocol.produce import decode_produce_request


def _produce_body() -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1500,
        "topic_data": [
            {
                "name": "a",
                "partition_data": [
                    {"index": 0, "records": b"x" * 70},
                    {"index": 3, "records": None},
                ],
            },
            {"name": "bé", "partition_data": [{"index": 1, "records": b""}]},
        ],
    }


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_decoder_matches_generic(version: int) -> None:
    body = _produce_body()
    encoded = schema.request(ApiKey.PRODUCE).encode(body, version)
    generic = schema.request(ApiKey.PRODUCE).decode(encoded, version)
    fast = decode_produce_request(memoryview(encoded), 0, version)

    def norm(v: object) -> object:
        if isinstance(v, memoryview):
            return bytes(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    assert norm(fast) == norm(generic)
    assert isinstance(fast["topic_data"][0]["partition_data"][0]["records"], memoryview)


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_decoder_rejects_truncation(version: int) -> None:
    encoded = schema.request(ApiKey.PRODUCE).encode(_produce_body(), version)
    for cut in range(0, len(encoded) - 1, 7):
        with pytest.raises(ProtocolError):
            decode_produce_request(memoryview(encoded[:cut]), 0, version)


def _fetch_body(records: object) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "topic_id": UUID(int=99),
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 10,
                        "last_stable_offset": 10,
                        "log_start_offset": 2,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": records,
                    },
                    {
                        "partition_index": 1,
                        "error_code": 1,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": [{"producer_id": 5, "first_offset": 7}],
                        "preferred_read_replica": -1,
                        "records": b"",
                    },
                ],
            }
        ],
    }


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_encoder_matches_generic(version: int) -> None:
    body = _fetch_body(b"r" * 9000)
    w = t.Writer()
    encode_fetch_response(w, body, version)
    assert w.getvalue() == schema.response(ApiKey.FETCH).encode(body, version)


def test_fetch_response_keeps_large_records_as_separate_chunks() -> None:
    payload = b"r" * 100_000
    chunks = codec.encode_response(ApiKey.FETCH, 12, 7, _fetch_body(payload))
    assert any(chunk is payload for chunk in chunks)
    correlation_id, decoded = codec.decode_response(ApiKey.FETCH, 12, b"".join(chunks)[4:])
    assert correlation_id == 7
    assert bytes(decoded["responses"][0]["partitions"][0]["records"]) == payload
