"""The transaction requests of `logbus.client.requests.transactions`: every builder is
what Kafka's schema decodes at every version the schema has (checked with the broker's own
decoder), and every reader reads what a broker's encoder writes, errors kept per item."""

from __future__ import annotations

from typing import Any

import pytest
from txn_request_bodies import A0, A1, B2, TXN_BUILDERS

from logbus.client.errors import KafkaError
from logbus.client.requests import transactions as txn
from logbus.protocol import ApiKey, ErrorCode, codec, schema


def _round_trip(key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    header = codec.RequestHeader(key, version, 3, "logbus-test")
    decoded_header, decoded = codec.decode_request(codec.encode_request(header, body)[4:])
    assert decoded_header == header
    return decoded


def _response(key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    frame = b"".join(bytes(chunk) for chunk in codec.encode_response(key, version, 3, body))
    return codec.decode_response(key, version, frame[4:])[1]


def _versions(key: int) -> list[int]:
    low, high = schema.request(key).valid_versions
    return list(range(low, high + 1))


CASES = [(key, v) for key in TXN_BUILDERS for v in _versions(key)]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_builder_decodes_at_every_version(key: int, version: int) -> None:
    body = TXN_BUILDERS[key](version)
    names = {spec[0] for spec in schema.request(key).fields}
    assert set(body) <= names
    _round_trip(key, version, body)


@pytest.mark.parametrize("version", _versions(ApiKey.ADD_PARTITIONS_TO_TXN))
def test_add_partitions_names_the_transaction_in_each_form(version: int) -> None:
    decoded = _round_trip(
        ApiKey.ADD_PARTITIONS_TO_TXN, version, TXN_BUILDERS[ApiKey.ADD_PARTITIONS_TO_TXN](version)
    )
    if version >= 4:
        t = decoded["transactions"][0]
        fields = (t["transactional_id"], t["producer_id"], t["producer_epoch"], t["topics"])
    else:
        fields = (
            decoded["v3_and_below_transactional_id"],
            decoded["v3_and_below_producer_id"],
            decoded["v3_and_below_producer_epoch"],
            decoded["v3_and_below_topics"],
        )
    assert fields[:3] == ("t1", 4000, 7)
    assert {(t["name"], p) for t in fields[3] for p in t["partitions"]} == {
        ("a", 0), ("a", 1), ("b", 2)
    }


@pytest.mark.parametrize("version", _versions(ApiKey.TXN_OFFSET_COMMIT))
def test_txn_offset_commit_carries_the_member_from_v3(version: int) -> None:
    decoded = _round_trip(
        ApiKey.TXN_OFFSET_COMMIT, version, TXN_BUILDERS[ApiKey.TXN_OFFSET_COMMIT](version)
    )
    assert (decoded["transactional_id"], decoded["group_id"]) == ("t1", "g")
    offsets = {
        (t["name"], p["partition_index"]): p["committed_offset"]
        for t in decoded["topics"]
        for p in t["partitions"]
    }
    assert offsets == {("a", 0): 10, ("b", 2): 20}
    if version >= 3:
        assert (decoded["member_id"], decoded["generation_id"]) == ("member-1", 5)
        assert decoded["group_instance_id"] == "instance-1"


def test_list_transactions_refuses_a_duration_before_v1() -> None:
    with pytest.raises(KafkaError) as caught:
        txn.build_list_transactions(0, duration_ms=5)
    assert caught.value.code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_read_add_partitions_keeps_each_partition_error(version: int) -> None:
    results = [
        {
            "name": "a",
            "results_by_partition": [
                {"partition_index": 0, "partition_error_code": 0},
                {"partition_index": 1, "partition_error_code": ErrorCode.CONCURRENT_TRANSACTIONS},
            ],
        }
    ]
    body: dict[str, Any] = (
        {"error_code": 0, "results_by_transaction": [
            {"transactional_id": "t1", "topic_results": results}
        ]}
        if version >= 4
        else {"results_by_topic_v3_and_below": results}
    )
    read = txn.read_add_partitions_to_txn(
        _response(ApiKey.ADD_PARTITIONS_TO_TXN, version, body), version, [A0, A1, B2]
    )
    assert read[A0] is None
    err1, err2 = read[A1], read[B2]
    assert isinstance(err1, KafkaError) and err1.code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert isinstance(err2, KafkaError) and err2.code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_read_add_partitions_top_level_error_is_every_partitions() -> None:
    body = {"error_code": ErrorCode.PRODUCER_FENCED, "results_by_transaction": []}
    read = txn.read_add_partitions_to_txn(
        _response(ApiKey.ADD_PARTITIONS_TO_TXN, 4, body), 4, [A0, B2]
    )
    assert {e.code for e in read.values() if isinstance(e, KafkaError)} == {
        ErrorCode.PRODUCER_FENCED
    }


@pytest.mark.parametrize("version", _versions(ApiKey.END_TXN))
def test_read_end_txn_raises_its_error(version: int) -> None:
    ok = _response(ApiKey.END_TXN, version, {"error_code": 0})
    txn.read_error(ok, "EndTxn commit")
    bad = _response(ApiKey.END_TXN, version, {"error_code": ErrorCode.INVALID_TXN_STATE})
    with pytest.raises(KafkaError) as caught:
        txn.read_error(bad, "EndTxn abort")
    assert caught.value.code == ErrorCode.INVALID_TXN_STATE
    assert "EndTxn abort" in str(caught.value)


def test_read_describe_transactions_and_producers() -> None:
    described = _response(
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        {
            "transaction_states": [
                {
                    "error_code": 0,
                    "transactional_id": "t1",
                    "transaction_state": "Ongoing",
                    "transaction_timeout_ms": 60000,
                    "transaction_start_time_ms": 123,
                    "producer_id": 4000,
                    "producer_epoch": 7,
                    "topics": [
                        {"topic": "b", "partitions": [2]},
                        {"topic": "a", "partitions": [0]},
                    ],
                },
                {"error_code": ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": "t2"},
            ]
        },
    )
    read = txn.read_describe_transactions(described, ["t1", "t2", "t3"])
    assert read["t1"] == txn.TransactionDescription("t1", "Ongoing", 60000, 123, 4000, 7, [A0, B2])
    t2, t3 = read["t2"], read["t3"]
    assert isinstance(t2, KafkaError) and t2.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert isinstance(t3, KafkaError)
    producers = _response(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        {
            "topics": [
                {
                    "name": "a",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "active_producers": [
                                {"producer_id": 4000, "producer_epoch": 7, "last_sequence": 9,
                                 "last_timestamp": 55, "coordinator_epoch": 2,
                                 "current_txn_start_offset": 17}
                            ],
                        },
                        {"partition_index": 1, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER},
                    ],
                }
            ]
        },
    )
    found = txn.read_describe_producers(producers, [A0, A1])
    assert found[A0] == [txn.ProducerState(4000, 7, 9, 55, 2, 17)]
    a1 = found[A1]
    assert isinstance(a1, KafkaError) and a1.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("version", [0, 1])
def test_read_list_transactions(version: int) -> None:
    body = {
        "error_code": 0,
        "transaction_states": [
            {"transactional_id": "t1", "producer_id": 4000, "transaction_state": "Ongoing"}
        ],
    }
    listed = txn.read_list_transactions(_response(ApiKey.LIST_TRANSACTIONS, version, body))
    assert listed == [txn.ListedTransaction("t1", 4000, "Ongoing")]
