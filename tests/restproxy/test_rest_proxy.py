"""The REST proxy's v2 API over plain HTTP against a real broker: topics, partitions and
brokers metadata; produce in the binary, JSON and Avro embedded formats (Avro through the
schema registry, read back by confluent-kafka's AvroDeserializer); consumer instances
(subscribe or assign, records, seek, commit and committed offsets, delete, expiry); bad
input answered with Confluent's status codes and error bodies."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from proxy_fixtures import (  # noqa: F401  (the proxy's fixtures)
    V2,
    ProxyServer,
    create_topic,
    embedded,
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
from logbus.client.types import TopicPartition


@pytest.fixture(name="proxy")
def proxy_fixture(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer]
) -> ProxyServer:
    return proxy_factory(fast_broker.bootstrap)


@pytest.fixture(name="http")
def http_fixture(proxy: ProxyServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.url, timeout=60) as client:
        yield client


def post(http: httpx.Client, path: str, body: Any, content_type: str = V2) -> httpx.Response:
    return http.post(path, content=json.dumps(body), headers={"Content-Type": content_type})


def read_records(
    http: httpx.Client, base: str, count: int, accept: str
) -> list[dict[str, Any]]:
    """Poll the instance's records until `count` have come."""
    found: list[dict[str, Any]] = []

    def more() -> bool:
        response = http.get(f"{base}/records?timeout=500", headers={"Accept": accept})
        assert response.status_code == 200, response.text
        found.extend(response.json())
        return len(found) >= count

    wait_for(more, 60, what=f"{count} records through the proxy")
    return found


def test_topic_partition_and_broker_metadata(
    fast_broker: RunningBroker, http: httpx.Client
) -> None:
    create_topic(fast_broker.bootstrap, "meta", 3)
    assert "meta" in http.get("/topics").json()
    topic = http.get("/topics/meta").json()
    assert topic["name"] == "meta" and "cleanup.policy" in topic["configs"]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert http.get("/topics/meta/partitions/1").json() == {
        "partition": 1, "leader": 0, "replicas": [{"broker": 0, "leader": True, "in_sync": True}],
    }
    assert len(http.get("/topics/meta/partitions").json()) == 3
    assert http.get("/brokers").json() == {"brokers": [0]}
    assert error_of(http.get("/topics/nothing-here")) == (404, 40401)
    assert error_of(http.get("/topics/meta/partitions/9")) == (404, 40402)


def test_json_produce_and_a_subscribed_consumer_instance(
    fast_broker: RunningBroker, http: httpx.Client
) -> None:
    create_topic(fast_broker.bootstrap, "orders", 2)
    records = [{"key": f"k{i}", "value": {"n": i, "item": "book"}} for i in range(6)]
    response = post(http, "/topics/orders", {"records": records}, embedded("json"))
    assert response.status_code == 200, response.text
    offsets = response.json()["offsets"]
    assert len(offsets) == 6 and all(o["error_code"] is None for o in offsets)
    assert {o["partition"] for o in offsets} <= {0, 1}

    created = post(http, "/consumers/g1", {"name": "c1", "format": "json",
                                           "auto.offset.reset": "earliest"})
    assert created.json()["instance_id"] == "c1"
    base = "/consumers/g1/instances/c1"
    assert created.json()["base_uri"].endswith(base)
    assert post(http, f"{base}/subscription", {"topics": ["orders"]}).status_code == 204
    assert http.get(f"{base}/subscription").json() == {"topics": ["orders"]}
    got = read_records(http, base, 6, embedded("json"))
    assert sorted(r["value"]["n"] for r in got) == list(range(6))
    assert {r["key"] for r in got} == {f"k{i}" for i in range(6)}

    assert post(http, f"{base}/offsets", {}).status_code == 200  # commit what was read
    partitions = [{"topic": "orders", "partition": p} for p in (0, 1)]
    committed = http.request(
        "GET", f"{base}/offsets", content=json.dumps({"partitions": partitions}),
        headers={"Content-Type": V2},
    ).json()["offsets"]
    by_partition = {o["partition"]: o["offset"] for o in committed}
    produced = {p: sum(1 for o in offsets if o["partition"] == p) for p in (0, 1)}
    assert {p: by_partition.get(p, 0) for p in (0, 1)} == produced

    assert http.delete(base).status_code == 204
    assert error_of(http.get(f"{base}/subscription")) == (404, 40403)


