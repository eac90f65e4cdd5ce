"""The ACL authorizer, with the semantics of Kafka's AclAuthorizer (ZooKeeper mode).

A request is allowed when its principal is a super user (`super.users`); otherwise the
ACLs that apply to the resource are gathered (the literal pattern of its name, the
literal wildcard "*", and every prefixed pattern its name starts with). With none,
`allow.everyone.if.no.acl.found` decides. A Deny entry matching the principal (or
`User:*`), host (or "*") and operation (or All) refuses; Deny wins over every Allow.
Else an Allow entry for the operation, or one implying it, allows: Describe is implied
by Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs; All implies
everything.

The ACLs are cached in memory, loaded from the metadata store at start-up and kept
current by change notifications (`acl_store.AclChangeListener`). The cache is replaced
as a whole on every change, so a request reads one consistent snapshot even while the
change thread (ZooKeeper mode) updates it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from logbus.controller.metadata_store import MetadataStore
from logbus.protocol.acl_types import MATCH_ALL
from logbus.server.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbus.server.security.acl_store import AclChangeListener, Acls, AclStore
from logbus.server.security.principal import KafkaPrincipal

AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
"""The `authorizer.class.name` values that enable this authorizer (Kafka's names, so that
existing server.properties files work); empty disables authorization."""

log = logging.getLogger(__name__)

_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by ';' (Kafka's separator)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def host_of(peer: str) -> str:
    """The address of a "host:port" peer (IPv6 addresses keep their colons)."""
    host, colon, _port = peer.rpartition(":")
    return host.strip("[]") if colon else peer


class Authorizer:
    def __init__(
        self,
        store: MetadataStore,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.acl_store = AclStore(store)
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, Acls] = {}
        self._lock = threading.Lock()
        self._listener: AclChangeListener | None = None

    # --- cache ------------------------------------------------------------------------

    def load(self) -> None:
        """Read every ACL (blocking with ZooKeeper: call it off the event loop)."""
        loaded = self.acl_store.load_all()
        with self._lock:
            self._acls = loaded

    def start_listening(self, run: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Follow change notifications (see `AclChangeListener` for `run`)."""
        self._listener = AclChangeListener(self.acl_store.store, self.reload, run)
        self._listener.start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()

    def reload(self, pattern: ResourcePattern) -> None:
        entries, _ = self.acl_store.read(pattern)
        self._put(pattern, entries)

    def set_acls(self, acls: Mapping[ResourcePattern, Acls]) -> None:
        """Every ACL at once, as a KRaft broker's metadata image holds them."""
        with self._lock:
            self._acls = {pattern: entries for pattern, entries in acls.items() if entries}

    def _put(self, pattern: ResourcePattern, entries: Acls) -> None:
        # writers (the change thread, ACL requests' worker threads) copy and replace the
        # cache one at a time; readers take the current dict without a lock
        with self._lock:
            acls = dict(self._acls)
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
            self._acls = acls

    # --- administration (blocking with ZooKeeper) -------------------------------------

    def add(self, binding: AclBinding) -> None:
        new = self.acl_store.update(binding.pattern, lambda acls: acls | {binding.entry})
        self._put(binding.pattern, new)

    def bindings(self, acl_filter: AclBindingFilter = MATCH_ALL) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            if acl_filter.matches_pattern(pattern)
            for entry in entries
            if acl_filter.matches_entry(entry)
        ]

    def remove(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Delete every binding matching the filter; returns those deleted."""
        removed: list[AclBinding] = []
        for pattern in sorted({b.pattern for b in self.bindings(acl_filter)}):
            # a retried compare-and-set calls `drop` again: the last call's answer counts
            gone: list[set[AccessControlEntry]] = [set()]

            def drop(acls: Acls, gone: list[set[AccessControlEntry]] = gone) -> Acls:
                gone[0] = {e for e in acls if acl_filter.matches_entry(e)}
                return acls - gone[0]

            new = self.acl_store.update(pattern, drop)
            removed.extend(AclBinding(pattern, e) for e in gone[0])
            self._put(pattern, new)
        return removed

    # --- decisions --------------------------------------------------------------------

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        acls = self._acls
        found: list[AccessControlEntry] = []
        for key in (
            ResourcePattern(resource_type, name, PatternType.LITERAL),
            ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL),
        ):
            found.extend(acls.get(key, ()))
        for end in range(1, len(name) + 1):
            found.extend(
                acls.get(ResourcePattern(resource_type, name[:end], PatternType.PREFIXED), ())
            )
        return found

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        entries = self.matching_acls(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        if _any_match(entries, who, host, (operation,), AclPermissionType.DENY):
            return False
        implied = _IMPLIED.get(operation, frozenset({operation}))
        return _any_match(entries, who, host, implied, AclPermissionType.ALLOW)

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether the principal may perform `operation` on at least one resource of the
        type (Kafka's `authorizeByResourceType`, used by InitProducerId without a
        transactional id): an Allow for it on some pattern not denied wholesale (a Deny
        on the literal wildcard, or on a prefix of that pattern's name)."""
        who = str(principal)
        if who in self.super_users:
            return True
        acls = self._acls
        typed = {p: e for p, e in acls.items() if p.resource_type == resource_type}
        if not typed:
            return self.allow_everyone_if_no_acl_found
        ops = (operation,)
        wildcard = ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL)
        if _any_match(typed.get(wildcard, ()), who, host, ops, AclPermissionType.DENY):
            return False
        denied_prefixes = [
            p.name
            for p, entries in typed.items()
            if p.pattern_type is PatternType.PREFIXED
            and _any_match(entries, who, host, ops, AclPermissionType.DENY)
        ]
        denied_literals = {
            p.name
            for p, entries in typed.items()
            if p.pattern_type is PatternType.LITERAL
            and _any_match(entries, who, host, ops, AclPermissionType.DENY)
        }
        for pattern, entries in typed.items():
            if not _any_match(entries, who, host, ops, AclPermissionType.ALLOW):
                continue
            if any(pattern.name.startswith(prefix) for prefix in denied_prefixes):
                continue
            if pattern.pattern_type is PatternType.LITERAL and pattern.name in denied_literals:
                continue
            return True
        return False


def _any_match(
    entries: Iterable[AccessControlEntry],
    principal: str,
    host: str,
    operations: Iterable[AclOperation],
    permission: AclPermissionType,
) -> bool:
    ops = set(operations)
    for entry in entries:
        if entry.permission != permission:
            continue
        if entry.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if entry.host not in (host, WILDCARD_HOST):
            continue
        if entry.operation is AclOperation.ALL or entry.operation in ops:
            return True
    return False
