"""Kafka's ACL model: resource patterns, access control entries, bindings and the filters
DescribeAcls and DeleteAcls match them with.

The enum values are the wire codes of Kafka's `ResourceType`, `PatternType`,
`AclOperation` and `AclPermissionType`; `name` gives the spelling Kafka stores in
ZooKeeper ("Topic", "Read", "Allow", ...).
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Self

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class AclError(ValueError):
    """An ACL or filter that Kafka refuses (INVALID_REQUEST on the wire)."""


class _Named(enum.IntEnum):
    """An enum with Kafka's stored spelling (`label`) and a parser accepting it in any
    case and with or without underscores (kafka-acls accepts "cluster_action")."""

    @property
    def label(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> Self:
        key = text.replace("_", "").replace("-", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == key:
                return member
        raise AclError(f"unknown {cls.__name__} {text!r}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def label(self) -> str:
        return "TransactionalId" if self is ResourceType.TRANSACTIONAL_ID else super().label


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def label(self) -> str:
        return self.name


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry


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


class AclBindingFilter(NamedTuple):
    """DescribeAcls / DeleteAcls' filter: None (or ANY) matches everything in its field;
    MATCH finds the literal, wildcard and prefixed patterns that apply to a name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        unknown = [
            field
            for field, value in (
                ("resource type", self.resource_type),
                ("pattern type", self.pattern_type),
                ("operation", self.operation),
                ("permission type", self.permission),
            )
            if value == 0
        ]
        if unknown:
            raise AclError(f"the filter has an unknown {', '.join(unknown)}")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        rtype = self.resource_type
        if rtype is not ResourceType.ANY and rtype != pattern.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type is PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return pattern.pattern_type is PatternType.PREFIXED and self.name.startswith(
                pattern.name
            )
        if self.pattern_type is not PatternType.ANY and self.pattern_type != pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (self.permission is AclPermissionType.ANY or self.permission == entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


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
