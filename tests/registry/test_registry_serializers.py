"""The schema registry with confluent-kafka's own registry client and serializers:
Avro, JSON and Protobuf records produced and consumed through a real broker, schema evolution and
its 409, the client's calls (versions, lookups, configs, modes, deletes) and their
Confluent error codes, and the registry's restart reading its `_schemas` topic back."""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    RegistryServer,
    registry_factory_fixture,
    registry_fixture,
    shared_registry_fixture,
    sr_clients_fixture,
)

from brokers import RunningBroker

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}
# adds a field with a default: BACKWARD compatible
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}],
}
# adds a field without a default: not BACKWARD compatible
USER_BAD = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}


def avro(schema: dict[str, Any]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages: list[Any] = []
    try:
        for _ in range(300):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
            if len(messages) >= count:
                break
    finally:
        consumer.close()
    assert len(messages) == count, f"read {len(messages)} of {count} records"
    return messages


def test_avro_serializer_round_trip_through_the_broker(
    broker: RunningBroker, registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(registry)
    topic = "users"
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    users = [{"name": f"user-{i}", "age": 20 + i} for i in range(5)]
    for user in users:
        producer.produce(
            topic, value=serializer(user, SerializationContext(topic, MessageField.VALUE))
        )
    assert producer.flush(30) == 0

    messages = consume_all(broker.bootstrap, topic, len(users))
    # Confluent's framing: magic byte 0, then the schema id the registry gave
    registered = client.get_latest_version(f"{topic}-value")
    for message in messages:
        magic, schema_id = struct.unpack(">bI", message.value()[:5])
        assert (magic, schema_id) == (0, registered.schema_id)
    deserializer = AvroDeserializer(sr_clients(registry))
    decoded = [
        deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages
    ]
    assert decoded == users


def test_evolution_gives_new_versions_and_refuses_incompatible_schemas(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    subject = unique("evolve")
    first = client.register_schema(subject, avro(USER_V1))
    assert client.register_schema(subject, avro(USER_V1)) == first  # same schema: same id
    assert client.test_compatibility(subject, avro(USER_BAD)) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, avro(USER_BAD))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert client.get_versions(subject) == [1]  # nothing stored

    second = client.register_schema(subject, avro(USER_V2))
    assert second != first
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, second)
    assert json.loads(latest.schema.schema_str) == USER_V2

    # the same schema under another subject keeps its id
    other = unique("other")
    assert client.register_schema(other, avro(USER_V1)) == first
    assert sorted(client.get_subjects_by_schema_id(first)) == sorted([subject, other])


def test_compatibility_levels_per_subject_and_their_checks(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    subject = unique("levels")
    client.register_schema(subject, avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as unset:
        client.get_compatibility(subject)
    assert unset.value.error_code == 40408
    assert client.get_compatibility() == "BACKWARD"

    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    assert client.test_compatibility(subject, avro(USER_BAD)) is True
    client.register_schema(subject, avro(USER_BAD))

    # FORWARD: the latest must read what the new one writes; dropping a field without a
    # default in the old schema breaks it
    client.set_compatibility(subject, "FORWARD")
    dropped = {**USER_V1, "fields": USER_V1["fields"][:1]}
    assert client.test_compatibility(subject, avro(dropped)) is False
    assert client.test_compatibility(subject, avro(USER_V2)) is True

    with pytest.raises(SchemaRegistryError) as bad_level:
        client.set_compatibility(subject, "SIDEWAYS")
    assert (bad_level.value.http_status_code, bad_level.value.error_code) == (422, 42203)


def test_transitive_levels_check_every_live_version(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    subject = unique("transitive")
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    # v2 drops a, v3 adds a back without a default: v3 reads v2's data, not v1's
    v2 = {"type": "record", "name": "R", "fields": []}
    v3 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string",
                                                       "default": "x"}]}
    client.register_schema(subject, avro(v1))
    client.register_schema(subject, avro(v2))
    client.set_compatibility(subject, "BACKWARD")
    assert client.test_compatibility_all_versions(subject, avro(v3)) is True
    client.set_compatibility(subject, "BACKWARD_TRANSITIVE")
    assert client.test_compatibility_all_versions(subject, avro(v3)) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, avro(v3))
    assert refused.value.http_status_code == 409
    # checked against one version: only that version counts
    assert client.test_compatibility(subject, avro(v3), version=2) is True
    assert client.test_compatibility(subject, avro(v3), version=1) is False


