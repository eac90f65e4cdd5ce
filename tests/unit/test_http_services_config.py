"""The schema registry's and the REST proxy's settings read from Confluent's property
names: listeners, the store's and clients' settings with their prefixes removed, the
settings logbus's clients do not have left out, bad values refused."""

from __future__ import annotations

import pytest

from logbus.common.config_def import ConfigError
from logbus.registry.config import Listener, RegistryConfig
from logbus.restproxy.config import RestProxyConfig


def test_registry_settings_by_confluents_names() -> None:
    config = RegistryConfig.from_properties({
        "listeners": "http://127.0.0.1:8085",
        "kafkastore.bootstrap.servers": "PLAINTEXT://a:9092,b:9093",
        "kafkastore.topic": "_my_schemas",
        "kafkastore.topic.replication.factor": "1",
        "kafkastore.security.protocol": "SASL_PLAINTEXT",
        "kafkastore.sasl.mechanism": "PLAIN",
        "kafkastore.init.timeout.ms": "60000",  # Confluent's, not a client's: left out
        "schema.compatibility.level": "full_transitive",
        "host.name": "registry-1",
    })
    assert config.listeners == [Listener("127.0.0.1", 8085)]
    assert config.bootstrap_servers == "a:9092,b:9093"
    assert (config.topic, config.replication_factor) == ("_my_schemas", 1)
    assert config.compatibility_level == "FULL_TRANSITIVE"
    assert config.advertised_url == "http://registry-1:8085"
    assert config.client_settings == {
        "bootstrap.servers": "a:9092,b:9093",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
    }


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"kafkastore.bootstrap.servers": "a:1", "schema.compatibility.level": "most"},
        {"kafkastore.bootstrap.servers": "a:1", "listeners": "https://0.0.0.0:8081"},
        {"kafkastore.bootstrap.servers": "a:1", "kafkastore.timeout.ms": "soon"},
    ],
)
def test_bad_registry_settings_are_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        RegistryConfig.from_properties(props)


def test_rest_proxy_settings_by_confluents_names() -> None:
    config = RestProxyConfig.from_properties({
        "bootstrap.servers": "PLAINTEXT://a:9092",
        "schema.registry.url": "http://r:8081",
        "client.security.protocol": "SSL",
        "producer.acks": "all",
        "producer.threads": "4",  # Confluent's, not the producer's: left out
        "consumer.max.poll.records": "50",
        "consumer.instance.timeout.ms": "1000",
        "api.v3.produce.batch.maximum.entries": "25",
    })
    assert config.listeners == [Listener("0.0.0.0", 8082)]
    assert config.produce_batch_max_entries == 25
    assert config.client_settings == {"bootstrap.servers": "a:9092", "security.protocol": "SSL"}
    assert config.producer_settings == {"acks": "all"}
    assert config.consumer_settings == {"max.poll.records": "50"}
    assert (config.schema_registry_url, config.instance_timeout_ms) == ("http://r:8081", 1000)
    with pytest.raises(ConfigError):
        RestProxyConfig.from_properties({"listeners": "http://0.0.0.0:8082"})
