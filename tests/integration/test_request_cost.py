"""What one request can cost the broker: a request that names the same thing many times is
answered as if it named it once (Kafka keeps the requested topics and resources in sets),
so a small request cannot ask for an answer thousands of times its size."""

from __future__ import annotations

import select
import socket
import struct
import time
from typing import Any

import cramjam

from kafka_wire import WireClient, wait_for
from logbus.protocol import ApiKey, ErrorCode, codec
from logbus.records.batch import HEADER_SIZE, LOG_OVERHEAD, compute_crc
from logbus.records.builder import NewRecord, build_batch
from logbus.records.compression import CompressionType, compress
from logbus.records.legacy import decode_message_set

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
REPEATS = 2000


def _create(client: WireClient, name: str, partitions: int = 2, **configs: str) -> None:
    assert client.create_topic(name, partitions, configs) == (ErrorCode.NONE, None)


def test_describe_configs_describes_a_repeated_resource_once(broker: Any) -> None:
    # The broker named 2,000 times over, as "0", "00" and "+0", and a topic 2,000 times: a
    # 30 KB request that asked for a 100 MB answer.
    resources = [
        {"resource_type": BROKER, "resource_name": name, "configuration_keys": None}
        for name in ("0", "00", "+0")
        for _ in range(REPEATS)
    ]
    resources += [
        {"resource_type": TOPIC, "resource_name": "described", "configuration_keys": None}
    ] * REPEATS
    resources += [
        {"resource_type": BROKER_LOGGER, "resource_name": "0", "configuration_keys": None}
    ] * REPEATS
    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "described")
        body = {"resources": resources, "include_synonyms": True, "include_documentation": True}
        results = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert [(r["resource_type"], r["resource_name"], r["error_code"]) for r in results] == [
        (BROKER, "0", ErrorCode.NONE),
        (TOPIC, "described", ErrorCode.NONE),
        (BROKER_LOGGER, "0", ErrorCode.NONE),
    ]
    assert all(r["configs"] for r in results)


def test_metadata_answers_a_repeated_topic_once(broker: Any) -> None:
    names = ["listed", "missing", "listed", "missing"] * REPEATS
    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "listed")
        body = {
            "topics": [{"name": n} for n in names],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        topics = client.request(ApiKey.METADATA, 9, body)["topics"]
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in topics] == [
        ("listed", ErrorCode.NONE, 2),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]


def test_offset_commit_too_large_for_the_offsets_topic_is_not_retriable(broker: Any) -> None:
    # 300 commits of 4,000-byte metadata (each under offset.metadata.max.bytes) make one
    # 1.2 MB write, past the offsets topic's max.message.bytes. Kafka answers
    # INVALID_COMMIT_OFFSET_SIZE, which clients raise; COORDINATOR_NOT_AVAILABLE had them
    # retry the same commit for ever.
    def commit(client: WireClient, count: int, metadata: str) -> list[int]:
        partitions = [
            {
                "partition_index": i % 4,
                "committed_offset": i,
                "committed_leader_epoch": -1,
                "committed_metadata": metadata,
            }
            for i in range(count)
        ]
        body = {
            "group_id": "big-commit",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": "committed", "partitions": partitions}],
        }
        response = client.request(ApiKey.OFFSET_COMMIT, 8, body)
        return [p["error_code"] for t in response["topics"] for p in t["partitions"]]

    def committed(client: WireClient) -> list[tuple[int, int]]:
        body = {"group_id": "big-commit", "topics": None, "require_stable": False}
        response = client.request(ApiKey.OFFSET_FETCH, 7, body)
        return [
            (p["partition_index"], p["committed_offset"])
            for t in response["topics"]
            for p in t["partitions"]
        ]

    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "committed", partitions=4)
        # FindCoordinator creates the offsets topic; its partition then loads
        found = client.request(ApiKey.FIND_COORDINATOR, 3, {"key": "big-commit", "key_type": 0})
        assert found["error_code"] == ErrorCode.NONE
        wait_for(lambda: commit(client, 4, "small") == [ErrorCode.NONE] * 4, timeout=30)
        assert set(commit(client, 300, "m" * 4000)) == {ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
        # nothing of the refused commit was stored
        assert sorted(committed(client)) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def _with_records(compressed: bytes) -> bytes:
    """A zstd batch of one record whose records section is `compressed` instead (valid
    batchLength and CRC)."""
    shell = bytearray(build_batch([NewRecord(None, b"v")], compression=CompressionType.ZSTD))
    out = shell[:HEADER_SIZE] + compressed
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)  # batchLength
    struct.pack_into(">I", out, 17, compute_crc(out))  # crc
    return bytes(out)


def _decompression_bomb() -> bytes:
    """A zstd batch of 1 KB whose records section decompresses to 40 MiB of zeros: past
    its bound, so the broker decompresses 32 MiB before it can refuse it."""
    return _with_records(compress(CompressionType.ZSTD, bytes(40 << 20)))


def _recv_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return bytes(data)

    return exact(struct.unpack(">i", exact(4))[0])


