"""CreateAcls, DescribeAcls and DeleteAcls v0-3, as Kafka's KafkaApis and AclAuthorizer
answer them.

Without an authorizer (authorizer.class.name unset) every answer is SECURITY_DISABLED.
Creating and deleting need Alter on the cluster, describing needs Describe
(CLUSTER_AUTHORIZATION_FAILED). A binding or filter Kafka refuses (an unknown or ANY
type, a MATCH pattern in a creation, an unreadable principal, a cluster resource not
named kafka-cluster) is INVALID_REQUEST and nothing is stored. Version 0 knows only
literal patterns: its filters match LITERAL ones (the schema's default).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from logbus.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from logbus.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from logbus.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from logbus.protocol.messages.describe_acls_request import DescribeAclsRequest
from logbus.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)

T = TypeVar("T")


def _enum(kind: type[T], code: int) -> T:
    try:
        return kind(code)  # type: ignore[call-arg]
    except ValueError:
        return kind(0)  # type: ignore[call-arg]


async def _run(ctx: RequestContext, action: Callable[[], T]) -> T:
    """Store writes: inline over the embedded store (it lives on the event loop), in a
    worker thread over ZooKeeper (its calls block)."""
    if ctx.config.uses_zookeeper:
        return await asyncio.to_thread(action)
    return action()


def binding_of(creation: AclCreation) -> AclBinding:
    binding = AclBinding(
        ResourcePattern(
            _enum(ResourceType, creation["resource_type"]),
            creation["resource_name"],
            _enum(PatternType, creation["resource_pattern_type"]),
        ),
        AccessControlEntry(
            creation["principal"],
            creation["host"],
            _enum(AclOperation, creation["operation"]),
            _enum(AclPermissionType, creation["permission_type"]),
        ),
    )
    validate_binding(binding)
    return binding


def filter_of(request: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    acl_filter = AclBindingFilter(
        _enum(ResourceType, request["resource_type_filter"]),
        request["resource_name_filter"],
        _enum(PatternType, request["pattern_type_filter"]),
        request["principal_filter"],
        request["host_filter"],
        _enum(AclOperation, request["operation"]),
        _enum(AclPermissionType, request["permission_type"]),
    )
    acl_filter.validate()
    return acl_filter


async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = ctx.services.authorizer

    def everyone(code: ErrorCode, message: str) -> CreateAclsResponse:
        return {
            "throttle_time_ms": 0,
            "results": [
                {"error_code": code, "error_message": message} for _ in request["creations"]
            ],
        }

    if authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    results: list[AclCreationResult] = []
    valid: list[tuple[int, AclBinding]] = []
    for creation in request["creations"]:
        try:
            valid.append((len(results), binding_of(creation)))
            results.append({"error_code": ErrorCode.NONE, "error_message": None})
        except AclError as exc:
            results.append(
                {"error_code": ErrorCode.INVALID_REQUEST, "error_message": f"Invalid ACL: {exc}"}
            )

    def create() -> None:
        for index, binding in valid:
            try:
                authorizer.add(binding)
            except Exception as exc:
                results[index] = {
                    "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                    "error_message": f"Failed to store the ACL: {exc}",
                }

    await _run(ctx, create)
    return {"throttle_time_ms": 0, "results": results}


async def handle_describe_acls(
    ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    authorizer = ctx.services.authorizer

    def error(code: ErrorCode, message: str) -> DescribeAclsResponse:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message,
            "resources": [],
        }

    if authorizer is None:
        return error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        acl_filter = filter_of(request)
    except AclError as exc:
        return error(ErrorCode.INVALID_REQUEST, str(exc))
    by_pattern: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in authorizer.bindings(acl_filter):
        entry = binding.entry
        by_pattern.setdefault(binding.pattern, []).append(
            {
                "principal": entry.principal,
                "host": entry.host,
                "operation": entry.operation,
                "permission_type": entry.permission,
            }
        )
    resources: list[DescribeAclsResource] = [
        {
            "resource_type": pattern.resource_type,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type,
            "acls": sorted(acls, key=lambda a: (a["principal"], a["operation"], a["host"])),
        }
        for pattern, acls in sorted(by_pattern.items())
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


def _matching(binding: AclBinding) -> DeleteAclsMatchingAcl:
    pattern, entry = binding
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }


async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = ctx.services.authorizer

    def everyone(code: ErrorCode, message: str) -> DeleteAclsResponse:
        return {
            "throttle_time_ms": 0,
            "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []}
                for _ in request["filters"]
            ],
        }

    if authorizer is None:
        return everyone(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return everyone(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    filters: list[AclBindingFilter | str] = []
    for raw in request["filters"]:
        try:
            filters.append(filter_of(raw))
        except AclError as exc:
            filters.append(str(exc))

    def delete() -> list[DeleteAclsFilterResult]:
        results: list[DeleteAclsFilterResult] = []
        for acl_filter in filters:
            if isinstance(acl_filter, str):
                results.append(
                    {
                        "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": acl_filter,
                        "matching_acls": [],
                    }
                )
                continue
            removed = authorizer.remove(acl_filter)
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "matching_acls": [_matching(b) for b in sorted(removed)],
                }
            )
        return results

    return {"throttle_time_ms": 0, "filter_results": await _run(ctx, delete)}


HANDLERS = [
    ApiHandler(ApiKey.CREATE_ACLS, 0, 3, handle_create_acls),
    ApiHandler(ApiKey.DESCRIBE_ACLS, 0, 3, handle_describe_acls),
    ApiHandler(ApiKey.DELETE_ACLS, 0, 3, handle_delete_acls),
]
