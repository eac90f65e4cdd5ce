"""The REST proxy's v3 API over plain HTTP against a real broker: the cluster, brokers,
topics, partitions and replicas; topic, broker and cluster-wide configs; consumer groups,
members and lag; producing records (streamed: one answer per record as it arrives, read
back by confluent-kafka's consumer and AvroDeserializer); ACLs; and bad input answered
with Confluent's status codes and error bodies, changing nothing (checked with logbus's
Admin client, not through the proxy)."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from proxy_fixtures import (  # noqa: F401  (the proxy's fixtures)
    ProxyServer,
    create_topic,
    error_of,
    proxy_factory_fixture,
)
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    registry_factory_fixture,
    sr_clients_fixture,
)

from brokers import RunningBroker
from kafka_wire import wait_for
from logbus import Admin
from logbus.client.admin import ConfigResource, ResourceType
from logbus.client.types import TopicPartition
from logbus.protocol.acl_types import AclBindingFilter

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.fixture(name="proxy")
def proxy_fixture(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer]
) -> ProxyServer:
    return proxy_factory(fast_broker.bootstrap)


@pytest.fixture(name="http")
def http_fixture(proxy: ProxyServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.url, timeout=60) as client:
        yield client


@pytest.fixture(name="cluster")
def cluster_fixture(http: httpx.Client) -> str:
    """The `/v3/clusters/{id}` prefix of the proxy's cluster."""
    return f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def post(http: httpx.Client, path: str, body: Any) -> httpx.Response:
    return http.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


def produce(http: httpx.Client, path: str, *records: Any) -> list[dict[str, Any]]:
    """Send `records` in one streamed body; the answers, one per record."""
    body = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records)
    response = http.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def admin_of(broker: RunningBroker) -> Admin:
    return Admin({"bootstrap.servers": broker.bootstrap})


