"""ACLs in the metadata store, in Kafka's ZooKeeper layout (what `kafka-acls
--authorizer-properties zookeeper.connect=...` and Kafka's AclAuthorizer read and write):

- literal patterns: `/kafka-acl/<ResourceType>/<name>`,
- prefixed patterns: `/kafka-acl-extended/prefixed/<ResourceType>/<name>`,

each holding `{"version": 1, "acls": [{"principal", "permissionType", "operation",
"host"}]}`, written with a compare-and-set on the node's version. Every change also
creates a sequential node naming the resource: `/kafka-acl-changes/acl_changes_<seq>`
holding "Topic:name" for a literal pattern, `/kafka-acl-extended-changes/acl_changes_<seq>`
holding `{"version": 1, "resourceType", "name", "patternType"}` for a prefixed one. Every
broker's `AclChangeListener` watches both and reloads the named resource.

Blocking (ZooKeeper) or on the event loop (the embedded store), like the store itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

from logbus.controller.change_notifications import ChangeNotificationListener
from logbus.controller.metadata_store import BadVersion, MetadataStore, NodeExists, NoNode
from logbus.server.security.acl import (
    AccessControlEntry,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    entry_from_json,
    entry_to_json,
)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
STORED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)

log = logging.getLogger(__name__)

Acls = frozenset[AccessControlEntry]


def _root(pattern_type: PatternType) -> str:
    return PREFIXED_ROOT if pattern_type is PatternType.PREFIXED else LITERAL_ROOT


def pattern_path(pattern: ResourcePattern) -> str:
    return f"{_root(pattern.pattern_type)}/{pattern.resource_type.label}/{pattern.name}"


def _decode(data: bytes) -> Acls:
    value = json.loads(data) if data else {}
    if not isinstance(value, dict):
        raise AclError("stored ACLs must be a JSON object")
    entries = value.get("acls", [])
    return frozenset(entry_from_json(e) for e in entries) if isinstance(entries, list) else Acls()


def _encode(acls: Iterable[AccessControlEntry]) -> bytes:
    ordered = sorted(acls, key=lambda e: (e.principal, e.host, e.operation, e.permission))
    return json.dumps({"version": 1, "acls": [entry_to_json(e) for e in ordered]}).encode()


class AclStore:
    """Reads and writes the ACLs of resource patterns."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def read(self, pattern: ResourcePattern) -> tuple[Acls, int]:
        """(entries, node version); version -1 when the node does not exist."""
        try:
            data, version = self.store.get(pattern_path(pattern))
        except NoNode:
            return Acls(), -1
        try:
            return _decode(data), version
        except (ValueError, AclError) as exc:
            log.error("ignoring unreadable ACLs of %s: %s", pattern_path(pattern), exc)
            return Acls(), version

    def load_all(self) -> dict[ResourcePattern, Acls]:
        acls: dict[ResourcePattern, Acls] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type in STORED_TYPES:
                parent = f"{_root(pattern_type)}/{resource_type.label}"
                try:
                    names = self.store.children(parent)
                except NoNode:
                    continue
                for name in names:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries, _ = self.read(pattern)
                    if entries:
                        acls[pattern] = entries
        return acls

    def update(self, pattern: ResourcePattern, change: Callable[[Acls], Acls]) -> Acls:
        """Apply `change` to the stored entries with a compare-and-set (retried when another
        writer got there first), notify every broker, and return the new entries."""
        path = pattern_path(pattern)
        while True:
            current, version = self.read(pattern)
            new = change(current)
            if new == current:
                return current
            try:
                with self.store.batch():
                    if version < 0:
                        self.store.create(path, _encode(new))
                    elif new:
                        self.store.set(path, _encode(new), version)
                    else:
                        self.store.delete(path, expected_version=version)
                    self._notify(pattern)
            except (BadVersion, NodeExists, NoNode):
                continue
            return new

    def _notify(self, pattern: ResourcePattern) -> None:
        if pattern.pattern_type is PatternType.LITERAL:
            parent = LITERAL_CHANGES
            data = f"{pattern.resource_type.label}:{pattern.name}".encode()
        else:
            parent = EXTENDED_CHANGES
            data = json.dumps(
                {
                    "version": 1,
                    "resourceType": pattern.resource_type.label,
                    "name": pattern.name,
                    "patternType": pattern.pattern_type.label,
                }
            ).encode()
        self.store.create(f"{parent}/{CHANGE_PREFIX}", data, sequential=True)


def parse_notification(parent: str, data: bytes) -> ResourcePattern:
    """The resource pattern a change notification names (AclError when unreadable)."""
    if parent == LITERAL_CHANGES:
        type_label, colon, name = data.decode().partition(":")
        if not colon:
            raise AclError(f"bad ACL change notification {data!r}")
        return ResourcePattern(ResourceType.parse(type_label), name, PatternType.LITERAL)
    value = json.loads(data)
    if not isinstance(value, dict):
        raise AclError(f"bad ACL change notification {data!r}")
    return ResourcePattern(
        ResourceType.parse(str(value["resourceType"])),
        str(value["name"]),
        PatternType.parse(str(value["patternType"])),
    )


class AclChangeListener:
    """Watches both notification paths and calls `on_change(pattern)` for every new
    notification. `run` decides where processing happens: inline (the embedded store
    fires watches on the broker's loop) or on a thread of its own (ZooKeeper)."""

    def __init__(
        self,
        store: MetadataStore,
        on_change: Callable[[ResourcePattern], None],
        run: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.on_change = on_change
        self._paths = [
            ChangeNotificationListener(store, parent, CHANGE_PREFIX, self._applier(parent), run)
            for parent in (LITERAL_CHANGES, EXTENDED_CHANGES)
        ]

    def start(self) -> None:
        """Skip the notifications present (the caller has just loaded every ACL) and
        watch for new ones."""
        for listener in self._paths:
            listener.start()

    def stop(self) -> None:
        for listener in self._paths:
            listener.stop()

    def process(self) -> None:
        for listener in self._paths:
            listener.process()

    def _applier(self, parent: str) -> Callable[[str, bytes], None]:
        def apply(child: str, data: bytes) -> None:
            try:
                pattern = parse_notification(parent, data)
            except (ValueError, KeyError, AclError) as exc:
                log.error("ignoring ACL change notification %s: %s", child, exc)
                return
            try:
                self.on_change(pattern)
            except Exception:
                log.exception("cannot apply the ACL change of %s", pattern)

        return apply
