"""DescribeLogDirs against real brokers: logbus's admin and kafka-python's
`KafkaAdminClient.describe_log_dirs`, sizes checked against the segment files on disk,
every served version, filters, authorization (principals from the client id,
`acl_helpers`) and an unusable dir."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from acl_helpers import ADMIN, ALICE, SECURED, acl, assign_principals, call, grant
from kafka.admin import KafkaAdminClient

import logbus
from logbus.client.admin import AdminBatchError
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.loop_thread import LoopThread
from logbus.client.requests.log_dirs import build_describe_log_dirs, read_describe_log_dirs
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation as Op
from logbus.protocol.acl_types import ResourceType as R
from logbus.types import TopicPartition

TIMEOUT = 30.0


def topic_name() -> str:
    return f"dirs-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    with logbus.Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, num_partitions=partitions)])
    with logbus.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        for i in range(records):
            producer.send(topic, b"v" * (10 + i), partition=i % partitions)
        producer.flush(TIMEOUT)


def size_on_disk(log_dir: Path, topic: str, partition: int) -> int:
    return sum(f.stat().st_size for f in (log_dir / f"{topic}-{partition}").glob("*.log"))


def raw_request(bootstrap: str, version: int, body: dict[str, Any]) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)
    loop = LoopThread()
    try:

        async def call() -> dict[str, Any]:
            conn = await Connection.connect(host, int(port))
            try:
                return await conn.request(ApiKey.DESCRIBE_LOG_DIRS, body, version)
            finally:
                await conn.close()

        return loop.run(call())
    finally:
        loop.close()


def test_sizes_equal_the_segment_files_on_disk(broker: Any) -> None:
    topic = topic_name()
    produce(broker.bootstrap, topic, 3, 30)
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        found = admin.describe_log_dirs()
    assert list(found) == [0]
    (path, described), = found[0].items()
    assert Path(path) == broker.data_dir.resolve()
    assert described.error is None
    assert described.total_bytes is not None and described.usable_bytes is not None
    assert 0 < described.usable_bytes <= described.total_bytes
    for p in range(3):
        replica = described.replicas[TopicPartition(topic, p)]
        assert replica.size == size_on_disk(broker.data_dir, topic, p) > 0
        assert replica.offset_lag == 0 and replica.is_future is False


def test_size_counts_every_segment(broker: Any) -> None:
    topic = topic_name()
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([logbus.NewTopic(topic, 1, config={"segment.bytes": "1024"})])
    with logbus.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as producer:
        for _ in range(40):
            producer.send(topic, b"x" * 200, partition=0).result(TIMEOUT)
    segments = list((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) > 3
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        (described,) = admin.describe_log_dirs(partitions=[TopicPartition(topic, 0)])[0].values()
    size = described.replicas[TopicPartition(topic, 0)].size
    assert size == sum(f.stat().st_size for f in segments) > 40 * 200


def test_partition_filter_leaves_out_unknown_topics_and_partitions(broker: Any) -> None:
    topic, other = topic_name(), topic_name()
    produce(broker.bootstrap, topic, 2, 4)
    produce(broker.bootstrap, other, 1, 1)
    asked = [TopicPartition(topic, 1), TopicPartition(topic, 7), TopicPartition("nope", 0)]
    with logbus.Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        found = admin.describe_log_dirs([0], partitions=asked)
    (described,) = found[0].values()
    assert described.error is None
    assert list(described.replicas) == [TopicPartition(topic, 1)]
    # on the wire, as Kafka answers: every topic of the dir, those not asked for empty
    body = build_describe_log_dirs(4, asked)
    (result,) = raw_request(broker.bootstrap, 4, body)["results"]
    named = {t["name"]: [p["partition_index"] for p in t["partitions"]] for t in result["topics"]}
    assert named[topic] == [1] and named[other] == [] and "nope" not in named


@pytest.mark.parametrize("version", range(5))
def test_every_version_answers_the_partitions(broker: Any, version: int) -> None:
    topic = topic_name()
    produce(broker.bootstrap, topic, 1, 3)
    body = build_describe_log_dirs(version, [TopicPartition(topic, 0)])
    dirs = read_describe_log_dirs(raw_request(broker.bootstrap, version, body))
    (described,) = dirs.values()
    assert described.replicas[TopicPartition(topic, 0)].size == size_on_disk(
        broker.data_dir, topic, 0
    )
    if version >= 4:
        assert described.total_bytes is not None and described.total_bytes > 0
    else:
        assert described.total_bytes is None and described.usable_bytes is None


def test_kafka_python_describe_log_dirs(broker: Any) -> None:
    topic = topic_name()
    produce(broker.bootstrap, topic, 2, 10)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        answers = client.describe_log_dirs()
    finally:
        client.close()
    (answer,) = answers
    assert answer["broker"] == 0
    (result,) = answer["log_dirs"]
    assert result["error_code"] == 0
    assert result["log_dir"] == str(broker.data_dir.resolve())
    assert 0 < result["usable_bytes"] <= result["total_bytes"]
    sizes = {
        (t["name"], p["partition_index"]): (p["partition_size"], p["offset_lag"])
        for t in result["topics"]
        for p in t["partitions"]
    }
    for p in range(2):
        assert sizes[(topic, p)] == (size_on_disk(broker.data_dir, topic, p), 0)


def test_a_vanished_log_dir_answers_kafka_storage_error(
    broker_factory: Any, tmp_path: Path
) -> None:
    first, spare = tmp_path / "first", tmp_path / "spare"
    running = broker_factory(log_dirs=f"{first},{spare}")
    moved = tmp_path / "moved"
    spare.rename(moved)  # the dir is gone from under the broker
    try:
        with logbus.Admin({"bootstrap.servers": running.bootstrap}) as admin:
            found = admin.describe_log_dirs()[0]
    finally:
        moved.rename(spare)
    assert list(found) == [str(first.resolve()), str(spare.resolve())]
    assert found[str(first.resolve())].error is None
    gone = found[str(spare.resolve())]
    assert isinstance(gone.error, KafkaError)
    assert gone.error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert gone.replicas == {} and gone.total_bytes is None


@pytest.mark.parametrize("version", [2, 4])
def test_refused_without_describe_on_the_cluster(broker_factory: Any, version: int) -> None:
    running = broker_factory(**SECURED)
    assign_principals(running)
    topic = topic_name()
    with logbus.Admin({"bootstrap.servers": running.bootstrap, "client.id": ADMIN}) as admin:
        admin.create_topics([logbus.NewTopic(topic, 1)])
    body = build_describe_log_dirs(version)
    refused = call(running.bootstrap, ALICE, ApiKey.DESCRIBE_LOG_DIRS, body, version)
    assert refused["results"] == []
    if version >= 3:
        assert refused["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaError) as raised:
        read_describe_log_dirs(refused)
    assert raised.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    as_alice = {"bootstrap.servers": running.bootstrap, "client.id": ALICE}
    with logbus.Admin(as_alice) as admin, pytest.raises(AdminBatchError) as batch:
        admin.describe_log_dirs(timeout_ms=5000)
    assert batch.value.errors[0].code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(running.bootstrap, acl(R.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    allowed = call(running.bootstrap, ALICE, ApiKey.DESCRIBE_LOG_DIRS, body, version)
    (described,) = read_describe_log_dirs(allowed).values()
    assert TopicPartition(topic, 0) in described.replicas
