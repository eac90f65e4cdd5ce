"""Subjects are any string, as in Confluent's registry: names with "/", spaces, "%" and
non-ASCII letters, sent percent-encoded in the path (confluent-kafka's client quotes them
with `safe=''`), work on every subject route and stay apart from their look-alikes
("a/b" is not "a" nor "b"); a record-name subject strategy's dotted names too."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    JSON_TYPE,
    RegistryServer,
    shared_registry_fixture,
    sr_clients_fixture,
)

RECORD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
# adds a field with a default: BACKWARD compatible
RECORD_V2 = {**RECORD, "fields": [*RECORD["fields"], {"name": "b", "type": "int", "default": 0}]}


def avro(schema: object) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.mark.parametrize("subject", ["a/b", "x y", "c%d", "ü", "/lead/and/trail/"])
def test_confluent_client_on_subjects_with_reserved_characters(
    shared_registry: RegistryServer, sr_clients: Any, subject: str
) -> None:
    client = sr_clients(shared_registry)
    schema_id = client.register_schema(subject, avro(RECORD))
    assert subject in client.get_subjects()
    latest = client.get_latest_version(subject)
    assert (latest.subject, latest.version, latest.schema_id) == (subject, 1, schema_id)
    found = client.lookup_schema(subject, avro(RECORD))
    assert (found.subject, found.version) == (subject, 1)
    client.register_schema(subject, avro(RECORD_V2))
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 2).subject == subject

    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as missing:
        sr_clients(shared_registry).get_latest_version(subject)  # a client with no cache
    assert missing.value.error_code == 40401


def test_a_subject_with_a_slash_is_not_its_parts(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    whole = client.register_schema("parts/whole", avro(RECORD))
    first = client.register_schema("parts", avro({"type": "string"}))
    assert whole != first
    assert client.get_versions("parts/whole") == [1]
    assert client.get_versions("parts") == [1]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_versions("whole")
    assert missing.value.error_code == 40401
    assert client.get_latest_version("parts").schema_id == first


def test_every_subject_route_over_plain_http(shared_registry: RegistryServer) -> None:
    subject = "team/orders value%"
    path = quote(subject, safe="")
    with httpx.Client(
        base_url=shared_registry.url, headers={"Content-Type": JSON_TYPE}, timeout=30
    ) as http:
        own = {**RECORD, "name": "OwnOfThisTest"}
        body = {"schema": json.dumps(own)}
        schema_id = http.post(f"/subjects/{path}/versions", json=body).json()["id"]
        assert http.post(f"/subjects/{path}", json=body).json()["subject"] == subject
        assert http.get(f"/subjects/{path}/versions").json() == [1]
        assert http.get(f"/subjects/{path}/versions/1").json()["subject"] == subject
        schema = http.get(f"/subjects/{path}/versions/latest/schema")
        assert json.loads(schema.text) == own
        assert http.get(f"/subjects/{path}/versions/1/referencedby").json() == []
        assert http.get(f"/schemas/ids/{schema_id}/subjects").json() == [subject]

        assert http.put(f"/config/{path}", json={"compatibility": "NONE"}).status_code == 200
        assert http.get(f"/config/{path}").json() == {"compatibilityLevel": "NONE"}
        compatible = http.post(
            f"/compatibility/subjects/{path}/versions/latest", json={"schema": '"string"'}
        )
        assert compatible.json() == {"is_compatible": True}
        against_all = http.post(
            f"/compatibility/subjects/{path}/versions", json={"schema": '"string"'}
        )
        assert against_all.json() == {"is_compatible": True}
        assert http.delete(f"/config/{path}").json() == {"compatibilityLevel": "NONE"}
        assert http.get(f"/config/{path}").json()["error_code"] == 40408

        assert http.put(f"/mode/{path}", json={"mode": "READONLY"}).json() == {
            "mode": "READONLY"
        }
        assert http.get(f"/mode/{path}").json() == {"mode": "READONLY"}
        refused = http.post(f"/subjects/{path}/versions", json={"schema": '"string"'})
        assert refused.json()["error_code"] == 42205
        assert http.delete(f"/mode/{path}").json() == {"mode": "READONLY"}

        assert http.delete(f"/subjects/{path}/versions/1").json() == 1
        assert http.delete(f"/subjects/{path}/versions/1?permanent=true").json() == 1
        assert subject not in http.get("/subjects?deleted=true").json()


def test_record_name_strategy_subjects_with_dots(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    from confluent_kafka.schema_registry import record_subject_name_strategy

    client = sr_clients(shared_registry)
    order = {
        "type": "record", "name": "Order", "namespace": "com.example.shop",
        "fields": [{"name": "id", "type": "long"}],
    }
    serializer = AvroSerializer(
        client, json.dumps(order), conf={"subject.name.strategy": record_subject_name_strategy}
    )
    context = SerializationContext("orders", MessageField.VALUE)
    payload = serializer({"id": 7}, context)
    assert "com.example.shop.Order" in client.get_subjects()
    assert client.get_latest_version("com.example.shop.Order").version == 1
    assert AvroDeserializer(sr_clients(shared_registry))(payload, context) == {"id": 7}
