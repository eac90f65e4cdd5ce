"""Kafka's ACL model: resource patterns, access control entries, bindings and the filters
DescribeAcls and DeleteAcls match them with.

The enums (`protocol/acl_types.py`) carry the wire codes of Kafka's `ResourceType`,
`PatternType`, `AclOperation` and `AclPermissionType`.
"""

from __future__ import annotations

from logbus.protocol.acl_types import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
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

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclError",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
]

CONCRETE_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


def validate_binding(binding: AclBinding) -> None:
    """What Kafka's AclAuthorizer refuses to store; AclError says why."""
    pattern, entry = binding
    if pattern.resource_type not in CONCRETE_RESOURCE_TYPES:
        raise AclError(f"invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"invalid pattern type {pattern.pattern_type.name}")
    if not pattern.name:
        raise AclError("the resource name must not be empty")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource must be named {CLUSTER_NAME!r}")
    if pattern.pattern_type is PatternType.PREFIXED and pattern.name == WILDCARD_RESOURCE:
        raise AclError("a prefixed pattern cannot be the wildcard '*'")
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclError(f"invalid operation {entry.operation.name}")
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"invalid permission type {entry.permission.name}")
    validate_principal(entry.principal)
    if not entry.host:
        raise AclError("the host must not be empty (use '*' for every host)")


def validate_principal(principal: str) -> None:
    kind, colon, name = principal.partition(":")
    if not colon or not kind or not name:
        raise AclError(f"invalid principal {principal!r}: expected 'Type:name' (User:alice)")


def entry_to_json(entry: AccessControlEntry) -> dict[str, str]:
    """Kafka's stored form of one entry."""
    return {
        "principal": entry.principal,
        "permissionType": entry.permission.label,
        "operation": entry.operation.label,
        "host": entry.host,
    }


def entry_from_json(value: object) -> AccessControlEntry:
    if not isinstance(value, dict):
        raise AclError(f"an ACL entry must be an object, got {value!r}")
    try:
        return AccessControlEntry(
            str(value["principal"]),
            str(value["host"]),
            AclOperation.parse(str(value["operation"])),
            AclPermissionType.parse(str(value["permissionType"])),
        )
    except KeyError as exc:
        raise AclError(f"an ACL entry misses {exc}") from None
