"""AlterUserScramCredentials and DescribeUserScramCredentials v0 (KIP-554). The salted
password is computed by the caller (`logbus.common.security.scram.salted_password`, as
Kafka's admin client does): the password never travels. The senders return the typed
response: the caller (the CLI) reports each user's result itself."""

from __future__ import annotations

from typing import NamedTuple

from logbus.client.connection import Connection
from logbus.client.requests.common import send
from logbus.protocol import ApiKey
from logbus.protocol.messages import apis
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


class Upsertion(NamedTuple):
    user: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes


def build_alter_user_scram_credentials(
    version: int, deletions: list[tuple[str, int]], upsertions: list[Upsertion]
) -> AlterUserScramCredentialsRequest:
    return {
        "deletions": [{"name": user, "mechanism": mechanism} for user, mechanism in deletions],
        "upsertions": [
            {
                "name": u.user,
                "mechanism": u.mechanism,
                "iterations": u.iterations,
                "salt": u.salt,
                "salted_password": u.salted_password,
            }
            for u in upsertions
        ],
    }


def build_describe_user_scram_credentials(
    version: int, users: list[str] | None
) -> DescribeUserScramCredentialsRequest:
    """`users` None or empty: every user with credentials."""
    return {"users": None if users is None else [{"name": user} for user in users]}


async def alter_user_scram_credentials(
    conn: Connection, body: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    """Send a body built by `build_alter_user_scram_credentials` (the same in v0, the
    only version)."""
    version = conn.choose_version(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    return await send(conn, apis.ALTER_USER_SCRAM_CREDENTIALS, body, version)


async def describe_user_scram_credentials(
    conn: Connection, users: list[str] | None
) -> DescribeUserScramCredentialsResponse:
    version = conn.choose_version(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    body = build_describe_user_scram_credentials(version, users)
    return await send(conn, apis.DESCRIBE_USER_SCRAM_CREDENTIALS, body, version)