def read_back(bootstrap: str, topic: str, count: int) -> list[Any]:
    """`count` records of `topic` as confluent-kafka's consumer reads them."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    found: list[Any] = []
    try:
        def more() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.append(message)
            return len(found) >= count

        wait_for(more, 60, interval=0.0, what=f"{count} records of {topic}")
    finally:
        consumer.close()
    return sorted(found, key=lambda m: (m.partition(), m.offset()))


# -- the cluster, brokers and topics ------------------------------------------------------


def test_the_cluster_and_its_brokers(
    fast_broker: RunningBroker, proxy: ProxyServer, http: httpx.Client
) -> None:
    with admin_of(fast_broker) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    listed = http.get("/v3/clusters")
    assert listed.status_code == 200 and listed.headers["content-type"] == "application/json"
    body = listed.json()
    assert body["kind"] == "KafkaClusterList"
    assert body["metadata"]["self"] == f"{proxy.url}/v3/clusters"
    (cluster,) = body["data"]
    base = f"{proxy.url}/v3/clusters/{cluster_id}"
    assert cluster["kind"] == "KafkaCluster" and cluster["cluster_id"] == cluster_id
    assert cluster["metadata"] == {"self": base, "resource_name": f"crn:///kafka={cluster_id}"}
    assert cluster["controller"] == {"related": f"{base}/brokers/0"}
    assert cluster["topics"] == {"related": f"{base}/topics"}
    assert http.get(f"/v3/clusters/{cluster_id}").json() == cluster

    brokers = http.get(f"/v3/clusters/{cluster_id}/brokers").json()
    assert brokers["kind"] == "KafkaBrokerList"
    (broker,) = brokers["data"]
    assert (broker["broker_id"], broker["host"], broker["port"]) == (
        0, "127.0.0.1", fast_broker.port,
    )
    assert broker["configs"] == {"related": f"{base}/brokers/0/configs"}
    assert http.get(f"/v3/clusters/{cluster_id}/brokers/0").json() == broker
    assert error_of(http.get(f"/v3/clusters/{cluster_id}/brokers/7")) == (404, 404)
    for path in ("", "/brokers", "/topics", "/consumer-groups", "/acls", "/broker-configs"):
        assert error_of(http.get(f"/v3/clusters/no-such-cluster{path}")) == (404, 404)


def test_create_describe_grow_and_delete_a_topic(
    fast_broker: RunningBroker, http: httpx.Client, cluster: str
) -> None:
    created = post(http, f"{cluster}/topics", {
        "topic_name": "orders", "partitions_count": 3, "replication_factor": 1,
        "configs": [{"name": "cleanup.policy", "value": "compact"}],
    })
    assert created.status_code == 201, created.text
    topic = created.json()
    assert created.headers["location"] == topic["metadata"]["self"]
    assert topic["metadata"]["self"].endswith(f"{cluster}/topics/orders")
    assert (topic["kind"], topic["topic_name"], topic["partitions_count"],
            topic["replication_factor"], topic["is_internal"]) == (
        "KafkaTopic", "orders", 3, 1, False,
    )
    with admin_of(fast_broker) as admin:
        assert len(admin.describe_topics(["orders"])["orders"].partitions) == 3
        configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
        assert next(iter(configs.values()))["cleanup.policy"].value == "compact"

    assert http.get(f"{cluster}/topics/orders").json() == topic
    listed = http.get(f"{cluster}/topics").json()
    assert listed["kind"] == "KafkaTopicList"
    assert [t["topic_name"] for t in listed["data"]] == ["orders"]

    partitions = http.get(f"{cluster}/topics/orders/partitions").json()
    assert [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    partition = http.get(f"{cluster}/topics/orders/partitions/1").json()
    assert partition == partitions["data"][1]
    assert partition["leader"]["related"].endswith("/topics/orders/partitions/1/replicas/0")
    replicas = http.get(f"{cluster}/topics/orders/partitions/1/replicas").json()
    (replica,) = replicas["data"]
    assert (replica["broker_id"], replica["is_leader"], replica["is_in_sync"]) == (0, True, True)
    assert http.get(f"{cluster}/topics/orders/partitions/1/replicas/0").json() == replica
    assert error_of(http.get(f"{cluster}/topics/orders/partitions/3")) == (404, 40403)
    held = http.get(f"{cluster}/brokers/0/partition-replicas").json()
    assert [(r["topic_name"], r["partition_id"]) for r in held["data"]] == [
        ("orders", 0), ("orders", 1), ("orders", 2),
    ]
    # no reassignment is in progress
    for path in ("/topics/-/partitions/-/reassignment", "/topics/orders/partitions/-/reassignment"):
        listed = http.get(cluster + path).json()
        assert (listed["kind"], listed["data"]) == ("KafkaReassignmentList", [])
    assert error_of(http.get(f"{cluster}/topics/orders/partitions/1/reassignment")) == (404, 404)
    assert error_of(http.get(f"{cluster}/topics/orders/partitions/1/replicas/5")) == (404, 404)

    grown = http.patch(f"{cluster}/topics/orders", content=json.dumps({"partitions_count": 5}),
                       headers={"Content-Type": "application/json"})
    assert grown.status_code == 200 and grown.json()["partitions_count"] == 5

    # a dry run answers 200 and creates nothing
    dry = post(http, f"{cluster}/topics", {"topic_name": "dry", "partitions_count": 2,
                                           "validate_only": True})
    assert dry.status_code == 200 and dry.json()["partitions_count"] == 2

    assert http.delete(f"{cluster}/topics/orders").status_code == 204
    with admin_of(fast_broker) as admin:
        wait_for(lambda: "orders" not in admin.list_topics(), 30, what="orders deleted")
        assert "dry" not in admin.list_topics()
    assert error_of(http.get(f"{cluster}/topics/orders")) == (404, 40403)
    assert error_of(http.delete(f"{cluster}/topics/orders")) == (404, 40403)


# -- configs -------------------------------------------------------------------------------


def test_topic_configs(fast_broker: RunningBroker, http: httpx.Client, cluster: str) -> None:
    create_topic(fast_broker.bootstrap, "settings")
    base = f"{cluster}/topics/settings/configs"
    listed = http.get(base).json()
    assert listed["kind"] == "KafkaTopicConfigList"
    by_name = {c["name"]: c for c in listed["data"]}
    retention = by_name["retention.ms"]
    assert (retention["kind"], retention["topic_name"], retention["is_default"],
            retention["source"]) == ("KafkaTopicConfig", "settings", True, "DEFAULT_CONFIG")
    assert retention["metadata"]["self"].endswith(f"{base}/retention.ms")
    assert http.get(f"{base}/retention.ms").json() == retention

    def value(name: str) -> tuple[str | None, str]:
        with admin_of(fast_broker) as admin:
            resource = ConfigResource(ResourceType.TOPIC, "settings")
            entry = admin.describe_configs([resource])[resource][name]
        return entry.value, entry.source.name

    put = http.put(f"{base}/retention.ms", content=json.dumps({"value": "60000"}),
                   headers={"Content-Type": "application/json"})
    assert put.status_code == 204, put.text
    assert value("retention.ms") == ("60000", "DYNAMIC_TOPIC_CONFIG")
    shown = http.get(f"{base}/retention.ms").json()
    assert (shown["value"], shown["source"], shown["is_default"]) == (
        "60000", "DYNAMIC_TOPIC_CONFIG", False,
    )
    assert http.delete(f"{base}/retention.ms").status_code == 204
    assert value("retention.ms")[1] == "DEFAULT_CONFIG"

    altered = post(http, f"{base}:alter", {"data": [
        {"name": "cleanup.policy", "value": "compact"},
        {"name": "segment.ms", "value": "100000", "operation": "SET"},
    ]})
    assert altered.status_code == 204, altered.text
    assert value("cleanup.policy") == ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert value("segment.ms") == ("100000", "DYNAMIC_TOPIC_CONFIG")
    post(http, f"{base}:alter", {"data": [{"name": "cleanup.policy", "operation": "DELETE"}]})
    assert value("cleanup.policy")[1] == "DEFAULT_CONFIG"

    every = http.get(f"{cluster}/topics/-/configs").json()
    assert {c["topic_name"] for c in every["data"]} == {"settings"}
    assert error_of(http.get(f"{base}/no.such.config")) == (404, 404)
    assert error_of(http.get(f"{cluster}/topics/nothing/configs")) == (404, 40403)
    bad_value = http.put(f"{base}/retention.ms", content=json.dumps({"value": "soon"}),
                         headers={"Content-Type": "application/json"})
    assert error_of(bad_value) == (400, 40002)
    assert value("segment.ms") == ("100000", "DYNAMIC_TOPIC_CONFIG")


def test_broker_and_cluster_wide_configs(
    fast_broker: RunningBroker, http: httpx.Client, cluster: str
) -> None:
    listed = http.get(f"{cluster}/brokers/0/configs").json()
    assert listed["kind"] == "KafkaBrokerConfigList"
    entry = {c["name"]: c for c in listed["data"]}["log.retention.ms"]
    assert entry["broker_id"] == 0 and entry["kind"] == "KafkaBrokerConfig"
    put = http.put(f"{cluster}/brokers/0/configs/log.retention.ms",
                   content=json.dumps({"value": "5000"}),
                   headers={"Content-Type": "application/json"})
    assert put.status_code == 204, put.text
    shown = http.get(f"{cluster}/brokers/0/configs/log.retention.ms").json()
    assert (shown["value"], shown["source"]) == ("5000", "DYNAMIC_BROKER_CONFIG")
    assert {c["broker_id"] for c in http.get(f"{cluster}/brokers/-/configs").json()["data"]} == {0}

    assert http.get(f"{cluster}/broker-configs").json()["data"] == []
    put = http.put(f"{cluster}/broker-configs/log.retention.minutes",
                   content=json.dumps({"value": "30"}),
                   headers={"Content-Type": "application/json"})
    assert put.status_code == 204, put.text
    (default,) = http.get(f"{cluster}/broker-configs").json()["data"]
    assert (default["kind"], default["name"], default["value"], default["config_type"],
            default["source"]) == (
        "KafkaClusterConfig", "log.retention.minutes", "30", "BROKER",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    assert http.delete(f"{cluster}/broker-configs/log.retention.minutes").status_code == 204
    assert http.get(f"{cluster}/broker-configs").json()["data"] == []
    refused = http.put(f"{cluster}/brokers/0/configs/broker.id", content=json.dumps({"value": "7"}),
                       headers={"Content-Type": "application/json"})
    assert error_of(refused) == (400, 40002)


# -- producing ----------------------------------------------------------------------------


def test_produce_records_one_answer_each(
    fast_broker: RunningBroker, http: httpx.Client, cluster: str
) -> None:
    create_topic(fast_broker.bootstrap, "events", 2)
    path = f"{cluster}/topics/events/records"
    answers = produce(
        http, path,
        {"partition_id": 1, "key": {"type": "STRING", "data": "k1"},
         "value": {"type": "JSON", "data": {"n": 1}},
         "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
         "timestamp": "2021-02-05T19:14:42.000Z"},
        {"partition_id": 1, "value": {"type": "BINARY", "data": 1}},  # not base64: refused
        {"partition_id": 1,
         "value": {"type": "BINARY", "data": base64.b64encode(b"\0\1").decode()}},
        {"partition_id": 1, "key": {"type": "JSON", "data": None},
         "value": {"type": "STRING", "data": "plain"}},
    )
    assert len(answers) == 4
    first, bad, third, fourth = answers
    assert first == {
        "error_code": 200, "cluster_id": cluster.rsplit("/", 1)[1], "topic_name": "events",
        "partition_id": 1, "offset": 0, "timestamp": "2021-02-05T19:14:42.000Z",
        "key": {"type": "STRING", "size": 2}, "value": {"type": "JSON", "size": 7},
    }
    assert bad == {"error_code": 400, "message": "Bad Request: data=1 is not a base64 string."}
    assert (third["offset"], third["value"]) == (1, {"type": "BINARY", "size": 2})
    assert (fourth["offset"], fourth["key"]) == (2, {"type": "JSON", "size": 0})

    got = read_back(fast_broker.bootstrap, "events", 3)
    assert [(m.key(), m.value()) for m in got] == [
        (b"k1", b'{"n":1}'), (None, b"\0\1"), (None, b"plain"),
    ]
    assert got[0].headers() == [("h", b"hv")]
    assert got[0].timestamp()[1] == 1612552482000
    # a record without a timestamp gets the producer's clock, and the answer says which
    stored = datetime.fromtimestamp(got[1].timestamp()[1] / 1000, UTC)
    assert datetime.fromisoformat(third["timestamp"]) == stored

    offsets = http.get(f"{cluster}/topics/events/partitions/1/offset").json()
    assert (offsets["kind"], offsets["earliest_offset"], offsets["latest_offset"]) == (
        "KafkaPartitionWithOffsets", 0, 3,
    )

    # without a partition, the key chooses one (murmur2, as Kafka's producer)
    placed = produce(http, path, *({"key": {"type": "STRING", "data": "same"},
                                    "value": {"type": "STRING", "data": str(i)}}
                                   for i in range(5)))
    assert len({a["partition_id"] for a in placed}) == 1


def test_produce_a_batch(fast_broker: RunningBroker, http: httpx.Client, cluster: str) -> None:
    create_topic(fast_broker.bootstrap, "batched")
    path = f"{cluster}/topics/batched/records:batch"
    response = post(http, path, {"entries": [
        {"id": "a", "value": {"type": "STRING", "data": "first"}},
        {"id": "b", "value": {"type": "BINARY", "data": "not base64!"}},
        {"id": "c", "key": {"type": "JSON", "data": [1]}, "value": {"type": "STRING",
                                                                    "data": "third"}},
    ]})
    assert response.status_code == 207, response.text
    body = response.json()
    assert [(s["id"], s["offset"], s["partition_id"]) for s in body["successes"]] == [
        ("a", 0, 0), ("c", 1, 0),
    ]
    assert body["successes"][1]["key"] == {"type": "JSON", "size": 3}
    assert body["failures"] == [{"id": "b", "error_code": 400, "message":
                                 'Bad Request: data="not base64!" is not a valid base64 string.'}]
    got = read_back(fast_broker.bootstrap, "batched", 2)
    assert [(m.key(), m.value()) for m in got] == [(None, b"first"), (b"[1]", b"third")]

    one = {"id": "x", "value": {"type": "STRING", "data": "x"}}
    for bad in ({"entries": []}, {"entries": [one, one]}, {"entries": [{**one, "id": 7}]},
                {"entries": [{**one, "id": str(i)} for i in range(11)]}, {"records": []}):
        assert error_of(post(http, path, bad)) == (422, 42208)
    with admin_of(fast_broker) as admin:
        end = admin.list_offsets({TopicPartition("batched", 0): "latest"})
    assert next(iter(end.values())).offset == 2


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_a_streamed_produce_answers_each_record_before_the_next_is_sent(
    fast_broker: RunningBroker, proxy: ProxyServer, cluster: str
) -> None:
    """Confluent's streaming mode: one connection, a chunked body; the answer to each
    record arrives while the request is still open."""
    create_topic(fast_broker.bootstrap, "stream")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
        sock.sendall(
            f"POST {cluster}/topics/stream/records HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        received = b""
        for i in range(3):
            record = json.dumps({"value": {"type": "JSON", "data": i}}).encode()
            sock.sendall(_chunk(record))
            while received.count(b'"error_code"') <= i:
                data = sock.recv(65536)
                assert data, "the proxy closed the connection"
                received += data
            # the open stream holds nothing else up
            assert httpx.get(f"{proxy.url}/v3/clusters", timeout=30).status_code == 200
        sock.sendall(b"0\r\n\r\n")
        while not received.endswith(b"0\r\n\r\n"):
            data = sock.recv(65536)
            if not data:
                break
            received += data
    assert received.startswith(b"HTTP/1.1 200")
    offsets = [json.loads(line)["offset"] for line in received.split(b"\n")
               if line.startswith(b'{"error_code"')]
    assert offsets == [0, 1, 2]


def test_a_client_that_goes_away_mid_record_stores_nothing_of_it(
    fast_broker: RunningBroker, proxy: ProxyServer, http: httpx.Client, cluster: str
) -> None:
    create_topic(fast_broker.bootstrap, "cut")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as sock:
        sock.sendall(
            f"POST {cluster}/topics/cut/records HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        sock.sendall(_chunk(b'{"value": {"type": "STRING", "data": "never fin'))
    # the proxy goes on serving, and the cut record was not produced
    answers = produce(http, f"{cluster}/topics/cut/records",
                      {"value": {"type": "STRING", "data": "whole"}})
    assert answers[0]["offset"] == 0
    got = read_back(fast_broker.bootstrap, "cut", 1)
    assert [m.value() for m in got] == [b"whole"]


def test_produce_avro_through_the_registry(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer], sr_clients: Any,
    registry_factory: Callable[..., Any],
) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = registry_factory(fast_broker.bootstrap)
    proxy = proxy_factory(fast_broker.bootstrap, schema_registry_url=registry.url)
    create_topic(fast_broker.bootstrap, "people")
    schema = json.dumps({"type": "record", "name": "Person",
                         "fields": [{"name": "name", "type": "string"}]})
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        path = f"/v3/clusters/{cluster_id}/topics/people/records"
        registered = produce(http, path, {"value": {"type": "AVRO", "schema": schema,
                                                    "data": {"name": "ada"}}})[0]
        schema_id = sr_clients(registry).get_latest_version("people-value").schema_id
        assert registered["value"] == {"type": "AVRO", "subject": "people-value",
                                       "schema_id": schema_id, "schema_version": 1, "size": 9}
        by_id, latest, bad = produce(
            http, path,
            {"value": {"schema_id": schema_id, "data": {"name": "alan"}}},
            {"value": {"data": {"name": "grace"}}},  # the subject's latest version
            {"value": {"data": {"age": 3}}},  # does not fit the schema
        )
        assert (by_id["error_code"], latest["error_code"]) == (200, 200)
        assert latest["value"]["schema_version"] == 1
        assert bad["error_code"] == 42203
        missing = produce(http, path, {"value": {"schema_version": 9, "data": {"name": "x"}}})
        assert missing[0]["error_code"] == 40403
    deserializer = AvroDeserializer(sr_clients(registry))
    context = SerializationContext("people", MessageField.VALUE)
    got = read_back(fast_broker.bootstrap, "people", 3)
    assert [deserializer(m.value(), context) for m in got] == [
        {"name": "ada"}, {"name": "alan"}, {"name": "grace"},
    ]


def ping_descriptor() -> Any:
    """A FileDescriptorProto of `message Ping { string who = 1; int64 at = 2; }` in
    package `ex`, built with protobuf's own classes (no protoc here)."""
    from google.protobuf import descriptor_pb2

    field = descriptor_pb2.FieldDescriptorProto
    file_proto = descriptor_pb2.FileDescriptorProto(name="ping.proto", package="ex",
                                                    syntax="proto3")
    file_proto.message_type.add(name="Ping", field=[
        field(name="who", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL),
        field(name="at", number=2, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL),
    ])
    return file_proto


