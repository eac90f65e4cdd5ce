"""Kafka's ACL codes on the wire: `ResourceType`, `PatternType`, `AclOperation` and
`AclPermissionType` with Kafka's numbers; `label` gives the spelling Kafka stores in
ZooKeeper and prints ("Topic", "Read", "Allow", "PREFIXED"). Shared by the broker's
authorizer and the client."""

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


MATCH_ALL = AclBindingFilter()
"""The filter every binding matches."""
