"""DescribeClientQuotas v0-1 and AlterClientQuotas v0-1 (KIP-546).

An entity is a tuple of (entity type, name) pairs, sorted by type: ("user", "alice"),
("client-id", None) for the default client id. A filter component is (entity type,
match type, name): match type 0 an exact name, 1 the default entity, 2 any named one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest
from logbus.protocol.messages.alter_client_quotas_response import AlterClientQuotasResponse
from logbus.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from logbus.protocol.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
    EntityData,
)

Entity = tuple[tuple[str, str | None], ...]
Component = tuple[str, int, str | None]
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def entity_of(parts: Sequence[EntityData]) -> Entity:
    return tuple(sorted((str(p["entity_type"]), p["entity_name"]) for p in parts))


def build_describe_client_quotas(
    version: int, components: Sequence[Component], *, strict: bool = False
) -> DescribeClientQuotasRequest:
    return {
        "components": [
            {"entity_type": kind, "match_type": match_type, "match": match}
            for kind, match_type, match in components
        ],
        "strict": strict,
    }


def read_describe_client_quotas(
    response: DescribeClientQuotasResponse,
) -> dict[Entity, dict[str, float]]:
    check(response["error_code"], response["error_message"])
    return {
        entity_of(entry["entity"]): {v["key"]: float(v["value"]) for v in entry["values"]}
        for entry in response["entries"] or []
    }


async def describe_client_quotas(
    conn: Connection, components: Sequence[Component], *, strict: bool = False
) -> dict[Entity, dict[str, float]]:
    version = conn.choose_version(ApiKey.DESCRIBE_CLIENT_QUOTAS)
    body = build_describe_client_quotas(version, components, strict=strict)
    response = await send(conn, apis.DESCRIBE_CLIENT_QUOTAS, body, version)
    return read_describe_client_quotas(response)


def build_alter_client_quotas(
    version: int,
    alterations: Mapping[Entity, Mapping[str, float | None]],
    *,
    validate_only: bool = False,
) -> AlterClientQuotasRequest:
    """`alterations`: per entity, quota key -> new value (None removes the quota)."""
    return {
        "entries": [
            {
                "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
                "ops": [
                    {"key": key, "value": 0.0 if value is None else float(value),
                     "remove": value is None}
                    for key, value in ops.items()
                ],
            }
            for entity, ops in alterations.items()
        ],
        "validate_only": validate_only,
    }


def read_alter_client_quotas(
    response: AlterClientQuotasResponse, asked: Sequence[Entity]
) -> dict[Entity, KafkaError | None]:
    """Each entity's error (None when it was changed); an entity the broker did not
    answer is UNKNOWN_SERVER_ERROR."""
    results: dict[Entity, KafkaError | None] = {}
    for entry in response["entries"]:
        code = entry["error_code"]
        error = None if code == ErrorCode.NONE else KafkaError(code, entry["error_message"])
        results[entity_of(entry["entity"])] = error
    for entity in asked:
        if entity not in results:
            results[entity] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "not answered")
    return results


async def alter_client_quotas(
    conn: Connection,
    alterations: Mapping[Entity, Mapping[str, float | None]],
    *,
    validate_only: bool = False,
) -> dict[Entity, KafkaError | None]:
    version = conn.choose_version(ApiKey.ALTER_CLIENT_QUOTAS)
    body = build_alter_client_quotas(version, alterations, validate_only=validate_only)
    response = await send(conn, apis.ALTER_CLIENT_QUOTAS, body, version)
    return read_alter_client_quotas(response, list(alterations))
