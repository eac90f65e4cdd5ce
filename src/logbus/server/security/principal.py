"""Kafka's `KafkaPrincipal`: the authenticated identity of a connection, as "Type:name"
(`User:alice`). A connection that did not authenticate (a PLAINTEXT listener, or TLS
without a client certificate) is `User:ANONYMOUS`, as in Kafka."""

from __future__ import annotations

from typing import NamedTuple

USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """ "Type:name" as Kafka's `SecurityUtils.parseKafkaPrincipal`; ValueError with a
        readable message for anything else."""
        principal_type, colon, name = text.partition(":")
        if not colon or not principal_type or not name:
            raise ValueError(f"expected a principal as 'Type:name' (User:alice), got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