def test_produce_protobuf_through_the_registry(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer], sr_clients: Any,
    registry_factory: Callable[..., Any],
) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pool, message_factory

    registry = registry_factory(fast_broker.bootstrap)
    proxy = proxy_factory(fast_broker.bootstrap, schema_registry_url=registry.url)
    create_topic(fast_broker.bootstrap, "pings")
    file_proto = ping_descriptor()
    text = base64.b64encode(file_proto.SerializeToString()).decode()
    schema_id = sr_clients(registry).register_schema("pings-value", Schema(text, "PROTOBUF"))
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        cluster_id = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        path = f"/v3/clusters/{cluster_id}/topics/pings/records"
        by_id, latest, typed, bad = produce(
            http, path,
            {"value": {"schema_id": schema_id, "data": {"who": "ada", "at": "36"}}},
            {"value": {"data": {"who": "alan"}}},  # the subject's latest version
            {"value": {"type": "PROTOBUF", "data": {"at": 7}}},
            {"value": {"schema_id": schema_id, "data": {"nobody": 1}}},  # no such field
        )
        assert [r["error_code"] for r in (by_id, latest, typed)] == [200, 200, 200]
        assert latest["value"]["type"] == "PROTOBUF"
        assert latest["value"]["schema_id"] == schema_id
        assert bad["error_code"] == 42203
        as_text = produce(http, path, {"value": {"type": "PROTOBUF", "data": {},
                                                  "schema": "message P { int32 a = 1; }"}})
        assert as_text[0]["error_code"] == 42205  # .proto text: not encoded here
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    ping = message_factory.GetMessageClass(pool.FindMessageTypeByName("ex.Ping"))
    # with the registry: it resolves each record's schema id and message index too
    deserializer = ProtobufDeserializer(
        ping, {"use.deprecated.format": False}, sr_clients(registry)
    )
    context = SerializationContext("pings", MessageField.VALUE)
    got = [deserializer(m.value(), context) for m in read_back(fast_broker.bootstrap, "pings", 3)]
    assert [(m.who, m.at) for m in got] == [("ada", 36), ("alan", 0), ("", 7)]