def test_binary_produce_to_a_partition_assign_and_seek(
    fast_broker: RunningBroker, http: httpx.Client
) -> None:
    create_topic(fast_broker.bootstrap, "raw", 2)
    payloads = [bytes([i]) * 10 for i in range(4)]
    body = {"records": [{"value": base64.b64encode(p).decode()} for p in payloads]}
    response = post(http, "/topics/raw/partitions/1", body, embedded("binary"))
    assert [o["partition"] for o in response.json()["offsets"]] == [1, 1, 1, 1]
    assert [o["offset"] for o in response.json()["offsets"]] == [0, 1, 2, 3]

    post(http, "/consumers/g2", {"name": "b", "format": "binary"})
    base = "/consumers/g2/instances/b"
    assert post(http, f"{base}/assignments",
                {"partitions": [{"topic": "raw", "partition": 1}]}).status_code == 204
    assert http.get(f"{base}/assignments").json() == {
        "partitions": [{"topic": "raw", "partition": 1}]
    }
    post(http, f"{base}/positions", {"offsets": [{"topic": "raw", "partition": 1, "offset": 2}]})
    got = read_records(http, base, 2, embedded("binary"))
    assert [base64.b64decode(r["value"]) for r in got] == payloads[2:]
    assert [r["key"] for r in got] == [None, None]
    post(http, f"{base}/positions/beginning", {"partitions": [{"topic": "raw", "partition": 1}]})
    again = read_records(http, base, 4, embedded("binary"))
    assert [r["offset"] for r in again] == [0, 1, 2, 3]


def test_json_values_are_written_compact_in_utf8_and_exact(
    fast_broker: RunningBroker, http: httpx.Client
) -> None:
    """As Confluent's proxy (Jackson) writes them: compact, non-ASCII as UTF-8, integers
    past 64 bits exact; a string with a lone surrogate keeps its escape."""
    create_topic(fast_broker.bootstrap, "utf8", 2)
    body = (
        '{"records": [{"value": {"name": "caf\\u00e9 \\u2615", "n": 1.5}, "partition": 1},'
        ' {"value": 123456789012345678901234567890, "key": [1, 2]},'
        ' {"value": "lone \\ud800 surrogate", "partition": 1},'
        ' {"value": "caf\\u00e9 \\"quoted\\"\\n"}]}'
    )
    response = http.post("/topics/utf8", content=body,
                         headers={"Content-Type": embedded("json")})
    assert response.status_code == 200, response.text
    offsets = response.json()["offsets"]
    assert [o["partition"] for o in offsets][::2] == [1, 1]
    assert all(o["error_code"] is None and isinstance(o["offset"], int) for o in offsets)

    post(http, "/consumers/g5", {"name": "b", "format": "binary",
                                 "auto.offset.reset": "earliest"})
    base = "/consumers/g5/instances/b"
    post(http, f"{base}/subscription", {"topics": ["utf8"]})
    got = read_records(http, base, 4, embedded("binary"))
    stored = {(base64.b64decode(r["key"]) if r["key"] else None, base64.b64decode(r["value"]))
              for r in got}
    assert stored == {
        (None, '{"name":"café ☕","n":1.5}'.encode()),
        (b"[1,2]", b"123456789012345678901234567890"),
        (None, b'"lone \\ud800 surrogate"'),
        (None, '"café \\"quoted\\"\\n"'.encode()),
    }


