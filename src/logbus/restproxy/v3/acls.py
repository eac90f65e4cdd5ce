"""The v3 ACL resources: `GET .../acls` (the bindings matching the query's filter),
`POST .../acls` (one binding) and `.../acls:batch` (several), `DELETE .../acls` (the
bindings matching a filter that names the resource type, pattern type, operation and
permission, as Confluent's proxy requires). Enum values are Kafka's names (`TOPIC`,
`PREFIXED`, `DESCRIBE_CONFIGS`, `ALLOW`), in any case."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbus.restproxy.v3.resources import (
    Links,
    V3Response,
    admin,
    bad_request,
    invalid_payload,
    links,
    object_body,
)

# (query parameter / field, enum) in Confluent's order
_ENUMS: tuple[tuple[str, Any], ...] = (
    ("resource_type", ResourceType),
    ("pattern_type", PatternType),
    ("operation", AclOperation),
    ("permission", AclPermissionType),
)


def _query(binding: AclBinding) -> dict[str, str]:
    pattern, entry = binding
    return {
        "resource_type": pattern.resource_type.name,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permission": entry.permission.name,
    }


def acl_json(site: Links, binding: AclBinding) -> dict[str, Any]:
    fields = _query(binding)
    body: dict[str, Any] = {
        "kind": "KafkaAcl", "metadata": {"self": site.url("acls", query=fields)},
        "cluster_id": site.cluster,
    }
    body.update(fields)
    return body


def _sorted(bindings: list[AclBinding]) -> list[AclBinding]:
    return sorted(bindings, key=lambda b: (
        b.pattern.resource_type.name, b.pattern.pattern_type.name, b.entry.principal,
        b.entry.host, b.entry.operation.name, b.entry.permission.name, b.pattern.name,
    ))


def _enum(name: str, enum: Any, text: str) -> Any:
    try:
        return enum.parse(text)
    except AclError:
        raise bad_request(f"Invalid {name}: {text}") from None


def acl_filter(request: Request, *, required: bool) -> AclBindingFilter:
    """The filter a GET or DELETE query names (400 for an UNKNOWN or missing enum where
    one is required, or a value that is not one)."""
    q = request.query_params
    values: dict[str, Any] = {}
    for name, enum in _ENUMS:
        text = q.get(name, "unknown" if required else "any")
        value = _enum(name, enum, text)
        if value.name == "UNKNOWN":
            detail = "unspecified or UNKNOWN" if required else "UNKNOWN"
            raise bad_request(f"{name} cannot be {detail}")
        values[name] = value
    return AclBindingFilter(
        resource_type=values["resource_type"],
        name=q.get("resource_name") or None,
        pattern_type=values["pattern_type"],
        principal=q.get("principal") or None,
        host=q.get("host") or None,
        operation=values["operation"],
        permission=values["permission"],
    )


def acl_binding(item: Any) -> AclBinding:
    """One binding of a create request (422 for a missing field, 400 for a value that
    cannot name a binding: ANY, MATCH or UNKNOWN)."""
    if not isinstance(item, dict):
        raise invalid_payload("Each ACL is a JSON object.")
    missing = [
        f for f in ("resource_type", "resource_name", "pattern_type", "principal", "host",
                    "operation", "permission")
        if not isinstance(item.get(f), str)
    ]
    if missing:
        raise invalid_payload(f"Missing {', '.join(missing)}.")
    values = {name: _enum(name, enum, item[name]) for name, enum in _ENUMS}
    for name, value in values.items():
        if value.name in ("UNKNOWN", "ANY", "MATCH"):
            raise bad_request(f"{name} cannot be {value.name}")
    return AclBinding(
        ResourcePattern(values["resource_type"], item["resource_name"], values["pattern_type"]),
        AccessControlEntry(
            item["principal"], item["host"], values["operation"], values["permission"]
        ),
    )


async def search_acls(request: Request) -> Any:
    site = await links(request)
    wanted = acl_filter(request, required=False)
    found = await admin(request).describe_acls(wanted)
    return site.collection(
        "KafkaAclList", ("acls",), [acl_json(site, b) for b in _sorted(found)],
        query=dict(request.query_params.items()),
    )


async def _create(request: Request, bindings: list[AclBinding]) -> Response:
    await admin(request).create_acls(bindings)
    response = Response(status_code=201)
    if len(bindings) == 1:
        site = Links(request, request.path_params["cluster_id"])
        response.headers["location"] = site.url("acls", query=_query(bindings[0]))
    return response


async def create_acl(request: Request) -> Any:
    await links(request)
    return await _create(request, [acl_binding(await object_body(request))])


async def create_acls(request: Request) -> Any:
    await links(request)
    data = (await object_body(request)).get("data")
    if not isinstance(data, list) or not data:
        raise invalid_payload("Request body is empty. Data is required.")
    return await _create(request, [acl_binding(item) for item in data])


async def delete_acls(request: Request) -> Any:
    site = await links(request)
    wanted = acl_filter(request, required=True)
    deleted = (await admin(request).delete_acls([wanted]))[wanted]
    return V3Response({"data": [acl_json(site, b) for b in _sorted(deleted)]})


_ACLS = "/v3/clusters/{cluster_id}/acls"
ROUTES: list[tuple[str, Any, list[str]]] = [
    (_ACLS, search_acls, ["GET"]),
    (_ACLS, create_acl, ["POST"]),
    (_ACLS, delete_acls, ["DELETE"]),
    (_ACLS + ":batch", create_acls, ["POST"]),
]
