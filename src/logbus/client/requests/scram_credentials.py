"""AlterUserScramCredentials and DescribeUserScramCredentials v0 (KIP-554). The salted
password is computed by the caller (`logbus.common.security.scram.salted_password`, as
Kafka's admin client does): the password never travels."""

from __future__ import annotations

from typing import Any, NamedTuple


class Upsertion(NamedTuple):
    user: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes
    salted_password: bytes


def build_alter_user_scram_credentials(
    version: int, deletions: list[tuple[str, int]], upsertions: list[Upsertion]
) -> dict[str, Any]:
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
) -> dict[str, Any]:
    """`users` None or empty: every user with credentials."""
    return {"users": None if users is None else [{"name": user} for user in users]}
