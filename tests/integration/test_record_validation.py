"""Record validation on append, as Kafka's LogValidator does it, over raw sockets: a batch
whose records are not what its header says is refused whole (nothing of the partition's
data in that request is stored, the log end offset does not move), with an error
response, never a closed connection; what is stored stays readable by every client.
And reads of stored data that cannot be decoded (a disk fault, an older broker) give the
partition an error code, never a traceback."""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError

from kafka_wire import PRODUCE_V, WireClient
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.batch import HEADER_SIZE, compute_crc
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType, compress
from logbus.records.legacy import decode_message_set

pytestmark = pytest.mark.timeout(90)

_LAST_OFFSET_DELTA_AT = 23
_MAX_TIMESTAMP_AT = 35
_RECORD_COUNT_AT = HEADER_SIZE - 4


def reseal(batch: bytearray) -> bytes:
    """The batch with a CRC that matches its (altered) bytes."""
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return bytes(batch)


def with_body(batch: bytes, body: bytes) -> bytes:
    """`batch` with its records section replaced and its length and CRC fixed."""
    out = bytearray(batch[:HEADER_SIZE] + body)
    struct.pack_into(">i", out, 8, len(out) - 12)
    return reseal(out)


def produce(bootstrap: str, topic: str, records: bytes) -> dict[str, Any]:
    """Produce over a raw socket; the partition's response (the broker must answer)."""
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    with WireClient(bootstrap) as conn:
        conn.send_raw(
            codec.encode_request(codec.RequestHeader(ApiKey.PRODUCE, PRODUCE_V, 1, "t"), body)
        )
        frame = conn.recv_frame()
        assert frame is not None, "the broker closed the connection instead of answering"
        _cid, response = codec.decode_response(ApiKey.PRODUCE, PRODUCE_V, frame)
    return dict(response["responses"][0]["partition_responses"][0])


def end_offset(bootstrap: str, topic: str) -> int:
    with WireClient(bootstrap) as conn:
        error, offset, _ = conn.list_offset(topic, 0, -1)
    assert error == ErrorCode.NONE
    return offset


def good_batch(n: int = 3, codec: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch([(b"k%d" % i, b"value %d" % i) for i in range(n)], compression=codec)


@pytest.fixture
def topic(broker: Any) -> str:
    with WireClient(broker.bootstrap) as conn:
        assert conn.create_topic("checked", 1)[0] == ErrorCode.NONE
        assert conn.produce("checked", 0, good_batch())["error_code"] == ErrorCode.NONE
    return "checked"


def assert_refused(broker: Any, topic: str, records: bytes, *codes: ErrorCode) -> dict[str, Any]:
    before = end_offset(broker.bootstrap, topic)
    part = produce(broker.bootstrap, topic, records)
    assert part["error_code"] in (codes or (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD))
    assert part["error_message"]
    assert end_offset(broker.bootstrap, topic) == before
    return part


def consume_all_with_confluent(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "validation-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        for _ in range(200):
            message = consumer.poll(0.2)
            if message is None:
                if len(values) >= expected:
                    break
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"consumer error: {error}")
            if error is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    "codec",
    [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD],
)
def test_corrupt_compressed_payload_under_a_valid_crc_is_refused(
    broker: Any, topic: str, codec: CompressionType
) -> None:
    batch = good_batch(50, codec)
    payload = batch[HEADER_SIZE:]
    half = len(payload) // 2
    corrupt = payload[:half] + bytes((b ^ 0x5A) for b in payload[half:])
    assert_refused(broker, topic, with_body(batch, corrupt))
    # What a consumer finds is what was acknowledged, readable by librdkafka.
    assert produce(broker.bootstrap, topic, good_batch(2, codec))["error_code"] == 0
    values = consume_all_with_confluent(broker.bootstrap, topic, 5)
    assert values == [b"value 0", b"value 1", b"value 2", b"value 0", b"value 1"]


def test_garbled_record_length_in_an_uncompressed_batch_is_refused(
    broker: Any, topic: str
) -> None:
    batch = bytearray(good_batch(4))
    size = (len(batch) - HEADER_SIZE) // 4
    batch[HEADER_SIZE + 2 * size] = 0x7E  # record 2's length varint: 63, past its end
    part = assert_refused(broker, topic, reseal(batch), ErrorCode.INVALID_RECORD)
    # Produce v8+ names the record (RecordError.batchIndex) as Kafka does.
    assert [e["batch_index"] for e in part["record_errors"]] == [2]


def lying_gzip_batch() -> bytes:
    """Two records in a gzip batch whose header claims 2**31 - 1 (count and last offset
    delta agree, the CRC is valid)."""
    batch = bytearray(good_batch(2, CompressionType.GZIP))
    struct.pack_into(">i", batch, _RECORD_COUNT_AT, 2**31 - 1)
    struct.pack_into(">i", batch, _LAST_OFFSET_DELTA_AT, 2**31 - 2)
    return reseal(batch)


