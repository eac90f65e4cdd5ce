"""AlterUserScramCredentials and DescribeUserScramCredentials v0 (KIP-554).

Credentials live in the metadata store as Kafka's ZooKeeper mode keeps them
(`security/credential_cache.py`); the broker handling an alteration writes them and the
change notification reaches every broker. Per-user errors as Kafka: a user named twice
(DUPLICATE_RESOURCE), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations
outside 4096..16384, an empty name or salt (UNACCEPTABLE_CREDENTIAL), deleting or
describing a credential that does not exist or an empty name (RESOURCE_NOT_FOUND). A
describe naming no user (a null or an empty array) describes every user with credentials.
Altering needs Alter on the cluster, describing Describe (CLUSTER_AUTHORIZATION_FAILED
otherwise), as in Kafka.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any, TypeVar

from logbus.common.security.scram import (
    MECHANISM_TYPES,
    ScramCredential,
    alteration_error,
    mechanism_type,
)
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclOperation, ResourceType
from logbus.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from logbus.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from logbus.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from logbus.protocol.messages.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from logbus.server.api import ApiHandler, RequestContext
from logbus.server.security.credential_cache import (
    alter_credentials,
    stored_credentials,
    users_with_configs,
)

T = TypeVar("T")


async def _off_loop(ctx: RequestContext, work: Callable[[], T]) -> T:
    """Inline over the embedded store; on a worker thread over ZooKeeper."""
    if not ctx.services.in_cluster:
        return work()
    return await asyncio.to_thread(work)


def _result(user: str, code: int = ErrorCode.NONE, message: str | None = None) -> Any:
    return {"user": user, "error_code": code, "error_message": message}


def _alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> list[Any]:
    """Every user's changes are applied together, or none of them when one is refused."""
    store = ctx.services.store
    entries: list[dict[str, Any]] = [dict(d) for d in request.get("deletions") or []]
    entries += [dict(u) for u in request.get("upsertions") or []]
    pairs = collections.Counter((e["name"], e["mechanism"]) for e in entries)
    errors: dict[str, tuple[int, str]] = {}
    changes: dict[str, tuple[dict[str, ScramCredential], list[str]]] = {}
    for entry in entries:
        user = entry["name"]
        if user in errors:
            continue
        error = alteration_error(entry, pairs[(user, entry["mechanism"])] > 1)
        if error is not None:
            errors[user] = error
            continue
        mechanism = MECHANISM_TYPES[entry["mechanism"]]
        upserts, removed = changes.setdefault(user, ({}, []))
        if "salted_password" in entry:
            salted, salt = bytes(entry["salted_password"]), bytes(entry["salt"])
            upserts[mechanism] = ScramCredential.from_salted(
                salted, salt, entry["iterations"], mechanism
            )
        elif mechanism in stored_credentials(store, user):
            removed.append(mechanism)
        else:
            errors[user] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    results = []
    for user in dict.fromkeys(e["name"] for e in entries):
        if user in errors:
            results.append(_result(user, *errors[user]))
            continue
        upserts, removed = changes[user]
        alter_credentials(store, user, upserts, removed)
        results.append(_result(user))
    return results


def _described(user: str, credentials: dict[str, ScramCredential]) -> Any:
    infos = [
        {"mechanism": mechanism_type(m), "iterations": c.iterations}
        for m, c in sorted(credentials.items())
    ]
    return {**_result(user), "credential_infos": infos}


def _refused(user: str, code: int, message: str) -> Any:
    return {**_result(user, code, message), "credential_infos": []}


def _describe(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> list[Any]:
    """A null or empty `users` describes every user with credentials, sorted by name;
    users named are answered once each, in the order first named (Kafka's
    `describeUserScramCredentials`)."""
    store = ctx.services.store
    cache = ctx.services.credentials
    if ctx.services.forwarding is not None and cache is not None:
        # a KRaft broker: the credentials its image holds (and its logins check)
        users: Callable[[], list[str]] = cache.users
        credentials_of: Callable[[str], dict[str, ScramCredential]] = cache.credentials_of
    else:
        users = lambda: users_with_configs(store)  # noqa: E731
        credentials_of = lambda user: stored_credentials(store, user)  # noqa: E731
    names = [u["name"] for u in request.get("users") or []]
    if not names:
        everyone = ((user, credentials_of(user)) for user in users())
        return [_described(user, credentials) for user, credentials in everyone if credentials]
    counts = collections.Counter(names)
    results: list[Any] = []
    for user in dict.fromkeys(names):
        if not user:
            results.append(
                _refused(user, ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty")
            )
        elif counts[user] > 1:
            results.append(
                _refused(
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}",
                )
            )
        elif credentials := credentials_of(user):
            results.append(_described(user, credentials))
        else:
            results.append(
                _refused(
                    user,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {user}",
                )
            )
    return results


async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        users = [e["name"] for e in request.get("deletions") or []]
        users += [e["name"] for e in request.get("upsertions") or []]
        refused = [
            _result(user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
            for user in dict.fromkeys(users)
        ]
        return {"throttle_time_ms": 0, "results": refused}
    results = await _off_loop(ctx, lambda: _alter(ctx, request))
    return {"throttle_time_ms": 0, "results": results}


async def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": "Cluster authorization failed.",
            "results": [],
        }
    results = await _off_loop(ctx, lambda: _describe(ctx, request))
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "results": results,
    }


HANDLERS = [
    ApiHandler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, handle_alter_user_scram_credentials),
    ApiHandler(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, handle_describe_user_scram_credentials
    ),
]
