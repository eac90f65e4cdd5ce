"""CreateAcls, DescribeAcls and DeleteAcls v0-3 (any broker answers them). Version 0 has
no pattern types: it can only create and match LITERAL patterns."""

from __future__ import annotations

from collections.abc import Sequence

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.common import send
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbus.protocol.messages import apis
from logbus.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from logbus.protocol.messages.create_acls_response import CreateAclsResponse
from logbus.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from logbus.protocol.messages.delete_acls_response import (
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from logbus.protocol.messages.describe_acls_request import DescribeAclsRequest
from logbus.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)


def _check_v0(version: int, pattern_type: PatternType, allowed: tuple[PatternType, ...]) -> None:
    if version == 0 and pattern_type not in allowed:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"the broker's ACL APIs are v0: {pattern_type.label} patterns need v1 or later",
        )


def build_create_acls(version: int, bindings: Sequence[AclBinding]) -> CreateAclsRequest:
    creations: list[AclCreation] = []
    for pattern, entry in bindings:
        _check_v0(version, pattern.pattern_type, (PatternType.LITERAL,))
        creations.append(
            {
                "resource_type": int(pattern.resource_type),
                "resource_name": pattern.name,
                "resource_pattern_type": int(pattern.pattern_type),
                "principal": entry.principal,
                "host": entry.host,
                "operation": int(entry.operation),
                "permission_type": int(entry.permission),
            }
        )
    return {"creations": creations}


def read_create_acls(
    response: CreateAclsResponse, bindings: Sequence[AclBinding]
) -> list[KafkaError | None]:
    """One result per binding, in order: None when created."""
    results: list[KafkaError | None] = []
    for index, _ in enumerate(bindings):
        if index >= len(response["results"]):
            results.append(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "CreateAcls left it out"))
            continue
        result = response["results"][index]
        code = result["error_code"]
        results.append(KafkaError(code, result["error_message"] or "") if code else None)
    return results


async def create_acls(conn: Connection, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
    version = conn.choose_version(ApiKey.CREATE_ACLS)
    body = build_create_acls(version, bindings)
    response = await send(conn, apis.CREATE_ACLS, body, version)
    return read_create_acls(response, bindings)


def _filter_fields(version: int, acl_filter: AclBindingFilter) -> DeleteAclsFilter:
    """A filter as both APIs write it (DescribeAcls' body is one DeleteAcls filter)."""
    _check_v0(version, acl_filter.pattern_type, (PatternType.LITERAL, PatternType.ANY))
    return {
        "resource_type_filter": int(acl_filter.resource_type),
        "resource_name_filter": acl_filter.name,
        "pattern_type_filter": int(acl_filter.pattern_type),
        "principal_filter": acl_filter.principal,
        "host_filter": acl_filter.host,
        "operation": int(acl_filter.operation),
        "permission_type": int(acl_filter.permission),
    }


def build_describe_acls(version: int, acl_filter: AclBindingFilter) -> DescribeAclsRequest:
    return _filter_fields(version, acl_filter)


def _binding(
    resource: DescribeAclsResource | DeleteAclsMatchingAcl,
    acl: AclDescription | DeleteAclsMatchingAcl,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType(resource["resource_type"]),
            resource["resource_name"],
            PatternType(resource.get("pattern_type", PatternType.LITERAL)),
        ),
        AccessControlEntry(
            acl["principal"],
            acl["host"],
            AclOperation(acl["operation"]),
            AclPermissionType(acl["permission_type"]),
        ),
    )


def read_describe_acls(response: DescribeAclsResponse) -> list[AclBinding]:
    if response["error_code"]:
        raise KafkaError(response["error_code"], response["error_message"] or "")
    return [_binding(r, acl) for r in response["resources"] for acl in r["acls"]]


async def describe_acls(conn: Connection, acl_filter: AclBindingFilter) -> list[AclBinding]:
    version = conn.choose_version(ApiKey.DESCRIBE_ACLS)
    body = build_describe_acls(version, acl_filter)
    response = await send(conn, apis.DESCRIBE_ACLS, body, version)
    return read_describe_acls(response)


def build_delete_acls(version: int, filters: Sequence[AclBindingFilter]) -> DeleteAclsRequest:
    return {"filters": [_filter_fields(version, f) for f in filters]}


def read_delete_acls(
    response: DeleteAclsResponse, filters: Sequence[AclBindingFilter]
) -> list[list[AclBinding] | KafkaError]:
    """Per filter, in order: the bindings deleted, or its error."""
    results: list[list[AclBinding] | KafkaError] = []
    for index, _ in enumerate(filters):
        if index >= len(response["filter_results"]):
            results.append(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "DeleteAcls left it out"))
            continue
        result = response["filter_results"][index]
        if result["error_code"]:
            results.append(KafkaError(result["error_code"], result["error_message"] or ""))
            continue
        results.append([_binding(m, m) for m in result["matching_acls"]])
    return results


async def delete_acls(
    conn: Connection, filters: Sequence[AclBindingFilter]
) -> list[list[AclBinding] | KafkaError]:
    version = conn.choose_version(ApiKey.DELETE_ACLS)
    body = build_delete_acls(version, filters)
    response = await send(conn, apis.DELETE_ACLS, body, version)
    return read_delete_acls(response, filters)
