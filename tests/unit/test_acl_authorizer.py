"""The ACL authorizer's decisions (Kafka's AclAuthorizer semantics) and the store layout,
over a real EmbeddedStore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logbus.controller.metadata_store import EmbeddedStore
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
from logbus.server.security.authorizer import Authorizer, host_of, parse_super_users
from logbus.server.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
Op = AclOperation


def binding(
    name: str,
    op: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    rtype: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, permission)
    )


@pytest.fixture
def store(tmp_path: Path) -> EmbeddedStore:
    return EmbeddedStore(tmp_path)


@pytest.fixture
def authorizer(store: EmbeddedStore) -> Authorizer:
    auth = Authorizer(store, super_users=["User:admin"])
    auth.start_listening()
    auth.load()
    return auth


def allowed(auth: Authorizer, op: AclOperation, name: str, who: KafkaPrincipal = ALICE) -> bool:
    return auth.authorize(who, "10.0.0.1", op, TOPIC, name)


def test_no_acl_refuses_unless_allow_everyone(store: EmbeddedStore) -> None:
    assert not allowed(Authorizer(store), Op.READ, "t")
    assert allowed(Authorizer(store, allow_everyone_if_no_acl_found=True), Op.READ, "t")


def test_allow_everyone_does_not_apply_once_a_resource_has_acls(store: EmbeddedStore) -> None:
    auth = Authorizer(store, allow_everyone_if_no_acl_found=True)
    auth.add(binding("t", Op.READ, principal="User:bob"))
    assert not allowed(auth, Op.READ, "t")
    assert allowed(auth, Op.READ, "other")


def test_literal_allow_and_implied_describe(authorizer: Authorizer) -> None:
    authorizer.add(binding("t", Op.WRITE))
    assert allowed(authorizer, Op.WRITE, "t")
    assert allowed(authorizer, Op.DESCRIBE, "t")  # implied by Write
    assert not allowed(authorizer, Op.READ, "t")
    assert not allowed(authorizer, Op.WRITE, "t2")
    assert not allowed(authorizer, Op.WRITE, "t", BOB)


def test_alter_configs_implies_describe_configs_and_all_implies_everything(
    authorizer: Authorizer,
) -> None:
    authorizer.add(binding("t", Op.ALTER_CONFIGS))
    assert allowed(authorizer, Op.DESCRIBE_CONFIGS, "t")
    assert not allowed(authorizer, Op.DESCRIBE, "t")
    authorizer.add(binding("u", Op.ALL))
    assert all(allowed(authorizer, op, "u") for op in (Op.READ, Op.DELETE, Op.ALTER_CONFIGS))


def test_deny_wins_over_allow(authorizer: Authorizer) -> None:
    authorizer.add(binding("t", Op.ALL))
    authorizer.add(binding("t", Op.WRITE, DENY))
    assert allowed(authorizer, Op.READ, "t")
    assert not allowed(authorizer, Op.WRITE, "t")
    # a Deny on All refuses Describe too; a wildcard principal's Deny covers alice
    authorizer.add(binding("*", Op.ALL, DENY, principal="User:*"))
    assert not allowed(authorizer, Op.READ, "t")


def test_prefixed_and_wildcard_patterns(authorizer: Authorizer) -> None:
    authorizer.add(binding("orders-", Op.READ, pattern=PREFIXED))
    assert allowed(authorizer, Op.READ, "orders-eu")
    assert allowed(authorizer, Op.READ, "orders-")
    assert not allowed(authorizer, Op.READ, "order")
    authorizer.add(binding("orders-secret", Op.READ, DENY, pattern=PREFIXED))
    assert not allowed(authorizer, Op.READ, "orders-secret-1")
    authorizer.add(binding("*", Op.WRITE))
    assert allowed(authorizer, Op.WRITE, "anything")


def test_hosts(authorizer: Authorizer) -> None:
    authorizer.add(binding("t", Op.READ, host="10.0.0.1"))
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "t")


def test_super_users_bypass_deny(authorizer: Authorizer) -> None:
    authorizer.add(binding("t", Op.ALL, DENY, principal="User:*"))
    admin = KafkaPrincipal("User", "admin")
    assert authorizer.authorize(admin, "h", Op.DELETE, TOPIC, "t")
    assert parse_super_users("User:a; User:b;") == {"User:a", "User:b"}


def test_authorize_by_resource_type(authorizer: Authorizer) -> None:
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    authorizer.add(binding("t", Op.WRITE))
    assert authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    assert not authorizer.authorize_by_resource_type(BOB, "h", Op.WRITE, TOPIC)
    authorizer.add(binding("*", Op.WRITE, DENY))
    assert not authorizer.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)


def test_stored_in_kafkas_layout_with_change_notifications(
    authorizer: Authorizer, store: EmbeddedStore
) -> None:
    authorizer.add(binding("t", Op.READ))
    authorizer.add(binding("pre", Op.WRITE, DENY, pattern=PREFIXED, rtype=GROUP))
    literal = json.loads(store.get("/kafka-acl/Topic/t")[0])
    assert literal == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    prefixed = json.loads(store.get("/kafka-acl-extended/prefixed/Group/pre")[0])
    assert prefixed["acls"][0]["permissionType"] == "Deny"
    [literal_change] = store.children("/kafka-acl-changes")
    assert literal_change.startswith("acl_changes_")
    assert store.get(f"/kafka-acl-changes/{literal_change}")[0] == b"Topic:t"
    [extended] = store.children("/kafka-acl-extended-changes")
    assert json.loads(store.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "version": 1,
        "resourceType": "Group",
        "name": "pre",
        "patternType": "PREFIXED",
    }


def test_a_second_authorizer_sees_changes_through_notifications(
    authorizer: Authorizer, store: EmbeddedStore
) -> None:
    other = Authorizer(store)
    other.start_listening()
    other.load()
    authorizer.add(binding("t", Op.READ))
    assert allowed(other, Op.READ, "t")
    removed = authorizer.remove(AclBindingFilter(TOPIC, "t", LITERAL))
    assert [b.entry.operation for b in removed] == [Op.READ]
    assert not allowed(other, Op.READ, "t")
    assert not store.exists("/kafka-acl/Topic/t")


def test_acls_written_by_kafka_are_loaded(store: EmbeddedStore) -> None:
    acls = {
        "principal": "User:alice",
        "permissionType": "Allow",
        "operation": "ClusterAction",
        "host": "*",
    }
    store.create(
        "/kafka-acl/Cluster/kafka-cluster", json.dumps({"version": 1, "acls": [acls]}).encode()
    )
    auth = Authorizer(store)
    auth.load()
    assert auth.authorize(ALICE, "h", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")


def test_filters_match_and_any(authorizer: Authorizer) -> None:
    authorizer.add(binding("orders-", Op.READ, pattern=PREFIXED))
    authorizer.add(binding("orders-eu", Op.WRITE))
    authorizer.add(binding("*", Op.DESCRIBE))
    authorizer.add(binding("other", Op.READ))
    match = authorizer.bindings(AclBindingFilter(TOPIC, "orders-eu", PatternType.MATCH))
    assert {b.pattern.name for b in match} == {"orders-", "orders-eu", "*"}
    every = authorizer.bindings(AclBindingFilter(TOPIC, None, PatternType.ANY))
    assert len(every) == 4
    prefixed = authorizer.bindings(AclBindingFilter(pattern_type=PREFIXED))
    assert [b.pattern.name for b in prefixed] == ["orders-"]


@pytest.mark.parametrize(
    "bad",
    [
        binding("t", Op.ANY),
        binding("t", Op.READ, AclPermissionType.ANY),
        binding("t", Op.READ, pattern=PatternType.MATCH),
        binding("t", Op.READ, rtype=ResourceType.ANY),
        binding("not-kafka-cluster", Op.ALTER, rtype=CLUSTER),
        binding("t", Op.READ, principal="alice"),
        binding("", Op.READ),
        binding("*", Op.READ, pattern=PREFIXED),
    ],
)
def test_invalid_bindings_are_refused(bad: AclBinding) -> None:
    with pytest.raises(AclError):
        validate_binding(bad)


def test_host_of_peers() -> None:
    assert host_of("127.0.0.1:5000") == "127.0.0.1"
    assert host_of("::1:5000") == "::1"
