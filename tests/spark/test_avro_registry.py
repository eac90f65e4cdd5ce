"""Confluent-framed Avro in the `logbus` source and sink with the schema registry
(keyFormat/valueFormat=avro): records written by confluent-kafka's AvroSerializer with an
evolving schema read by Spark with the newest reader schema (batch, and an AvailableNow
stream written back as Avro by the streaming sink), Spark's writes read back by
confluent-kafka's AvroDeserializer, a refused evolution, corrupt records under FAILFAST
and PERMISSIVE, and the errors for bad options."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.errors import PySparkException
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    RegistryServer,
    registry_factory_fixture,
    registry_fixture,
    sr_clients_fixture,
)
from spark_support import consume_all, create_topic, produce, reader

from logbus.spark.avro_format import avro_schema_of, spark_type_of
from logbus.spark.options import LogbusSparkError

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "nick", "type": ["null", "string"], "default": None},
    ],
}
# adds a field with a default: BACKWARD compatible
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": "none"}],
}


def produce_avro(
    bootstrap: str, client: SchemaRegistryClient, topic: str, schema: dict[str, Any],
    values: list[dict[str, Any]],
) -> None:
    """Records written by confluent-kafka's AvroSerializer (registering `schema`)."""
    serializer = AvroSerializer(client, json.dumps(schema))
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(
            topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE))
        )
    assert producer.flush(30) == 0


def user(i: int) -> dict[str, Any]:
    return {"name": f"u{i}", "age": 20 + i, "tags": [f"t{i}"] * (i % 3), "kind": "AB"[i % 2],
            "nick": None if i % 2 else f"n{i}"}


@pytest.fixture(name="evolved")
def evolved_fixture(broker: Any, registry: RegistryServer, sr_clients: Any) -> tuple[str, str]:
    """Topic `users`: 3 records with USER_V1, then 3 with USER_V2 (its `email` set)."""
    client = sr_clients(registry)
    create_topic(broker.bootstrap, "users", 1)
    produce_avro(broker.bootstrap, client, "users", USER_V1, [user(i) for i in range(3)])
    produce_avro(
        broker.bootstrap, client, "users", USER_V2,
        [user(i) | {"email": f"u{i}@x"} for i in range(3, 6)],
    )
    return broker.bootstrap, registry.url


def expected_v2(i: int) -> dict[str, Any]:
    return user(i) | {"email": f"u{i}@x" if i >= 3 else "none"}


def test_spark_types_follow_from_avro() -> None:
    schema = {
        "type": "record", "name": "R", "namespace": "n",
        "fields": [
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                     "scale": 2}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}},
            {"name": "again", "type": ["null", "F"]},
            {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "inner", "type": {"type": "record", "name": "I",
                                       "fields": [{"name": "x", "type": "float"}]}},
            {"name": "inners", "type": {"type": "array", "items": "n.I"}},
        ],
    }
    assert spark_type_of(schema).simpleString() == (
        "struct<d:date,ms:timestamp,local:timestamp_ntz,dec:decimal(9,2),f:binary,"
        "again:binary,m:map<string,bigint>,inner:struct<x:float>,inners:array<struct<x:float>>>"
    )
    with pytest.raises(LogbusSparkError, match="only a union of null and one other type"):
        spark_type_of(["int", "string"])
    with pytest.raises(LogbusSparkError, match="recursive Avro type 'Node'"):
        spark_type_of({"type": "record", "name": "Node",
                       "fields": [{"name": "next", "type": ["null", "Node"]}]})
    # and back: the struct's schema derived as to_avro derives it, read as the same type
    derived = avro_schema_of(spark_type_of(schema), "n.R", "column 'value'")
    assert derived["name"] == "R" and derived["namespace"] == "n"
    assert spark_type_of(derived).simpleString() == spark_type_of(schema).simpleString()


def test_batch_read_resolves_every_writer_schema_to_the_reader_schema(
    spark: Any, evolved: tuple[str, str]
) -> None:
    bootstrap, url = evolved
    df = reader(
        spark, bootstrap, subscribe="users", valueFormat="avro",
        **{"schema.registry.url": url},
    ).load()
    assert df.schema["value"].dataType.simpleString() == (
        "struct<name:string,age:int,tags:array<string>,kind:string,nick:string,email:string>"
    )
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.value.asDict(recursive=True) for r in rows] == [expected_v2(i) for i in range(6)]
    assert [(r.topic, r.partition) for r in rows] == [("users", 0)] * 6
    # Spark's operators reach into the struct.
    assert {r.name for r in df.select("value.name").where("value.age > 23").collect()} == {
        "u4", "u5",
    }
    # An older reader schema (version 1) drops the field v2 added.
    old = reader(
        spark, bootstrap, subscribe="users", valueFormat="avro", valueSchemaVersion="1",
        **{"schema.registry.url": url},
    ).load()
    assert [r.value.asDict(recursive=True) for r in sorted(old.collect(), key=lambda r: r.offset)
            ] == [user(i) for i in range(6)]


