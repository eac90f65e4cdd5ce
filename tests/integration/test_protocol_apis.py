"""The broker's APIs at every advertised version, spoken directly on the wire."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import UUID

import pytest
from wire import batch, fetch, produce, run, values

from logbus.client.connection import Connection
from logbus.client.errors import KafkaConnectionError
from logbus.protocol import ApiKey, ErrorCode
from logbus.records.batch import BatchHeader
from logbus.records.builder import NewRecord, build_batch


async def create_topic(conn: Connection, name: str, partitions: int = 1,
                       configs: dict[str, str] | None = None) -> dict[str, Any]:
    response = await conn.request(ApiKey.CREATE_TOPICS, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": k, "value": v}
                                                   for k, v in (configs or {}).items()]}],
        "timeout_ms": 5000,
    })
    topic: dict[str, Any] = response["topics"][0]
    assert topic["error_code"] == ErrorCode.NONE, topic
    return topic


def test_api_versions_lists_every_handler_at_every_version(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        for version in range(5):
            response = await conn.request(ApiKey.API_VERSIONS, {
                "client_software_name": "logbus-tests", "client_software_version": "1.0"},
                version)
            assert response["error_code"] == ErrorCode.NONE
            ranges = {k["api_key"]: (k["min_version"], k["max_version"])
                      for k in response["api_keys"]}
            assert ranges[ApiKey.PRODUCE] == (0, 11)
            assert ranges[ApiKey.FETCH] == (0, 17)
            assert ranges[ApiKey.API_VERSIONS] == (0, 4)
            assert ranges == {h.api_key: (h.min_version, h.max_version)
                              for h in broker.broker.apis.handlers.values()}
        bad = await conn.request(ApiKey.API_VERSIONS, {
            "client_software_name": "-bad name-", "client_software_version": "1"}, 3)
        assert bad["error_code"] == ErrorCode.INVALID_REQUEST

    run(broker.bootstrap, check)


def test_produce_and_fetch_round_trip_at_every_version(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        created = await create_topic(conn, "every-version")
        topic_id = created["topic_id"]
        expected = []
        for version in range(3, 12):
            value = f"v{version}".encode()
            result = await produce(conn, "every-version", 0, batch(value), version=version)
            assert result["error_code"] == ErrorCode.NONE
            assert result["base_offset"] == version - 3
            expected.append((version - 3, value))
        for version in range(4, 18):
            result = await fetch(conn, "every-version", 0, 0, version=version,
                                 topic_id=topic_id)
            assert result["error_code"] == ErrorCode.NONE, version
            assert result["high_watermark"] == len(expected)
            assert values(result["records"]) == expected, version
            if version >= 5:
                assert result["log_start_offset"] == 0

    run(broker.bootstrap, check)


def test_metadata_every_version_and_topic_ids(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        created = await create_topic(conn, "meta", partitions=3)
        for version in range(13):
            response = await conn.request(ApiKey.METADATA, {
                "topics": [{"name": "meta", "topic_id": UUID(int=0)}],
                "allow_auto_topic_creation": False}, version)
            (topic,) = response["topics"]
            assert topic["error_code"] == ErrorCode.NONE
            assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
            assert all(p["leader_id"] == 0 and p["isr_nodes"] == [0]
                       for p in topic["partitions"])
            assert response["brokers"][0]["port"] == broker.port
            if version >= 10:
                assert topic["topic_id"] == created["topic_id"]
        by_id = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": None, "topic_id": created["topic_id"]}]}, 12)
        assert by_id["topics"][0]["name"] == "meta"
        unknown = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": None, "topic_id": UUID(int=5)}]}, 12)
        assert unknown["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID

    run(broker.bootstrap, check)


def test_metadata_auto_creation_follows_config_and_request(broker_factory: Any) -> None:
    on = broker_factory(**{"num.partitions": "4"})
    off = broker_factory(**{"auto.create.topics.enable": "false"})

    async def check_on(conn: Connection) -> None:
        refused = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": "not-allowed"}], "allow_auto_topic_creation": False}, 12)
        assert refused["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        made = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": "auto"}], "allow_auto_topic_creation": True}, 12)
        assert made["topics"][0]["error_code"] == ErrorCode.NONE
        assert len(made["topics"][0]["partitions"]) == 4
        invalid = await conn.request(ApiKey.METADATA, {"topics": [{"name": "bad/name"}]}, 12)
        assert invalid["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION

    async def check_off(conn: Connection) -> None:
        response = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": "auto"}], "allow_auto_topic_creation": True}, 12)
        assert response["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(on.bootstrap, check_on)
    run(off.bootstrap, check_off)


def test_fetch_long_poll_returns_when_data_arrives(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "poll")
        host, port = broker.bootstrap.split(":")
        other = await Connection.connect(host, int(port))
        try:
            waiting = asyncio.create_task(
                fetch(conn, "poll", 0, 0, max_wait_ms=20_000, min_bytes=1))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await produce(other, "poll", 0, batch(b"wake up"))
            result = await asyncio.wait_for(waiting, 10)
            assert values(result["records"]) == [(0, b"wake up")]
        finally:
            await other.close()
        started = time.monotonic()
        empty = await fetch(conn, "poll", 0, 1, max_wait_ms=400, min_bytes=1)
        assert time.monotonic() - started >= 0.3
        assert empty["error_code"] == ErrorCode.NONE and values(empty["records"]) == []

    run(broker.bootstrap, check)


def test_fetch_size_limits(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "sizes", partitions=2)
        for i in range(5):
            await produce(conn, "sizes", 0, batch(bytes([i]) * 1000))
            await produce(conn, "sizes", 1, batch(bytes([i]) * 1000))
        size = BatchHeader.parse(batch(b"x" * 1000)).size
        two = await fetch(conn, "sizes", 0, 0, partition_max_bytes=2 * size + 10)
        assert [o for o, _v in values(two["records"])] == [0, 1]
        # The first batch is returned even when it is larger than the limit (KIP-74).
        one = await fetch(conn, "sizes", 0, 0, partition_max_bytes=10)
        assert [o for o, _v in values(one["records"])] == [0]
        response = await conn.request(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": size * 3,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "sizes", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                for p in (0, 1)]}]}, 12)
        parts = response["responses"][0]["partitions"]
        assert len(values(parts[0]["records"])) == 3
        assert values(parts[1]["records"]) == []

    run(broker.bootstrap, check)


def test_fetch_errors(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "errs")
        await produce(conn, "errs", 0, batch(b"a"))
        out_of_range = await fetch(conn, "errs", 0, 5)
        assert out_of_range["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        unknown = await fetch(conn, "nope", 0, 0, version=12)
        assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        by_bad_id = await fetch(conn, "", 0, 0, version=13, topic_id=UUID(int=42))
        assert by_bad_id["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        session = await conn.request(ApiKey.FETCH, {
            "max_wait_ms": 0, "session_id": 12345, "session_epoch": 1, "topics": []}, 12)
        assert session["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        new_session = await conn.request(ApiKey.FETCH, {
            "max_wait_ms": 0, "session_id": 0, "session_epoch": 0, "topics": []}, 12)
        assert new_session["error_code"] == ErrorCode.NONE
        assert new_session["session_id"] == 0  # answered as sessionless

    run(broker.bootstrap, check)


def test_list_offsets_every_version(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "times")
        for i, ts in enumerate((1000, 3000, 2000, 5000)):
            await produce(conn, "times", 0, build_batch([NewRecord(None, b"%d" % i, (), ts)]))

        async def lookup(timestamp: int, version: int) -> tuple[int, int, int]:
            response = await conn.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "topics": [{"name": "times", "partitions": [
                    {"partition_index": 0, "timestamp": timestamp}]}]}, version)
            p = response["topics"][0]["partitions"][0]
            return p["error_code"], p["offset"], p["timestamp"]

        for version in range(1, 11):
            assert await lookup(-2, version) == (0, 0, -1)
            assert await lookup(-1, version) == (0, 4, -1)
            assert await lookup(2500, version) == (0, 1, 3000)
            assert await lookup(1000, version) == (0, 0, 1000)
            assert await lookup(6000, version) == (0, -1, -1)
            if version >= 7:
                assert await lookup(-3, version) == (0, 3, 5000)
        missing = await conn.request(ApiKey.LIST_OFFSETS, {"topics": [{
            "name": "times", "partitions": [{"partition_index": 9, "timestamp": -1}]}]})
        assert missing["topics"][0]["partitions"][0]["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(broker.bootstrap, check)


def test_produce_errors(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "strict", configs={"min.insync.replicas": "2"})
        short = await produce(conn, "strict", 0, batch(b"x"), acks=-1)
        assert short["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        leader_only = await produce(conn, "strict", 0, batch(b"x"), acks=1)
        assert leader_only["error_code"] == ErrorCode.NONE
        bad_acks = await produce(conn, "strict", 0, batch(b"x"), acks=2)
        assert bad_acks["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
        no_partition = await produce(conn, "strict", 7, batch(b"x"))
        assert no_partition["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(broker.bootstrap, check)


def test_failed_acks_zero_produce_closes_the_connection(broker_factory: Any) -> None:
    running = broker_factory(**{"auto.create.topics.enable": "false"})

    async def check(conn: Connection) -> None:
        await produce(conn, "missing", 0, batch(b"x"), acks=0)
        with pytest.raises(KafkaConnectionError):
            await conn.request(ApiKey.METADATA, {"topics": []})

    run(running.bootstrap, check)


def test_log_append_time_topic(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "lat", configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        result = await produce(conn, "lat", 0, build_batch([NewRecord(None, b"x", (), 42)]))
        assert result["log_append_time_ms"] >= before
        fetched = await fetch(conn, "lat", 0, 0)
        header = BatchHeader.parse(bytes(fetched["records"]))
        assert header.is_log_append_time
        assert header.max_timestamp == result["log_append_time_ms"]

    run(broker.bootstrap, check)


def _idempotent_batch(pid: int, epoch: int, seq: int, *payload: bytes) -> bytes:
    return build_batch([NewRecord(None, v) for v in payload], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def test_idempotent_produce_survives_restart(broker: Any) -> None:
    async def init(conn: Connection) -> tuple[int, int]:
        await create_topic(conn, "idem")
        response = await conn.request(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        assert response["error_code"] == ErrorCode.NONE
        pid, epoch = response["producer_id"], response["producer_epoch"]
        first = await produce(conn, "idem", 0, _idempotent_batch(pid, epoch, 0, b"a", b"b"))
        assert (first["error_code"], first["base_offset"]) == (ErrorCode.NONE, 0)
        retry = await produce(conn, "idem", 0, _idempotent_batch(pid, epoch, 0, b"a", b"b"))
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, 0)
        gap = await produce(conn, "idem", 0, _idempotent_batch(pid, epoch, 5, b"z"))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return pid, epoch

    pid, epoch = run(broker.bootstrap, init)
    broker.restart()

    async def after(conn: Connection) -> None:
        retry = await produce(conn, "idem", 0, _idempotent_batch(pid, epoch, 0, b"a", b"b"))
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, 0)
        following = await produce(conn, "idem", 0, _idempotent_batch(pid, epoch, 2, b"c"))
        assert (following["error_code"], following["base_offset"]) == (ErrorCode.NONE, 2)
        assert values((await fetch(conn, "idem", 0, 0))["records"]) == [
            (0, b"a"), (1, b"b"), (2, b"c")]

    run(broker.bootstrap, after)


def test_segments_roll_and_reads_span_them(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        await create_topic(conn, "rolling", configs={"segment.bytes": "1024"})
        for i in range(20):
            await produce(conn, "rolling", 0, batch(b"%03d" % i + b"-" * 200))
        got = []
        offset = 0
        while offset < 20:
            result = await fetch(conn, "rolling", 0, offset, partition_max_bytes=600)
            chunk = values(result["records"])
            assert chunk, offset
            got += chunk
            offset = chunk[-1][0] + 1
        assert [int(v[:3]) for _o, v in got] == list(range(20))

    run(broker.bootstrap, check)
    logs = sorted((broker.data_dir / "rolling-0").glob("*.log"))
    assert len(logs) > 3
    assert all(p.with_suffix(".index").exists() and p.with_suffix(".timeindex").exists()
               for p in logs)


def test_find_coordinator_every_version_creates_the_offsets_topic(broker: Any) -> None:
    async def check(conn: Connection) -> None:
        for version in range(7):
            body: dict[str, Any] = {"key": "my-group", "key_type": 0,
                                    "coordinator_keys": ["my-group", "other"]}
            response = await conn.request(ApiKey.FIND_COORDINATOR, body, version)
            found = response["coordinators"] if version >= 4 else [response]
            for entry in found:
                assert entry["error_code"] == ErrorCode.NONE
                assert (entry["node_id"], entry["port"]) == (0, broker.port)
        meta = await conn.request(ApiKey.METADATA, {"topics": [{"name": "__consumer_offsets"}],
                                                    "allow_auto_topic_creation": False})
        (topic,) = meta["topics"]
        assert topic["is_internal"] and len(topic["partitions"]) == 50
        txn = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "t", "key_type": 1}, 3)
        assert (txn["error_code"], txn["node_id"], txn["port"]) == (ErrorCode.NONE, 0, broker.port)
        empty = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "", "key_type": 0}, 3)
        assert empty["error_code"] == ErrorCode.INVALID_REQUEST
        internal = await produce(conn, "__consumer_offsets", 0, batch(b"x"))
        assert internal["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION

    run(broker.bootstrap, check)


def test_old_message_formats_are_converted(broker: Any) -> None:
    """Produce v0-2 message sets (magic 0/1) are stored as record batches; Fetch v0-3
    down-converts them; a real old-protocol client (kafka-python pinned to 0.10.1) works."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1),
                             compression_type="gzip")
    sent = [producer.send("legacy", key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=1000 + i)
            for i in range(10)]
    producer.flush()
    assert [f.get(5).offset for f in sent] == list(range(10))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 1),
                             group_id=None, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("legacy", 0)])
    consumer.seek(TopicPartition("legacy", 0), 0)
    got = [(m.offset, m.key, m.value, m.timestamp) for m in consumer]
    consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(10)]

    async def check(conn: Connection) -> None:
        stored = await fetch(conn, "legacy", 0, 0)
        header = BatchHeader.parse(bytes(stored["records"]))
        assert header.magic == 2 and header.compression == 1  # gzip kept
        for version in range(4):
            old = await conn.request(ApiKey.FETCH, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [{
                    "topic": "legacy", "partitions": [{
                        "partition": 0, "fetch_offset": 5,
                        "partition_max_bytes": 1 << 20}]}]}, version)
            records = bytes(old["responses"][0]["partitions"][0]["records"])
            assert records[16] == (0 if version < 2 else 1)  # magic of the first message
        v0 = await conn.request(ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [{
            "name": "legacy", "partitions": [
                {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}]}]}, 0)
        assert v0["topics"][0]["partitions"][0]["old_style_offsets"] == [10]

    run(broker.bootstrap, check)