def test_a_record_too_large_gets_its_error_and_the_others_are_written(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer]
) -> None:
    """As Confluent's proxy answers it: the producer refuses that record only."""
    create_topic(fast_broker.bootstrap, "big")
    proxy = proxy_factory(fast_broker.bootstrap, producer_settings={"max.request.size": 10_000})
    records = [{"value": "a"}, {"value": "x" * 20_000}, {"value": "b"}]
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        for path, written in (("/topics/big", [0, 1]), ("/topics/big/partitions/0", [2, 3])):
            response = post(http, path, {"records": records}, embedded("json"))
            assert response.status_code == 200, response.text
            offsets = response.json()["offsets"]
            assert [o["offset"] for o in offsets] == [written[0], None, written[1]]
            assert [o["partition"] for o in offsets] == [0, None, 0]
            assert [o["error_code"] for o in offsets] == [None, 50002, None]
            assert "max.request.size" in offsets[1]["error"]
    with Admin({"bootstrap.servers": fast_broker.bootstrap}) as admin:
        ends = admin.list_offsets({TopicPartition("big", 0): "latest"})
    assert next(iter(ends.values())).offset == 4


def test_avro_produce_registers_the_schema_and_reads_back(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer], sr_clients: Any,
    registry_factory: Callable[..., Any],
) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = registry_factory(fast_broker.bootstrap)
    proxy = proxy_factory(fast_broker.bootstrap, schema_registry_url=registry.url)
    create_topic(fast_broker.bootstrap, "people")
    schema = json.dumps({"type": "record", "name": "Person",
                         "fields": [{"name": "name", "type": "string"},
                                    {"name": "age", "type": "int"}]})
    people = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        response = post(http, "/topics/people",
                        {"value_schema": schema, "records": [{"value": p} for p in people]},
                        embedded("avro"))
        assert response.status_code == 200, response.text
        schema_id = response.json()["value_schema_id"]
        assert schema_id == sr_clients(registry).get_latest_version("people-value").schema_id
        # by id, without the schema text
        by_id = post(http, "/topics/people",
                     {"value_schema_id": schema_id, "records": [{"value": people[0]}]},
                     embedded("avro"))
        assert by_id.json()["value_schema_id"] == schema_id

        post(http, "/consumers/g3", {"name": "a", "format": "avro",
                                     "auto.offset.reset": "earliest"})
        base = "/consumers/g3/instances/a"
        post(http, f"{base}/subscription", {"topics": ["people"]})
        got = read_records(http, base, 3, embedded("avro"))
        assert [r["value"] for r in got] == [*people, people[0]]
        # the bytes are Confluent's framing: confluent-kafka's deserializer reads them
        post(http, "/consumers/g4", {"name": "b", "format": "binary",
                                     "auto.offset.reset": "earliest"})
        post(http, "/consumers/g4/instances/b/subscription", {"topics": ["people"]})
        raw = read_records(http, "/consumers/g4/instances/b", 3, embedded("binary"))
    deserializer = AvroDeserializer(sr_clients(registry))
    context = SerializationContext("people", MessageField.VALUE)
    assert deserializer(base64.b64decode(raw[0]["value"]), context) == people[0]