# -- consumer groups ----------------------------------------------------------------------


def test_consumer_groups_members_and_lag(
    fast_broker: RunningBroker, http: httpx.Client, cluster: str
) -> None:
    from confluent_kafka import Consumer

    create_topic(fast_broker.bootstrap, "work", 2)
    path = f"{cluster}/topics/work/records"
    produce(http, path, *({"partition_id": i % 2, "value": {"type": "STRING", "data": str(i)}}
                          for i in range(10)))
    with admin_of(fast_broker) as admin:
        # an idle group that committed 2 of partition 0's 5 records and none of partition 1
        admin.alter_consumer_group_offsets("idle", {TopicPartition("work", 0): 2,
                                                    TopicPartition("work", 1): 5})
    consumer = Consumer({"bootstrap.servers": fast_broker.bootstrap, "group.id": "live",
                         "client.id": "worker-1", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["work"])
        wait_for(lambda: consumer.poll(0.2) is not None and bool(consumer.assignment()), 60,
                 interval=0.0, what="the live consumer's assignment")
        groups = http.get(f"{cluster}/consumer-groups").json()
        assert groups["kind"] == "KafkaConsumerGroupList"
        assert [g["consumer_group_id"] for g in groups["data"]] == ["idle", "live"]

        def live_group() -> dict[str, Any]:
            found: dict[str, Any] = http.get(f"{cluster}/consumer-groups/live").json()
            return found

        wait_for(lambda: live_group()["state"] == "STABLE", 30, what="a stable group")
        live = live_group()
        assert (live["kind"], live["is_simple"], live["type"], live["partition_assignor"]) == (
            "KafkaConsumerGroup", False, "CLASSIC", "range",
        )
        assert live["coordinator"]["related"].endswith(f"{cluster}/brokers/0")
        (member,) = http.get(f"{cluster}/consumer-groups/live/consumers").json()["data"]
        assert member["client_id"] == "worker-1" and member["kind"] == "KafkaConsumer"
        member_path = f"{cluster}/consumer-groups/live/consumers/{member['consumer_id']}"
        assert http.get(member_path).json() == member
        assigned = http.get(f"{member_path}/assignments").json()["data"]
        assert [(a["topic_name"], a["partition_id"]) for a in assigned] == [
            ("work", 0), ("work", 1),
        ]
        assert http.get(f"{member_path}/assignments/work/partitions/1").json() == assigned[1]
        assert error_of(http.get(f"{cluster}/consumer-groups/live/consumers/nobody")) == (404, 404)
    finally:
        consumer.close()

    # __consumer_offsets exists now, and is not listed (as Kafka's listTopics leaves it out)
    assert [t["topic_name"] for t in http.get(f"{cluster}/topics").json()["data"]] == ["work"]
    idle = http.get(f"{cluster}/consumer-groups/idle").json()
    assert (idle["state"], idle["is_simple"]) == ("EMPTY", True)
    lags = http.get(f"{cluster}/consumer-groups/idle/lags").json()
    assert lags["kind"] == "KafkaConsumerLagList"
    assert [(x["partition_id"], x["current_offset"], x["log_end_offset"], x["lag"],
             x["consumer_id"]) for x in lags["data"]] == [(0, 2, 5, 3, ""), (1, 5, 5, 0, "")]
    one = http.get(f"{cluster}/consumer-groups/idle/lags/work/partitions/0").json()
    assert one == lags["data"][0]
    summary = http.get(f"{cluster}/consumer-groups/idle/lag-summary").json()
    assert (summary["kind"], summary["max_lag"], summary["total_lag"],
            summary["max_lag_topic_name"], summary["max_lag_partition_id"]) == (
        "KafkaConsumerGroupLagSummary", 3, 3, "work", 0,
    )
    assert summary["max_lag_partition"]["related"].endswith(f"{cluster}/topics/work/partitions/0")
    assert error_of(http.get(f"{cluster}/consumer-groups/nothing")) == (404, 404)
    assert error_of(http.get(f"{cluster}/consumer-groups/nothing/lags")) == (404, 404)


# -- ACLs ---------------------------------------------------------------------------------


ACL = {"resource_type": "TOPIC", "resource_name": "orders-", "pattern_type": "PREFIXED",
       "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}


def test_acls_create_search_and_delete(
    broker_factory: Callable[..., RunningBroker], proxy_factory: Callable[..., ProxyServer]
) -> None:
    # the proxy connects as User:ANONYMOUS, made a super user to manage ACLs
    broker = broker_factory(authorizer_class_name=AUTHORIZER, super_users="User:ANONYMOUS")
    proxy = proxy_factory(broker.bootstrap)
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        cluster = f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"
        created = post(http, f"{cluster}/acls", ACL)
        assert created.status_code == 201, created.text
        assert "resource_type=TOPIC" in created.headers["location"]
        batch = post(http, f"{cluster}/acls:batch", {"data": [
            {**ACL, "resource_type": "GROUP", "resource_name": "g", "pattern_type": "LITERAL"},
            {**ACL, "principal": "User:bob", "operation": "WRITE"},
        ]})
        assert batch.status_code == 201, batch.text
        with admin_of(broker) as admin:
            assert len(admin.describe_acls(AclBindingFilter())) == 3

        found = http.get(f"{cluster}/acls", params={"principal": "User:alice"}).json()
        assert found["kind"] == "KafkaAclList"
        assert [(a["resource_type"], a["resource_name"]) for a in found["data"]] == [
            ("GROUP", "g"), ("TOPIC", "orders-"),
        ]
        topic_acl = found["data"][1]
        assert {k: topic_acl[k] for k in ACL} == ACL
        assert topic_acl["kind"] == "KafkaAcl"
        matching = http.get(f"{cluster}/acls", params={
            "resource_type": "topic", "resource_name": "orders-1", "pattern_type": "match",
        }).json()["data"]
        assert sorted(a["principal"] for a in matching) == ["User:alice", "User:bob"]

        deleted = http.delete(f"{cluster}/acls", params={
            "resource_type": "TOPIC", "pattern_type": "ANY", "operation": "ANY",
            "permission": "ALLOW", "principal": "User:bob",
        })
        assert deleted.status_code == 200, deleted.text
        assert [a["principal"] for a in deleted.json()["data"]] == ["User:bob"]

        # bad input: refused, nothing changed
        assert error_of(http.delete(f"{cluster}/acls")) == (400, 400)
        assert error_of(post(http, f"{cluster}/acls", {**ACL, "operation": "ANY"})) == (400, 400)
        assert error_of(post(http, f"{cluster}/acls", {**ACL, "operation": "FLY"})) == (400, 400)
        missing = {k: v for k, v in ACL.items() if k != "principal"}
        assert error_of(post(http, f"{cluster}/acls", missing)) == (422, 42206)
        assert error_of(http.get(f"{cluster}/acls", params={"permission": "unknown"})) == (
            400, 400,
        )
        with admin_of(broker) as admin:
            assert len(admin.describe_acls(AclBindingFilter())) == 2


def test_acls_without_an_authorizer(http: httpx.Client, cluster: str) -> None:
    assert error_of(post(http, f"{cluster}/acls", ACL)) == (400, 40002)


# -- bad input ----------------------------------------------------------------------------

BAD: list[tuple[str, str, str, Any, int, int]] = [
    # (method, path under the cluster, content type, body, status, error_code)
    ("POST", "/topics", "application/json", "{not json", 400, 400),
    ("POST", "/topics", "text/plain", {"topic_name": "t1"}, 415, 415),
    ("POST", "/topics", "application/json", "", 422, 42206),
    ("POST", "/topics", "application/json", [1, 2], 400, 400),
    ("POST", "/topics", "application/json", {"topic_name": "bad name!"}, 422, 42206),
    ("POST", "/topics", "application/json", {"topic_name": "kept"}, 400, 40002),
    ("POST", "/topics", "application/json",
     {"topic_name": "t2", "replication_factor": 3}, 400, 40002),
    ("PATCH", "/topics/kept", "application/json", {"partitions_count": 1}, 400, 40002),
    ("DELETE", "/topics/unknown", "application/json", None, 404, 40403),
    ("POST", "/topics/unknown/records", "application/json", {"value": {"data": 1}}, 404, 40403),
    ("POST", "/topics/kept/records", "text/plain", {"value": {"data": 1}}, 415, 415),
    ("POST", "/topics/kept/records", "application/json", "", 422, 42206),
    ("POST", "/topics/kept/records:batch", "application/xml", {"entries": []}, 415, 415),
    ("PUT", "/topics/kept/configs/retention.ms", "application/json", "{", 400, 400),
    ("PUT", "/topics/kept/configs/retention.ms", "text/xml", {"value": "1"}, 415, 415),
    ("POST", "/topics/kept/configs:alter", "application/json", {"data": []}, 422, 42206),
    ("POST", "/topics/kept/configs:alter", "application/json",
     {"data": [{"name": "retention.ms", "value": "1"}, {"name": "nope", "value": "1"}]},
     400, 40002),
    ("GET", "/consumer-groups/unknown/lag-summary", "application/json", None, 404, 404),
]


@pytest.mark.parametrize(
    ("method", "path", "content_type", "body", "status", "code"), BAD,
    ids=[f"{m} {p} {t} -> {c}" for m, p, t, _, _, c in BAD],
)
def test_bad_requests_change_nothing(
    fast_broker: RunningBroker, http: httpx.Client, cluster: str, method: str, path: str,
    content_type: str, body: Any, status: int, code: int,
) -> None:
    create_topic(fast_broker.bootstrap, "kept", 2)
    content = body if isinstance(body, str) or body is None else json.dumps(body)
    response = http.request(method, cluster + path, content=content,
                            headers={"Content-Type": content_type})
    assert error_of(response) == (status, code)
    with admin_of(fast_broker) as admin:
        assert admin.list_topics() == ["kept"]
        assert len(admin.describe_topics(["kept"])["kept"].partitions) == 2
        end = admin.list_offsets({TopicPartition("kept", p): "latest" for p in (0, 1)})
        assert [o.offset for o in end.values()] == [0, 0]
        resource = ConfigResource(ResourceType.TOPIC, "kept")
        assert admin.describe_configs([resource])[resource]["retention.ms"].is_default


def test_unknown_paths_and_methods(http: httpx.Client, cluster: str) -> None:
    assert error_of(http.get(f"{cluster}/no-such-resource")) == (404, 404)
    assert error_of(http.put(f"{cluster}/topics")) == (405, 405)
    response = http.get("/v3/clusters/none/topics")
    assert response.headers["content-type"] == "application/json"
