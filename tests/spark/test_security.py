"""The Spark source and sink over SASL_SSL with SCRAM-SHA-512: the `kafka.`-prefixed
security options (as with Spark's Kafka source) reach the logbus client in every task."""

from __future__ import annotations

from typing import Any

from security_support import Pki, address, sasl_broker

pytest_plugins = ["secure_fixtures"]


def test_read_and_write_over_sasl_ssl(spark: Any, secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki, **{"auto.create.topics.enable": "false"})
    secure = {
        "kafka.bootstrap.servers": address(running, "SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.ca.location": str(pki.ca.cert_file),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": "alice-secret",
    }
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address(running, "PLAINTEXT")})
    admin.create_topics([NewTopic("secure", 2, 1)])["secure"].result(30)
    rows = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(40)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    writer = df.write.format("logbus").option("topic", "secure")
    for name, value in secure.items():
        writer = writer.option(name, value)
    writer.mode("append").save()
    reader = spark.read.format("logbus").option("subscribe", "secure")
    for name, value in secure.items():
        reader = reader.option(name, value)
    got = {(r.key, r.value) for r in reader.load().select("key", "value").collect()}
    assert got == {(bytes(k), bytes(v)) for k, v in rows}
