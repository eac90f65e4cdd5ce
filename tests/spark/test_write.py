"""Writes through `df.write.format("logbus")` and `writeStream`, read back with
confluent-kafka; the columns the sink needs and the errors for bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from spark_support import consume_all, create_topic, produce


def writer(df: Any, bootstrap: str, **options: str) -> Any:
    builder = df.write.format("logbus").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        builder = builder.option(name, value)
    return builder


def test_batch_write_every_column(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "out", 3)
    rows = [
        (f"k{i}".encode(), f"v{i}".encode(), "out", i % 3, [("h", f"{i}".encode())])
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    ).repartition(2)
    writer(df, b).mode("append").save()
    records = consume_all(b, "out", 3, 60)
    got = {(m.key(), m.value(), m.partition(), tuple(m.headers() or ())) for m in records}
    assert got == {(k, v, p, (("h", h[0][1]),)) for k, v, _, p, h in rows}


def test_batch_write_topic_option_and_strings(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "text", 1)
    df = spark.createDataFrame(
        [("a", "one", "ignored"), (None, "two", "ignored")],
        "key string, value string, topic string",
    )
    writer(df, b, topic="text").mode("append").save()
    records = consume_all(b, "text", 1, 2)
    assert {(m.key(), m.value()) for m in records} == {(None, b"two"), (b"a", b"one")}


def test_stream_write_survives_a_restart(spark: Any, broker: Any, tmp_path: Path) -> None:
    b = broker.bootstrap
    create_topic(b, "raw", 2)
    create_topic(b, "upper", 2)
    produce(b, "raw", [b"r%d" % i for i in range(30)], partition=0)
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        source = (
            spark.readStream.format("logbus").option("kafka.bootstrap.servers", b)
            .option("subscribe", "raw").option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "12").load()
        )
        query = (
            source.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
            .writeStream.format("logbus")
            .option("kafka.bootstrap.servers", b)
            .option("topic", "upper")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    produce(b, "raw", [b"r%d" % i for i in range(30, 40)], partition=1)
    run()
    records = consume_all(b, "upper", 2, 40)
    assert sorted(m.value() for m in records) == sorted(b"R%d" % i for i in range(40))


def test_write_bad_input(spark: Any, broker: Any) -> None:
    b = broker.bootstrap
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(PySparkException, match="a 'value' column"):
        writer(no_value, b, topic="t").mode("append").save()
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="the 'topic' option is required"):
        writer(no_topic, b).mode("append").save()
    bad_partition = spark.createDataFrame([("v", "x")], "value string, partition string")
    with pytest.raises(PySparkException, match="column 'partition' must be int"):
        writer(bad_partition, b, topic="t").mode("append").save()
    with pytest.raises(PySparkException, match="unknown option 'topics'"):
        writer(spark.createDataFrame([("v",)], "value string"), b, topics="t").mode(
            "append"
        ).save()
    with pytest.raises(PySparkException, match=r"'kafka\.value\.serializer' is not supported"):
        writer(spark.createDataFrame([("v",)], "value string"), b, topic="t").option(
            "kafka.value.serializer", "x"
        ).mode("append").save()
    with pytest.raises(PySparkException, match="unknown producer config 'linger'"):
        writer(spark.createDataFrame([("v",)], "value string"), b, topic="t").option(
            "kafka.linger", "5"
        ).mode("append").save()