def test_available_now_stream_reads_and_writes_every_record(
    spark: Any, evolved: tuple[str, str], tmp_path: Path
) -> None:
    bootstrap, url = evolved
    df = (
        spark.readStream.format("logbus").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "users").option("startingOffsets", "earliest")
        .option("valueFormat", "avro").option("schema.registry.url", url).load()
    )
    # a streaming write of the decoded structs, as Avro again, to a topic of its own
    query = (
        df.selectExpr("struct(offset, value.*) AS value").writeStream.format("logbus")
        .option("kafka.bootstrap.servers", bootstrap).option("topic", "users-copy")
        .option("valueFormat", "avro").option("schema.registry.url", url)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copy = reader(
        spark, bootstrap, subscribe="users-copy", valueFormat="avro",
        **{"schema.registry.url": url},
    ).load()
    rows = sorted((r.value.asDict(recursive=True) for r in copy.collect()),
                  key=lambda v: v["offset"])
    assert [{k: v for k, v in r.items() if k != "offset"} for r in rows] == [
        expected_v2(i) for i in range(6)
    ]


def test_spark_write_is_read_by_confluent_deserializer(
    spark: Any, broker: Any, registry: RegistryServer, sr_clients: Any
) -> None:
    b = broker.bootstrap
    create_topic(b, "orders", 2)
    rows = [
        (
            (f"k{i}",),
            (i, f"item-{i}", None if i % 2 else [1.5 * i], {"a": i}, dt.date(2024, 1, i + 1),
             dt.datetime(2024, 1, 1, 12, 0, i, tzinfo=dt.UTC), Decimal(f"{i}.25"),
             (f"street {i}", i)),
        )
        for i in range(10)
    ]
    df = spark.createDataFrame(
        rows, "key struct<customer:string>, value struct<id:int,item:string,prices:array<double>,"
        "counts:map<string,bigint>,day:date,at:timestamp,amount:decimal(10,2),"
        "address:struct<street:string,number:int>>",
    )
    (df.write.format("logbus").option("kafka.bootstrap.servers", b).option("topic", "orders")
     .option("valueFormat", "avro").option("keyFormat", "avro")
     .option("schema.registry.url", registry.url).mode("append").save())

    client = sr_clients(registry)
    registered = client.get_latest_version("orders-value")
    schema = json.loads(registered.schema.schema_str)
    assert schema["name"] == "topLevelRecord"
    deserializer = AvroDeserializer(client)
    messages = consume_all(b, "orders", 2, 10)
    decoded = {
        deserializer(m.key(), SerializationContext("orders", MessageField.KEY))["customer"]:
        deserializer(m.value(), SerializationContext("orders", MessageField.VALUE))
        for m in messages
    }
    assert decoded["k3"] == {
        "id": 3, "item": "item-3", "prices": None, "counts": {"a": 3},
        "day": dt.date(2024, 1, 4), "at": dt.datetime(2024, 1, 1, 12, 0, 3, tzinfo=dt.UTC),
        "amount": Decimal("3.25"), "address": {"street": "street 3", "number": 3},
    }
    assert decoded["k4"]["prices"] == [6.0]
    # And Spark reads its own writes back into the same structs.
    back = reader(
        spark, b, subscribe="orders", valueFormat="avro", keyFormat="avro",
        **{"schema.registry.url": registry.url},
    ).load()
    value_type = df.schema["value"].dataType
    assert back.schema["value"].dataType.simpleString() == value_type.simpleString()
    got = {r.key.customer: r.value.asDict(recursive=True) for r in back.collect()}
    assert got["k3"]["at"] == dt.datetime(2024, 1, 1, 12, 0, 3)  # session time zone UTC
    assert got["k3"]["counts"] == {"a": 3} and got["k3"]["amount"] == Decimal("3.25")


def test_write_refuses_an_incompatible_evolution_and_lookup_only(
    spark: Any, broker: Any, registry: RegistryServer, sr_clients: Any
) -> None:
    b = broker.bootstrap
    client = sr_clients(registry)
    produce_avro(b, client, "people", USER_V1, [user(0)])

    def write(df: Any, **options: str) -> None:
        builder = (df.write.format("logbus").option("kafka.bootstrap.servers", b)
                   .option("topic", "people").option("valueFormat", "avro")
                   .option("schema.registry.url", registry.url))
        for name, value in options.items():
            builder = builder.option(name, value)
        builder.mode("append").save()

    # `age` as a string, and `kind` gone: no reader of v1 can read it
    bad = spark.createDataFrame([(("x", "old", ["t"], None),)],
                                "value struct<name:string,age:string,tags:array<string>,"
                                "nick:string>")
    with pytest.raises(PySparkException, match=r"option 'valueSubject'.*409"):
        write(bad)
    assert client.get_versions("people-value") == [1]
    # a compatible evolution (the record's name taken from the subject's; `kind` left
    # out, a nullable `email` added) is registered
    good = spark.createDataFrame(
        [(("x", 30, ["t"], None, "x@y"),)],
        "value struct<name:string,age:int,tags:array<string>,nick:string,email:string>",
    )
    with pytest.raises(PySparkException, match=r"option 'auto\.register\.schemas' is false"):
        write(good, **{"auto.register.schemas": "false"})
    write(good)
    assert client.get_versions("people-value") == [1, 2]
    rows = reader(
        spark, b, subscribe="people", valueFormat="avro", **{"schema.registry.url": registry.url}
    ).load().collect()
    assert [(r.value.name, r.value.email) for r in sorted(rows, key=lambda r: r.offset)] == [
        ("u0", None), ("x", "x@y"),
    ]


def test_corrupt_record_fails_fast_or_reads_as_null(
    spark: Any, evolved: tuple[str, str]
) -> None:
    bootstrap, url = evolved
    produce(bootstrap, "users", [b"\x01not avro", b"\x00\x00\x00\x03\xe7abc"])

    def load(**options: str) -> Any:
        return reader(
            spark, bootstrap, subscribe="users", valueFormat="avro",
            **{"schema.registry.url": url}, **options,
        ).load()

    with pytest.raises(PySparkException, match=r"partition users-0 offset 6: the value does not "
                       r"start with Confluent's magic byte"):
        load().collect()
    with pytest.raises(PySparkException, match=r"offset 7: the value names schema id 999"):
        load(startingOffsets='{"users":{"0":7}}').collect()
    rows = sorted(load(mode="PERMISSIVE").collect(), key=lambda r: r.offset)
    assert [r.value is None for r in rows] == [False] * 6 + [True, True]
    assert rows[6].offset == 6 and rows[7].offset == 7


def test_bad_options_fail_before_any_task(
    spark: Any, broker: Any, registry: RegistryServer
) -> None:
    b = broker.bootstrap
    url = {"schema.registry.url": registry.url}
    with pytest.raises(PySparkException, match="the schema registry has no subject 'nope-value'"):
        reader(spark, b, subscribe="nope", valueFormat="avro", **url).load()
    with pytest.raises(PySparkException, match="cannot reach the schema registry"):
        reader(spark, b, subscribe="t", valueFormat="avro",
               **{"schema.registry.url": "http://127.0.0.1:9"}).load()
    with pytest.raises(PySparkException, match=r"'schema\.registry\.url' is required"):
        reader(spark, b, subscribe="t", valueFormat="avro").load()
    with pytest.raises(PySparkException, match="option 'valueSubject' is required"):
        reader(spark, b, subscribe="a,b", valueFormat="avro", **url).load()
    with pytest.raises(PySparkException, match="option 'valueSubject' needs valueFormat=avro"):
        reader(spark, b, subscribe="t", valueSubject="s").load()
    df = spark.createDataFrame([(({1: "x"},),)], "value struct<m:map<int,string>>")
    with pytest.raises(PySparkException, match=r"column 'value'\.m is map<int,string>, which "
                       "an Avro schema cannot hold"):
        (df.write.format("logbus").option("kafka.bootstrap.servers", b).option("topic", "t")
         .option("valueFormat", "avro").options(**url).mode("append").save())
    flat = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(PySparkException, match="column 'value' must be a struct"):
        (flat.write.format("logbus").option("kafka.bootstrap.servers", b).option("topic", "t")
         .option("valueFormat", "avro").options(**url).mode("append").save())
