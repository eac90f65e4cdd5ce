"""DescribeClientQuotas v0-1 and AlterClientQuotas v0-1 (KIP-546), as Kafka's broker
answers them in ZooKeeper mode.

Quotas live with the other dynamic configs (`/config/users/<user>`,
`/config/clients/<client-id>`, `/config/users/<user>/clients/<client-id>`, names
sanitized, `<default>` for a default entity) and every change is announced with a config
change notification, so every broker applies it (`logbus.server.quotas`). A user's node
may also hold its SCRAM credentials: only quota keys are touched.

Authorization, as Kafka: DescribeClientQuotas needs DescribeConfigs on the cluster,
AlterClientQuotas AlterConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise,
nothing read or stored).

Checks (INVALID_REQUEST, nothing stored for the entity): an entity type other than
`user` and `client-id` (`ip` entities, connection_creation_rate, are not supported), a
type named twice, an unknown quota key, a negative or non-finite value, a fractional
byte rate. With `validate_only` nothing is written.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from logbus.controller.config_store import change_entity_config
from logbus.controller.metadata_store import MetadataStore, NoNode, StoreUnavailable
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
)
from logbus.protocol.messages.alter_client_quotas_response import (
    AlterClientQuotasResponse,
)
from logbus.protocol.messages.alter_client_quotas_response import (
    EntryData as AlterEntryResult,
)
from logbus.protocol.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from logbus.protocol.messages.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
)
from logbus.protocol.messages.describe_client_quotas_response import (
    EntryData as DescribeEntry,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.quotas.entity import (
    CLIENT_ID_TYPE,
    DEFAULT,
    LONG_KEYS,
    QUOTA_KEYS,
    USER_TYPE,
    USERS,
    QuotaEntity,
)
from logbus.server.quotas.manager import entity_config, load_all
from logbus.server.security.acl import AclOperation, ResourceType

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
T = TypeVar("T")


class QuotaRequestError(Exception):
    pass


async def _in_store_thread(ctx: RequestContext, work: Callable[[], T]) -> T:
    if ctx.config.uses_zookeeper:
        return await asyncio.to_thread(work)
    return work()


# --- AlterClientQuotas --------------------------------------------------------------------


def parse_entity(parts: list[EntityData]) -> QuotaEntity:
    names: dict[str, str] = {}
    for part in parts:
        kind = part["entity_type"]
        if kind not in (USER_TYPE, CLIENT_ID_TYPE):
            raise QuotaRequestError(f"Unhandled client quota entity type: {kind}")
        if kind in names:
            raise QuotaRequestError(f"Duplicate {kind} entity type in the quota entity")
        name = part["entity_name"]
        if name == "":
            raise QuotaRequestError(f"Empty {kind} name in the quota entity")
        names[kind] = DEFAULT if name is None else name
    if not names:
        raise QuotaRequestError("Invalid empty client quota entity")
    return QuotaEntity(names.get(USER_TYPE), names.get(CLIENT_ID_TYPE))


def apply_ops(current: dict[str, str], entry: EntryData) -> dict[str, str]:
    """The entity's stored config after the entry's operations; raises QuotaRequestError
    for a bad key or value."""
    result = dict(current)
    seen: set[str] = set()
    for op in entry["ops"]:
        key = op["key"]
        if key not in QUOTA_KEYS:
            raise QuotaRequestError(f"Invalid configuration key {key}")
        if key in seen:
            raise QuotaRequestError(f"Duplicate quota key {key}")
        seen.add(key)
        if op["remove"]:
            result.pop(key, None)
            continue
        value = op["value"]
        if not math.isfinite(value) or value < 0:
            raise QuotaRequestError(f"Invalid value {value} for {key}: must be non-negative")
        if key in LONG_KEYS:
            if value != int(value):
                raise QuotaRequestError(f"Configuration {key} must be a Long value")
            result[key] = str(int(value))
        else:
            result[key] = str(value)
    return result


def _write(store: MetadataStore, entity: QuotaEntity, configs: dict[str, str]) -> None:
    entity_type, name = entity.store_path()
    if entity_type == USERS and "/" in name:
        # the user's own node holds configs too (its quotas, SCRAM credentials): keep it
        # a config node even when only <user, client-id> quotas are set
        user = name.split("/", 1)[0]
        path = f"/config/{USERS}/{user}"
        try:
            data, _ = store.get(path)
        except NoNode:
            data = b""
        if not data:
            change_entity_config(store, USERS, user, entity_config(store, USERS, user))
    change_entity_config(store, entity_type, name, configs)


def _alter(store: MetadataStore, request: AlterClientQuotasRequest) -> list[AlterEntryResult]:
    results: list[AlterEntryResult] = []
    for entry in request["entries"]:
        result: AlterEntryResult = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "entity": [
                {"entity_type": p["entity_type"], "entity_name": p["entity_name"]}
                for p in entry["entity"]
            ],
        }
        try:
            entity = parse_entity(entry["entity"])
            current = entity_config(store, *entity.store_path())
            updated = apply_ops(current, entry)
            if not request["validate_only"] and updated != current:
                _write(store, entity, updated)
        except QuotaRequestError as exc:
            result["error_code"], result["error_message"] = ErrorCode.INVALID_REQUEST, str(exc)
        except StoreUnavailable as exc:
            result["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
            result["error_message"] = str(exc)
        results.append(result)
    return results


async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        refused: list[AlterEntryResult] = [
            {
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed.",
                "entity": [
                    {"entity_type": p["entity_type"], "entity_name": p["entity_name"]}
                    for p in entry["entity"]
                ],
            }
            for entry in request["entries"]
        ]
        return {"throttle_time_ms": 0, "entries": refused}
    store = ctx.services.store
    results = await _in_store_thread(ctx, lambda: _alter(store, request))
    return {"throttle_time_ms": 0, "entries": results}


# --- DescribeClientQuotas -----------------------------------------------------------------


def _matches(entity: QuotaEntity, components: list[ComponentData], strict: bool) -> bool:
    parts = dict(entity.components())
    for component in components:
        kind = component["entity_type"]
        if kind not in parts:
            return False
        name = parts[kind]
        match_type = component["match_type"]
        if match_type == MATCH_EXACT and name != component["match"]:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
        if match_type == MATCH_SPECIFIED and name is None:
            return False
    return not strict or len(parts) == len(components)


def check_components(components: list[ComponentData]) -> None:
    seen: set[str] = set()
    for component in components:
        kind = component["entity_type"]
        if kind not in (USER_TYPE, CLIENT_ID_TYPE):
            raise QuotaRequestError(f"Custom entity type '{kind}' not supported")
        if kind in seen:
            raise QuotaRequestError(f"Duplicate entity type '{kind}' in the filter")
        seen.add(kind)
        match_type = component["match_type"]
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaRequestError(f"Unexpected match type {match_type}")
        if match_type == MATCH_EXACT and component["match"] is None:
            raise QuotaRequestError(f"Exact match of entity type '{kind}' needs a name")


def describe(
    store: MetadataStore, components: list[ComponentData], strict: bool
) -> list[DescribeEntry]:
    return describe_entities(load_all(store), components, strict)


def describe_entities(
    configured: Mapping[QuotaEntity, Mapping[str, float]],
    components: list[ComponentData],
    strict: bool,
) -> list[DescribeEntry]:
    """The entries of `configured` that match the filter `components`."""
    entries: list[DescribeEntry] = []
    for entity, values in configured.items():
        if _matches(entity, components, strict):
            entries.append(
                {
                    "entity": [
                        {"entity_type": kind, "entity_name": name}
                        for kind, name in entity.components()
                    ],
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
                }
            )
    return entries


async def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": "Cluster authorization failed.",
            "entries": None,
        }
    components = request["components"]
    try:
        check_components(components)
    except QuotaRequestError as exc:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": str(exc),
            "entries": None,
        }
    if ctx.services.forwarding is not None:
        # a KRaft broker: the quotas its image holds (and it enforces)
        entries = describe_entities(ctx.services.quotas.configs, components, request["strict"])
    else:
        store = ctx.services.store
        entries = await _in_store_thread(
            ctx, lambda: describe(store, components, request["strict"])
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "entries": entries}


HANDLERS = [
    ApiHandler(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, handle_describe_client_quotas),
    ApiHandler(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, handle_alter_client_quotas),
]