def test_a_produce_of_costly_batches_does_not_stall_other_clients(broker_process: Any) -> None:
    # 300 batches that each cost ~13 ms of decompression in one 400 KB request: the
    # broker answers another connection's request while it works through them (it held
    # every client until the whole request was done).
    proc = broker_process()
    with WireClient(proc.bootstrap, timeout=60) as client:
        _create(client, "bombed", partitions=4)
    bomb = _decompression_bomb()
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": "bombed",
                "partition_data": [{"index": i % 4, "records": bomb} for i in range(300)],
            }
        ],
    }
    produce = codec.encode_request(codec.RequestHeader(ApiKey.PRODUCE, 9, 1, "bomber"), body)
    probe = codec.encode_request(codec.RequestHeader(ApiKey.API_VERSIONS, 0, 2, "probe"), {})
    host, port = proc.bootstrap.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=120) as bomber,
        socket.create_connection((host, int(port)), timeout=120) as other,
    ):
        bomber.sendall(produce)
        time.sleep(0.5)  # the broker is into the request's batches
        other.sendall(probe)
        readable, _, _ = select.select([bomber, other], [], [], 120)
        assert readable == [other], "the other client waited for the whole produce"
        _recv_frame(other)
        _cid, response = codec.decode_response(ApiKey.PRODUCE, 9, _recv_frame(bomber))
    errors = {p["error_code"] for t in response["responses"] for p in t["partition_responses"]}
    assert errors == {ErrorCode.CORRUPT_MESSAGE}


def _peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1])


def test_a_decompression_bomb_is_bounded_on_a_topic_of_the_largest_batches(
    broker_process: Any,
) -> None:
    # max.message.bytes=2147483647 is a valid setting; it raised the bound a compressed
    # batch may decompress to up to 1 GiB, so one 35 KB zstd batch of 1.1 GiB of zeros
    # took the broker past 1.1 GB of memory.
    proc = broker_process()
    with WireClient(proc.bootstrap, timeout=60) as client:
        _create(client, "largest", 1, **{"max.message.bytes": "2147483647"})
        compressor = cramjam.zstd.Compressor(3)
        zeros = bytes(16 << 20)
        for _ in range(70):
            compressor.compress(zeros)
        bomb = _with_records(bytes(compressor.finish()))
        # a real 20 MiB record compressed stays accepted
        legit = build_batch([NewRecord(None, bytes(20 << 20))], compression=CompressionType.ZSTD)
        errors = [client.produce("largest", 0, records)["error_code"] for records in (bomb, legit)]
    assert errors == [ErrorCode.CORRUPT_MESSAGE, ErrorCode.NONE]
    assert proc.proc is not None
    assert _peak_rss_kb(proc.proc.pid) < 512 << 10


def test_down_conversion_of_a_batch_of_tiny_records_is_bounded(broker: Any) -> None:
    # 200,000 empty records compress to a few KB; Fetch v0-1 turned every one into a
    # message of its own at once (a 37 MB answer and a 5.6 s stall for a million). Now a
    # partition's messages stop at the stored bytes' size (and 1 MiB): the reader goes
    # on from the next offset.
    count = 200_000
    records = build_batch([NewRecord(None, b"")] * count, compression=CompressionType.ZSTD)

    def fetch_v0(client: WireClient, offset: int) -> list[int]:
        part = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 2**31 - 1}
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "topics": [{"topic": "tiny", "partitions": [part]}],
        }
        response = client.request(ApiKey.FETCH, 0, body)["responses"][0]["partitions"][0]
        assert response["error_code"] == ErrorCode.NONE
        data = bytes(response["records"])
        assert len(data) <= (1 << 20) + 64
        return [m.offset for m in decode_message_set(data)]

    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "tiny", partitions=1)
        assert client.produce("tiny", 0, records)["error_code"] == ErrorCode.NONE
        first = fetch_v0(client, 0)
        assert first == list(range(len(first))) and 0 < len(first) < count
        second = fetch_v0(client, len(first))
        assert second[0] == len(first)


def test_a_request_of_too_many_array_elements_is_refused(broker_process: Any) -> None:
    # 3,000,000 one-character group ids: a 6 MB DescribeGroups that decoded into gigabytes
    # of Python objects (3.6 GB peak, 56 s during which no client was served). Past
    # REQUEST_ELEMENT_LIMIT elements the request is malformed: the connection is closed,
    # the broker keeps its memory and serves others.
    proc = broker_process()
    body = {"groups": ["g"] * 3_000_000, "include_authorized_operations": False}
    frame = codec.encode_request(codec.RequestHeader(ApiKey.DESCRIBE_GROUPS, 5, 1, "many"), body)
    with WireClient(proc.bootstrap, timeout=60) as attacker:
        attacker.send_raw(frame)
        assert attacker.wait_closed(timeout=60)
    assert _peak_rss_kb(proc.proc.pid) < 400 * 1024
    with WireClient(proc.bootstrap, timeout=60) as client:
        # a request within the limit is answered as before
        groups = ["alpha", "beta"] * 1000
        body = {"groups": groups, "include_authorized_operations": False}
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, body)["groups"]
    assert {g["group_id"] for g in described} == {"alpha", "beta"}