def test_lookups_and_unknown_names_get_confluent_codes(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    subject = unique("lookup")
    schema_id = client.register_schema(subject, avro(USER_V1))
    found = client.lookup_schema(subject, avro(USER_V1))
    assert (found.schema_id, found.version, found.subject) == (schema_id, 1, subject)
    assert client.get_schema(schema_id).schema_str == json.dumps(USER_V1, separators=(",", ":"))
    assert client.get_version(subject, 1).schema_id == schema_id

    cases: list[tuple[Callable[[], Any], int, int]] = [
        (lambda: client.get_versions(unique("missing")), 404, 40401),
        (lambda: client.get_version(subject, 7), 404, 40402),
        (lambda: client.get_schema(99_999), 404, 40403),
        (lambda: client.lookup_schema(subject, avro(USER_V2)), 404, 40403),
        (lambda: client.lookup_schema(unique("missing"), avro(USER_V1)), 404, 40401),
        (lambda: client.register_schema(subject, Schema("{not json", "AVRO")), 422, 42201),
        (
            lambda: client.register_schema(
                subject, Schema('{"type": "record", "name": "R", "fields": [{"name": 1}]}', "AVRO")
            ),
            422,
            42201,
        ),
        (lambda: client.register_schema(subject, Schema('{"type": 5}', "JSON")), 422, 42201),
    ]
    for call, status, code in cases:
        with pytest.raises(SchemaRegistryError) as refused:
            call()
        assert (refused.value.http_status_code, refused.value.error_code) == (status, code)
    assert client.get_versions(subject) == [1]  # nothing stored by the refused calls


def test_soft_and_hard_deletes(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    subject = unique("deletes")
    first = client.register_schema(subject, avro(USER_V1))
    client.register_schema(subject, avro(USER_V2))

    with pytest.raises(SchemaRegistryError) as not_soft:
        client.delete_version(subject, 2, permanent=True)
    assert not_soft.value.error_code == 40407
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    with pytest.raises(SchemaRegistryError) as twice:
        client.delete_version(subject, 2)
    assert twice.value.error_code == 40406
    assert client.delete_version(subject, 2, permanent=True) == 2

    with pytest.raises(SchemaRegistryError) as subject_first:
        client.delete_subject(subject, permanent=True)
    assert subject_first.value.error_code == 40405
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    # a soft-deleted schema still resolves by id: records written with it stay readable
    assert client.get_schema(first).schema_str is not None
    with pytest.raises(SchemaRegistryError) as soft_again:
        client.delete_subject(subject)
    assert soft_again.value.error_code == 40404
    assert client.delete_subject(subject, permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(subject)
    assert gone.value.error_code == 40401


def test_json_schema_serializer_round_trip(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(shared_registry)
    topic = unique("orders")
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Order",
            "type": "object",
            "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
            "required": ["id"],
        }
    )
    serializer = JSONSerializer(schema, client)
    context = SerializationContext(topic, MessageField.VALUE)
    payload = serializer({"id": 7, "item": "book"}, context)
    assert payload is not None
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    assert deserializer(payload, context) == {"id": 7, "item": "book"}


def test_protobuf_serializer_round_trip(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    # a message class built from its descriptor (what protoc would generate)
    field_type = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="ping.proto", package="ex", syntax="proto3")
    ping = proto.message_type.add(name="Ping")
    ping.field.add(name="at", number=1, type=field_type.TYPE_INT64,
                   label=field_type.LABEL_OPTIONAL)
    ping.field.add(name="who", number=2, type=field_type.TYPE_STRING,
                   label=field_type.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    ping_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("ex.Ping"))

    client = sr_clients(shared_registry)
    topic = unique("pings")
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = ProtobufSerializer(ping_class, client, {"use.deprecated.format": False})
    payload = serializer(ping_class(at=5, who="me"), context)
    assert payload is not None
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert struct.unpack(">bI", payload[:5]) == (0, registered.schema_id)
    deserializer = ProtobufDeserializer(ping_class, {"use.deprecated.format": False}, client)
    decoded = deserializer(payload, context)
    assert (decoded.at, decoded.who) == (5, "me")


def test_a_record_whose_schema_id_does_not_resolve_is_refused(
    shared_registry: RegistryServer, sr_clients: Any
) -> None:
    deserializer = AvroDeserializer(sr_clients(shared_registry))
    context = SerializationContext("t", MessageField.VALUE)
    with pytest.raises((SerializationError, SchemaRegistryError)):
        deserializer(struct.pack(">bI", 0, 987_654) + b"\x02", context)
    with pytest.raises(SerializationError):
        deserializer(b"\x07\x00\x00\x00\x01\x02", context)  # not Confluent's magic byte


def test_read_only_mode_refuses_writes(
    broker: RunningBroker, registry: RegistryServer, sr_clients: Any
) -> None:
    client = sr_clients(registry)
    client.register_schema("kept", avro(USER_V1))
    assert client.get_global_mode() == "READWRITE"
    client.update_global_mode("READONLY")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("kept", avro(USER_V2))
    assert (refused.value.http_status_code, refused.value.error_code) == (422, 42205)
    with pytest.raises(SchemaRegistryError) as bad_mode:
        client.update_global_mode("SOMETIMES")
    assert bad_mode.value.error_code == 42204
    # reads still work, and a subject may be opened again on its own
    assert client.get_versions("kept") == [1]
    client.update_mode("kept", "READWRITE")
    assert client.register_schema("kept", avro(USER_V2)) > 0


def test_restart_reads_the_schemas_topic_back(
    broker: RunningBroker, registry_factory: Callable[..., RegistryServer], sr_clients: Any
) -> None:
    first = registry_factory(broker.bootstrap)
    client = sr_clients(first)
    ids = [client.register_schema(unique("s"), avro(USER_V1))]
    subject = unique("kept")
    ids.append(client.register_schema(subject, avro(USER_V1)))
    ids.append(client.register_schema(subject, avro(USER_V2)))
    client.set_compatibility(subject, "FULL")
    client.delete_version(subject, 2)
    first.stop()

    # the broker restarts too: the topic is on disk, compacted
    broker.restart()
    second = registry_factory(broker.bootstrap)
    again = sr_clients(second)
    assert again.get_versions(subject) == [1]
    assert again.get_versions(subject, deleted=True) == [1, 2]
    assert again.get_compatibility(subject) == "FULL"
    assert again.get_schema(ids[2]).schema_str == json.dumps(USER_V2, separators=(",", ":"))
    # ids go on from the largest the topic holds
    new_id = again.register_schema(unique("new"), avro({"type": "string"}))
    assert new_id == max(ids) + 1


def test_the_store_topic_is_compacted_in_confluents_format(
    broker: RunningBroker, registry: RegistryServer, sr_clients: Any
) -> None:
    from logbus import Admin
    from logbus.client.admin import ConfigResource, ResourceType

    client = sr_clients(registry)
    client.register_schema("fmt-value", avro(USER_V1))
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "_schemas")])
        entries = next(iter(configs.values()))
        assert entries["cleanup.policy"].value == "compact"
    # the NOOP the registry writes when it claims the store's writes, then the schema
    records = consume_all(broker.bootstrap, "_schemas", 2)
    assert json.loads(records[0].key()) == {"keytype": "NOOP", "magic": 0}
    keys = [json.loads(m.key()) for m in records[1:]]
    values = [json.loads(m.value()) for m in records[1:]]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "fmt-value", "version": 1, "magic": 1}
    assert values[0]["id"] == 1 and values[0]["deleted"] is False