def test_a_batch_claiming_two_billion_records_is_refused(broker: Any, topic: str) -> None:
    for _ in range(3):
        assert_refused(broker, topic, lying_gzip_batch())
    assert end_offset(broker.bootstrap, topic) == 3
    log_dir = Path(broker.data_dir) / f"{topic}-0"
    assert len(list(log_dir.glob("*.log"))) == 1  # no segment rolled


def test_a_good_batch_then_a_lying_one_gets_an_error_and_stores_nothing(
    broker: Any, topic: str
) -> None:
    assert_refused(broker, topic, good_batch(2) + lying_gzip_batch())
    with WireClient(broker.bootstrap) as conn:
        assert [r.value for r in conn.read_all(topic, 0)] == [b"value 0", b"value 1", b"value 2"]


def test_a_max_timestamp_other_than_the_records_is_refused(broker: Any, topic: str) -> None:
    batch = bytearray(build_batch([NewRecord(b"k", b"v", (), 1_700_000_000_000)]))
    struct.pack_into(">q", batch, _MAX_TIMESTAMP_AT, 1_700_000_000_000 + 10**9)
    assert_refused(broker, topic, reseal(batch), ErrorCode.INVALID_RECORD)


def test_offset_deltas_out_of_order_are_refused(broker: Any, topic: str) -> None:
    from logbus.records.record import encode_record

    body = encode_record(1, 0, b"a", b"x") + encode_record(0, 0, b"b", b"y")
    assert_refused(broker, topic, with_body(good_batch(2), body), ErrorCode.INVALID_RECORD)


def test_producer_fields_are_checked(broker: Any, topic: str) -> None:
    records = [(b"k", b"v")]
    # a sequence of -1 from an idempotent producer (Kafka's LogValidator)
    batch = build_batch(records, producer_id=7, producer_epoch=0, base_sequence=-1)
    assert_refused(broker, topic, batch, ErrorCode.INVALID_RECORD)
    # a transactional batch in a request without a transactional id (Kafka's KafkaApis)
    batch = build_batch(
        records, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    assert_refused(broker, topic, batch, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def test_a_decompression_bomb_is_refused(broker: Any, topic: str) -> None:
    # 48 MiB of zeros: beyond the 32 MiB a batch may decompress to (32 x max(1 MiB,
    # max.message.bytes)); zstd packs it into a few KiB.
    bomb = compress(CompressionType.ZSTD, bytes(48 << 20))
    batch = bytearray(build_batch([(None, b"v")], compression=CompressionType.ZSTD))
    assert_refused(broker, topic, with_body(bytes(batch), bomb), ErrorCode.CORRUPT_MESSAGE)


# -- reads of stored data never raise --------------------------------------------------------

FETCH_V3_BODY = {
    "replica_id": -1,
    "max_wait_ms": 0,
    "min_bytes": 0,
    "max_bytes": 1 << 20,
    "isolation_level": 0,
}


def fetch(bootstrap: str, topic: str, version: int, offset: int = 0) -> dict[str, Any]:
    body = {
        **FETCH_V3_BODY,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    with WireClient(bootstrap) as conn:
        response = conn.request(ApiKey.FETCH, version, body)
    return dict(response["responses"][0]["partitions"][0])


def test_an_unreadable_stored_batch_is_an_error_for_old_fetches_not_a_traceback(
    broker: Any, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert produce(broker.bootstrap, topic, good_batch(2, CompressionType.GZIP))["error_code"] == 0
    broker.stop()
    # Garble the stored gzip batch (the second) under a valid CRC, as a disk fault or an
    # older broker without record validation would have left it.
    segment = Path(broker.data_dir) / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    first_size = struct.unpack_from(">i", data, 8)[0] + 12
    second = data[first_size:]
    for i in range(HEADER_SIZE + 10, len(second)):
        second[i] ^= 0x5A
    segment.write_bytes(bytes(data[:first_size]) + reseal(second))
    broker.start()
    caplog.set_level(logging.INFO)
    for version in (0, 1, 2, 3):
        # the batch before the bad one is served down-converted...
        part = fetch(broker.bootstrap, topic, version)
        assert part["error_code"] == ErrorCode.NONE, version
        assert [m.value for m in decode_message_set(part["records"])] == [
            b"value 0", b"value 1", b"value 2"
        ]
        # ...and a fetch at the bad batch gets CORRUPT_MESSAGE for the partition.
        part = fetch(broker.bootstrap, topic, version, offset=3)
        assert part["error_code"] == ErrorCode.CORRUPT_MESSAGE, version
    # v4+ serves the stored bytes as they are (the consumer checks them), as Kafka does.
    part = fetch(broker.bootstrap, topic, 4)
    assert part["error_code"] == ErrorCode.NONE
    assert bytes(part["records"]) == bytes(data[:first_size]) + reseal(second)
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