BAD_PRODUCE: list[tuple[str, Any, str, int, int]] = [
    # (path, body, content type, status, error_code)
    ("/topics/bad", {"records": [{"value": 1}]}, "text/plain", 415, 415),
    ("/topics/bad", "{not json", embedded("json"), 400, 400),
    ("/topics/bad", '{"records": [{"value": NaN}]}', embedded("json"), 400, 400),
    ("/topics/bad", {"nothing": []}, embedded("json"), 422, 422),
    ("/topics/bad", {"records": [{"value": "***"}]}, embedded("binary"), 422, 42203),
    ("/topics/bad", {"records": [{"value": {"a": 1}}]}, embedded("avro"), 422, 42202),
    ("/topics/bad", {"records": [{"key": "k", "value": 1}], "value_schema": '"int"'},
     embedded("avro"), 422, 42201),
    ("/topics/bad", {"records": [{"value": 1, "partition": 5}]}, embedded("json"), 404, 40402),
    ("/topics/missing-topic", {"records": [{"value": 1}]}, embedded("json"), 404, 40401),
]


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status", "code"),
    BAD_PRODUCE,
    ids=[f"{p} {t.split('.')[-2] if '.' in t else t} -> {c}" for p, _, t, _, c in BAD_PRODUCE],
)
def test_bad_produce_requests_store_nothing(
    fast_broker: RunningBroker, http: httpx.Client, path: str, body: Any, content_type: str,
    status: int, code: int,
) -> None:
    create_topic(fast_broker.bootstrap, "bad")
    content = body if isinstance(body, str) else json.dumps(body)
    response = http.post(path, content=content, headers={"Content-Type": content_type})
    assert error_of(response) == (status, code)
    with Admin({"bootstrap.servers": fast_broker.bootstrap}) as admin:
        ends = admin.list_offsets({TopicPartition("bad", 0): "latest"})
    assert next(iter(ends.values())).offset == 0


def test_consumer_instance_errors(http: httpx.Client) -> None:
    post(http, "/consumers/g5", {"name": "x", "format": "json"})
    base = "/consumers/g5/instances/x"
    assert error_of(post(http, "/consumers/g5", {"name": "x"})) == (409, 40902)
    assert error_of(post(http, "/consumers/g5", {"name": "y", "format": "xml"})) == (422, 42204)
    assert error_of(http.get(f"{base}/records", headers={"Accept": embedded("binary")})) == (
        406, 40601,
    )
    assert error_of(http.get(f"{base}/records", headers={"Accept": embedded("json")})) == (
        409, 40903,
    )
    # subscribed, then assigned: refused
    post(http, f"{base}/subscription", {"topics": ["t"]})
    assign = post(http, f"{base}/assignments", {"partitions": [{"topic": "t", "partition": 0}]})
    assert error_of(assign) == (409, 40903)
    assert error_of(http.get("/consumers/g5/instances/nobody/assignments")) == (404, 40403)
    assert error_of(post(http, f"{base}/subscription", {"topics": ["t"]}, "text/xml")) == (
        415, 415,
    )
    assert error_of(http.get("/no/such/path")) == (404, 404)


def test_a_pattern_subscription_reads_the_topics_it_matches(
    fast_broker: RunningBroker, http: httpx.Client
) -> None:
    create_topic(fast_broker.bootstrap, "logs-a")
    create_topic(fast_broker.bootstrap, "logs-b")
    for topic in ("logs-a", "logs-b"):
        post(http, f"/topics/{topic}", {"records": [{"value": topic}]}, embedded("json"))
    post(http, "/consumers/g7", {"name": "p", "format": "json", "auto.offset.reset": "earliest"})
    base = "/consumers/g7/instances/p"
    assert post(http, f"{base}/subscription", {"topic_pattern": "logs-.*"}).status_code == 204
    got = read_records(http, base, 2, embedded("json"))
    assert sorted(r["value"] for r in got) == ["logs-a", "logs-b"]


def test_idle_consumer_instances_expire(
    fast_broker: RunningBroker, proxy_factory: Callable[..., ProxyServer]
) -> None:
    proxy = proxy_factory(fast_broker.bootstrap, instance_timeout_ms=500)
    with httpx.Client(base_url=proxy.url, timeout=60) as http:
        post(http, "/consumers/g6", {"name": "idle"})

        def gone() -> bool:
            return http.get("/consumers/g6/instances/idle/assignments").status_code == 404

        # polled less often than the timeout: a poll that finds the instance keeps it alive
        wait_for(gone, 30, interval=1.0, what="the idle instance to expire")
