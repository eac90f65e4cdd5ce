"""What one request can cost the broker: a request that names the same thing many times is
answered as if it named it once (Kafka keeps the requested topics and resources in sets),
so a small request cannot ask for an answer thousands of times its size."""

from __future__ import annotations

from typing import Any

from kafka_wire import WireClient
from logbus.protocol import ApiKey, ErrorCode

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
REPEATS = 2000


def _create(client: WireClient, name: str) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    result = client.request(ApiKey.CREATE_TOPICS, 5, body)["topics"][0]
    assert result["error_code"] == ErrorCode.NONE


def test_describe_configs_describes_a_repeated_resource_once(broker: Any) -> None:
    # The broker named 2,000 times over, as "0", "00" and "+0", and a topic 2,000 times: a
    # 30 KB request that asked for a 100 MB answer.
    resources = [
        {"resource_type": BROKER, "resource_name": name, "configuration_keys": None}
        for name in ("0", "00", "+0")
        for _ in range(REPEATS)
    ]
    resources += [
        {"resource_type": TOPIC, "resource_name": "described", "configuration_keys": None}
    ] * REPEATS
    resources += [
        {"resource_type": BROKER_LOGGER, "resource_name": "0", "configuration_keys": None}
    ] * REPEATS
    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "described")
        body = {"resources": resources, "include_synonyms": True, "include_documentation": True}
        results = client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    assert [(r["resource_type"], r["resource_name"], r["error_code"]) for r in results] == [
        (BROKER, "0", ErrorCode.NONE),
        (TOPIC, "described", ErrorCode.NONE),
        (BROKER_LOGGER, "0", ErrorCode.NONE),
    ]
    assert all(r["configs"] for r in results)


def test_metadata_answers_a_repeated_topic_once(broker: Any) -> None:
    names = ["listed", "missing", "listed", "missing"] * REPEATS
    with WireClient(broker.bootstrap, timeout=60) as client:
        _create(client, "listed")
        body = {
            "topics": [{"name": n} for n in names],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        topics = client.request(ApiKey.METADATA, 9, body)["topics"]
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in topics] == [
        ("listed", ErrorCode.NONE, 2),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]
