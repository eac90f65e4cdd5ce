"""Authorization tests' helpers: a broker with the ACL authorizer whose connections get a
principal from the client id, and wire calls made as a principal.

Until SASL lands (sec-net), principals are assigned by a test-only hook: a connection whose
requests carry the client id "User:alice" is User:alice (any other client id stays
User:ANONYMOUS). The hook wraps the listeners' frame handler; nothing in the broker knows
about it. The same tests run over SASL/PLAIN by replacing `call` with an authenticated
connection.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from brokers import RunningBroker
from logbus.client.connection import Connection
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
from logbus.server.network.connection import Connection as BrokerConnection
from logbus.server.security.principal import KafkaPrincipal

ADMIN = "User:admin"
ALICE = "User:alice"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SECURED = {"authorizer_class_name": AUTHORIZER, "super_users": ADMIN}


def _client_id(frame: memoryview) -> str | None:
    if len(frame) < 10:
        return None
    (length,) = struct.unpack_from(">h", frame, 8)
    if length < 0 or len(frame) < 10 + length:
        return None
    return bytes(frame[10 : 10 + length]).decode("utf-8", "replace")


def assign_principals(running: RunningBroker) -> None:
    """Test hook: every connection to the broker takes the principal its client id names
    ("User:alice"), else stays anonymous. Call again after a restart."""
    assert running.broker is not None
    for listener in running.broker.listeners:
        inner = listener.handler

        async def handler(conn: BrokerConnection, frame: memoryview, inner: Any = inner) -> Any:
            client_id = _client_id(frame)
            if client_id and client_id.startswith("User:"):
                conn.principal = KafkaPrincipal.parse(client_id)
            return await inner(conn, frame)

        listener.handler = handler


def secured(broker_factory: Any, **overrides: str) -> RunningBroker:
    running: RunningBroker = broker_factory(**{**SECURED, **overrides})
    assign_principals(running)
    return running


async def _call(
    bootstrap: str, principal: str, api_key: int, body: dict[str, Any], version: int | None
) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)
    conn = await Connection.connect(host, int(port), client_id=principal)
    try:
        return await conn.request(api_key, body, version)
    finally:
        await conn.close()


def call(
    bootstrap: str,
    principal: str,
    api_key: int,
    body: dict[str, Any],
    version: int | None = None,
) -> dict[str, Any]:
    """One request as `principal` on a fresh connection; the decoded response."""
    return asyncio.run(_call(bootstrap, principal, api_key, body, version))


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    principal: str = ALICE,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def grant(bootstrap: str, *bindings: AclBinding) -> None:
    """CreateAcls as the super user; every creation must succeed."""
    creations = [
        {
            "resource_type": b.pattern.resource_type,
            "resource_name": b.pattern.name,
            "resource_pattern_type": b.pattern.pattern_type,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation,
            "permission_type": b.entry.permission,
        }
        for b in bindings
    ]
    response = call(bootstrap, ADMIN, ApiKey.CREATE_ACLS, {"creations": creations})
    assert [r["error_code"] for r in response["results"]] == [0] * len(bindings), response


def acl_filter(**fields: Any) -> dict[str, Any]:
    """A DescribeAcls / DeleteAcls filter body matching every ACL but for `fields` (the
    nullable strings must be sent as null: the codec's default for them is "")."""
    f = AclBindingFilter()
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": None,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": None,
        "host_filter": None,
        "operation": f.operation,
        "permission_type": f.permission,
        **fields,
    }


def revoke_all(bootstrap: str) -> None:
    body = {"filters": [acl_filter()]}
    response = call(bootstrap, ADMIN, ApiKey.DELETE_ACLS, body)
    assert response["filter_results"][0]["error_code"] == 0, response


def create_topic(bootstrap: str, name: str, partitions: int = 1, *, exist_ok: bool = False) -> None:
    """Create a topic as the super user `ADMIN` (CreateTopics over the wire)."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 10_000,
    }
    r = call(bootstrap, ADMIN, ApiKey.CREATE_TOPICS, body)
    allowed = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS) if exist_ok else (ErrorCode.NONE,)
    assert r["topics"][0]["error_code"] in allowed, r
