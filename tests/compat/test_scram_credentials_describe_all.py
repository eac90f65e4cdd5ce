"""DescribeUserScramCredentials' "every user" form (KIP-554) as each admin client sends it:
confluent-kafka's `describe_user_scram_credentials()` with no argument (an empty array),
kafka-python's with None (a null array) and with [] (an empty one), and raw requests with
both at every version the broker serves. Users named explicitly, one unknown
(RESOURCE_NOT_FOUND), one named twice (DUPLICATE_RESOURCE), an empty name; users whose
config node holds quotas only, or credentials since deleted, are not "users with
credentials"; a name with `/` and `@` is stored sanitized, as Kafka stores it, and
described by its own name. Against one broker and a 3-broker ZooKeeper cluster, where
credentials set through one broker are described through every one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_processes import ProcessCluster
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.admin import KafkaAdminClient

from kafka_wire import WireClient
from logbus.controller.zookeeper_store import ZooKeeperStore
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.security.credential_cache import USERS_PATH

TIMEOUT = 30
SHA_256, SHA_512 = 1, 2
# A name that Kafka's ZooKeeper layout stores URL-encoded (`ops%2Fadmin%40example.com`).
ODD_NAME = "ops/admin@example.com"
# What every "all users" answer holds: the users with credentials, sorted by name.
EVERYONE = {
    "alice": [(SHA_512, 4096)],
    "bob": [(SHA_256, 8192), (SHA_512, 4096)],
    ODD_NAME: [(SHA_256, 4096)],
}


@dataclass
class Deployment:
    addresses: list[str]  # of every broker
    user_nodes: Callable[[], list[str]]  # the children of /config/users in its store


@pytest.fixture(params=["one broker", "three brokers"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    if request.param == "one broker":
        running = request.getfixturevalue("broker")
        yield Deployment(
            [running.bootstrap], lambda: sorted(running.broker.store.children(USERS_PATH))
        )
        return
    zk_connect = request.getfixturevalue("zk_connect")
    with ProcessCluster(zk_connect, 3, tmp_path) as cluster:
        store = ZooKeeperStore(zk_connect, 10_000, 10_000)
        try:
            addresses = [cluster.bootstrap_of(i) for i in sorted(cluster.nodes)]
            yield Deployment(addresses, lambda: sorted(store.children(USERS_PATH)))
        finally:
            store.close()


def upsert(user: str, mechanism: ScramMechanism, iterations: int) -> Any:
    info = ScramCredentialInfo(mechanism, iterations)
    return UserScramCredentialUpsertion(user, info, f"{user}-secret".encode())


def set_up_users(bootstrap: str) -> None:
    """alice, bob and ops/admin@example.com with credentials; carol with a quota only,
    erin with a quota of hers with one client id only (her node holds no config of its
    own); dave with a credential that is deleted again (his node stays, empty)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    changes = [
        upsert("alice", ScramMechanism.SCRAM_SHA_512, 4096),
        upsert("bob", ScramMechanism.SCRAM_SHA_256, 8192),
        upsert("bob", ScramMechanism.SCRAM_SHA_512, 4096),
        upsert("dave", ScramMechanism.SCRAM_SHA_256, 4096),
        upsert(ODD_NAME, ScramMechanism.SCRAM_SHA_256, 4096),
    ]
    for future in admin.alter_user_scram_credentials(changes).values():
        future.result(TIMEOUT)
    deletion = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["dave"].result(TIMEOUT)
    quota = {
        "entries": [
            {
                "entity": entity,
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            }
            for entity in (
                [{"entity_type": "user", "entity_name": "carol"}],
                [
                    {"entity_type": "user", "entity_name": "erin"},
                    {"entity_type": "client-id", "entity_name": "app"},
                ],
            )
        ],
        "validate_only": False,
    }
    with WireClient(bootstrap) as wire:
        answer = wire.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, quota)
    assert [e["error_code"] for e in answer["entries"]] == [ErrorCode.NONE] * 2


def served_versions(wire: WireClient) -> range:
    response = wire.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "wire", "client_software_version": "1"}
    )
    (entry,) = (
        k for k in response["api_keys"] if k["api_key"] == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    )
    return range(entry["min_version"], entry["max_version"] + 1)


def wire_results(answer: dict[str, Any]) -> list[tuple[str, int, list[tuple[int, int]]]]:
    assert answer["error_code"] == ErrorCode.NONE, answer
    return [
        (
            r["user"],
            r["error_code"],
            [(i["mechanism"], i["iterations"]) for i in r["credential_infos"]],
        )
        for r in answer["results"]
    ]


def confluent_infos(description: Any) -> list[tuple[int, int]]:
    return [(int(i.mechanism.value), i.iterations) for i in description.scram_credential_infos]


def check_every_user_form(bootstrap: str) -> None:
    """confluent-kafka (an empty array), kafka-python (null and empty), raw requests."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    everyone = admin.describe_user_scram_credentials().result(TIMEOUT)
    assert {user: confluent_infos(d) for user, d in everyone.items()} == EVERYONE

    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        for users in (None, []):
            described = kp_admin.describe_user_scram_credentials(users)
            assert list(described) == list(EVERYONE), users
            assert {
                user: [(int(i["mechanism"]), i["iterations"]) for i in d["credential_infos"]]
                for user, d in described.items()
            } == EVERYONE
            assert all(d["error"] is None for d in described.values())
    finally:
        kp_admin.close()

    expected = [(user, ErrorCode.NONE, infos) for user, infos in EVERYONE.items()]
    with WireClient(bootstrap) as wire:
        for version in served_versions(wire):
            for users in (None, []):
                answer = wire.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version,
                                      {"users": users})  # fmt: skip
                assert wire_results(answer) == expected, (version, users)


def check_named_users(bootstrap: str) -> None:
    """Named users: found, unknown, without credentials, twice, empty."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_user_scram_credentials(["bob", "nobody", "carol"])
    assert confluent_infos(futures["bob"].result(TIMEOUT)) == EVERYONE["bob"]
    for user in ("nobody", "carol"):
        with pytest.raises(KafkaException) as refused:
            futures[user].result(TIMEOUT)
        assert refused.value.args[0].code() == ErrorCode.RESOURCE_NOT_FOUND

    kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        described = kp_admin.describe_user_scram_credentials(["alice", "dave", "alice"])
    finally:
        kp_admin.close()
    assert list(described) == ["alice", "dave"]
    assert "twice" in described["alice"]["error"]
    assert "does not exist" in described["dave"]["error"]

    with WireClient(bootstrap) as wire:
        for version in served_versions(wire):
            names = ["bob", "", "nobody", "alice", "bob", "", "dave"]
            body = {"users": [{"name": name} for name in names]}
            answer = wire.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version, body)
            assert wire_results(answer) == [
                ("bob", ErrorCode.DUPLICATE_RESOURCE, []),
                ("", ErrorCode.RESOURCE_NOT_FOUND, []),
                ("nobody", ErrorCode.RESOURCE_NOT_FOUND, []),
                ("alice", ErrorCode.NONE, EVERYONE["alice"]),
                ("dave", ErrorCode.RESOURCE_NOT_FOUND, []),
            ], version


def test_every_user_and_named_users(deployment: Deployment) -> None:
    set_up_users(deployment.addresses[0])
    # Kafka's layout: user names sanitized (URL-encoded), whatever set them
    assert deployment.user_nodes() == [
        "alice", "bob", "carol", "dave", "erin", "ops%2Fadmin%40example.com"
    ]  # fmt: skip
    for bootstrap in deployment.addresses:
        check_every_user_form(bootstrap)
        check_named_users(bootstrap)
