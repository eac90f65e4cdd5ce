"""DescribeClientQuotas / AlterClientQuotas on a real broker through `logbus.aio.Admin`:
storage in Kafka's ZooKeeper layout, filters, validate_only, and every kind of bad input
refused with INVALID_REQUEST and nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from admin_helpers import failure, run

from logbus.aio import Admin
from logbus.client.admin import ClientQuotaEntity, ClientQuotaFilterComponent
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.quotas.entity import QuotaEntity, QuotaType

ALICE = ClientQuotaEntity.of({"user": "alice"})
ALICE_APP = ClientQuotaEntity.of({"user": "alice", "client-id": "app"})
DEFAULT_USER = ClientQuotaEntity.of({"user": None})
APP = ClientQuotaEntity.of({"client-id": "app"})
ODD_USER = ClientQuotaEntity.of({"user": "CN=odd user,O=x*"})


def stored(broker: Any, path: str) -> dict[str, Any]:
    store = broker.broker.store
    value = store.get_json(path)
    assert isinstance(value, dict)
    return value


def test_alter_and_describe_every_entity_kind(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        await admin.alter_client_quotas(
            {
                ALICE: {"producer_byte_rate": 1048576, "request_percentage": 50.5},
                ALICE_APP: {"consumer_byte_rate": 2048},
                DEFAULT_USER: {"controller_mutation_rate": 10},
                APP: {"producer_byte_rate": 4096},
                ODD_USER: {"consumer_byte_rate": 100},
            }
        )
        everything = await admin.describe_client_quotas()
        assert everything == {
            ALICE: {"producer_byte_rate": 1048576.0, "request_percentage": 50.5},
            ALICE_APP: {"consumer_byte_rate": 2048.0},
            DEFAULT_USER: {"controller_mutation_rate": 10.0},
            APP: {"producer_byte_rate": 4096.0},
            ODD_USER: {"consumer_byte_rate": 100.0},
        }
        user = ClientQuotaFilterComponent.entity("user", "alice")
        assert set(await admin.describe_client_quotas([user])) == {ALICE, ALICE_APP}
        assert set(await admin.describe_client_quotas([user], strict=True)) == {ALICE}
        default = ClientQuotaFilterComponent.default("user")
        assert set(await admin.describe_client_quotas([default])) == {DEFAULT_USER}
        named = ClientQuotaFilterComponent.any("user")
        assert set(await admin.describe_client_quotas([named], strict=True)) == {ALICE, ODD_USER}
        clients = ClientQuotaFilterComponent.any("client-id")
        assert set(await admin.describe_client_quotas([clients])) == {ALICE_APP, APP}
        # removing a key leaves the others
        await admin.alter_client_quotas({ALICE: {"request_percentage": None}})
        assert (await admin.describe_client_quotas([user], strict=True)) == {
            ALICE: {"producer_byte_rate": 1048576.0}
        }

    run(broker, action)
    # Kafka's layout: sanitized names, <default>, long byte rates
    assert stored(broker, "/config/users/alice")["config"] == {"producer_byte_rate": "1048576"}
    assert stored(broker, "/config/users/alice/clients/app")["config"] == {
        "consumer_byte_rate": "2048"
    }
    assert stored(broker, "/config/users/<default>")["config"] == {
        "controller_mutation_rate": "10.0"
    }
    assert stored(broker, "/config/clients/app")["config"] == {"producer_byte_rate": "4096"}
    assert stored(broker, "/config/users/CN%3Dodd%20user%2CO%3Dx%2A")["config"] == {
        "consumer_byte_rate": "100"
    }
    # every change was announced to the brokers
    store = broker.broker.store
    notes = [
        json.loads(store.get(f"/config/changes/{c}")[0])["entity_path"]
        for c in store.children("/config/changes")
    ]
    assert "users/alice/clients/app" in notes and "clients/app" in notes
    # the quotas survive a restart and are in force again
    broker.restart()
    quotas = broker.broker.quotas
    assert quotas.quota(QuotaType.PRODUCE, "alice", "x") == (1048576.0, QuotaEntity("alice", None))
    assert quotas.quota(QuotaType.PRODUCE, "bob", "app") == (4096.0, QuotaEntity(None, "app"))


@pytest.mark.parametrize(
    ("ops", "fragment"),
    [
        ({"producer_byte_rate": -1}, "non-negative"),
        ({"request_percentage": float("nan")}, "non-negative"),
        ({"consumer_byte_rate": 10.5}, "Long"),
        ({"no_such_quota": 1}, "Invalid configuration key"),
        ({"connection_creation_rate": 1}, "Invalid configuration key"),
    ],
)
def test_bad_values_are_invalid_request_and_nothing_stored(
    broker: Any, ops: dict[str, float], fragment: str
) -> None:
    async def action(admin: Admin) -> None:
        error = await failure(
            admin.alter_client_quotas({ALICE: {"producer_byte_rate": 5.0, **ops}})
        )
        assert error.errors[ALICE].code == ErrorCode.INVALID_REQUEST
        assert fragment in (error.errors[ALICE].message or "")
        assert await admin.describe_client_quotas() == {}

    run(broker, action)
    assert not broker.broker.store.exists("/config/users/alice")


def test_bad_entities_and_filters(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        conn: Connection = await admin.cluster.bootstrap()
        for entity in (
            [{"entity_type": "ip", "entity_name": "1.2.3.4"}],
            [{"entity_type": "group", "entity_name": "g"}],
            [{"entity_type": "user", "entity_name": "a"}, {"entity_type": "user",
                                                         "entity_name": "b"}],
            [],
        ):
            body = {
                "entries": [{"entity": entity, "ops": [
                    {"key": "producer_byte_rate", "value": 1.0, "remove": False}]}],
                "validate_only": False,
            }
            response = await conn.request(ApiKey.ALTER_CLIENT_QUOTAS, body, 1)
            assert [e["error_code"] for e in response["entries"]] == [ErrorCode.INVALID_REQUEST]
        for components in (
            [{"entity_type": "ip", "match_type": 2, "match": None}],
            [{"entity_type": "user", "match_type": 0, "match": None}],
            [{"entity_type": "user", "match_type": 7, "match": None}],
        ):
            for version in (0, 1):
                response = await conn.request(
                    ApiKey.DESCRIBE_CLIENT_QUOTAS,
                    {"components": components, "strict": False},
                    version,
                )
                assert response["error_code"] == ErrorCode.INVALID_REQUEST
        with pytest.raises(KafkaError) as info:
            await admin.describe_client_quotas([ClientQuotaFilterComponent.any("ip")])
        assert info.value.code == ErrorCode.INVALID_REQUEST
        assert await admin.describe_client_quotas() == {}

    run(broker, action)


def test_validate_only_stores_nothing(broker: Any) -> None:
    async def action(admin: Admin) -> None:
        await admin.alter_client_quotas({APP: {"producer_byte_rate": 10}}, validate_only=True)
        assert await admin.describe_client_quotas() == {}
        error = await failure(
            admin.alter_client_quotas({APP: {"producer_byte_rate": -10}}, validate_only=True)
        )
        assert error.errors[APP].code == ErrorCode.INVALID_REQUEST

    run(broker, action)
