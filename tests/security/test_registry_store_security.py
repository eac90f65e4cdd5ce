"""The schema registry's store connection secured as Confluent's settings say
(`kafkastore.security.protocol`, `kafkastore.sasl.*`): a registry over a SASL_PLAINTEXT
listener with SCRAM-SHA-512 keeps its schemas, and confluent-kafka's serializer works
through it; wrong credentials keep it from starting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_fixtures import (  # noqa: F401  (the registry's fixtures)
    registry_factory_fixture,
    sr_clients_fixture,
)
from security_support import Pki, address, sasl_broker

from logbus.registry.config import RegistryConfig
from ports import free_port

pytest_plugins = ["secure_fixtures"]


def store_properties(bootstrap: str, password: str) -> dict[str, str]:
    return {
        "kafkastore.bootstrap.servers": f"SASL_PLAINTEXT://{bootstrap}",
        "kafkastore.security.protocol": "SASL_PLAINTEXT",
        "kafkastore.sasl.mechanism": "SCRAM-SHA-512",
        "kafkastore.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{password}";'
        ),
    }


def test_a_registry_over_a_scram_listener(
    secure_broker: Any, pki: Pki, registry_factory: Any, sr_clients: Any
) -> None:
    running = sasl_broker(secure_broker, pki)
    bootstrap = address(running, "SASL_PLAINTEXT")
    config = RegistryConfig.from_properties(store_properties(bootstrap, "alice-secret"))
    registry = registry_factory(config.bootstrap_servers, config.client_settings)
    client = sr_clients(registry)
    schema = json.dumps({"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]})
    payload = AvroSerializer(client, schema)(
        {"a": 1}, SerializationContext("secured", MessageField.VALUE)
    )
    assert payload is not None
    assert client.get_subjects() == ["secured-value"]


def test_wrong_store_credentials_keep_the_registry_from_starting(
    secure_broker: Any, pki: Pki, tmp_path: Path
) -> None:
    running = sasl_broker(secure_broker, pki)
    properties = tmp_path / "schema-registry.properties"
    lines = [f"{k}={v}" for k, v in store_properties(
        address(running, "SASL_PLAINTEXT"), "wrong"
    ).items()]
    properties.write_text("\n".join([*lines, f"listeners=http://127.0.0.1:{free_port()}"]))
    result = subprocess.run(
        [sys.executable, "-m", "logbus.cli.main", "schema-registry", "start", str(properties)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "SASL_AUTHENTICATION_FAILED" in result.stdout + result.stderr
