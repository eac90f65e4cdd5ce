"""Values of the Admin's client quota calls (Kafka's `ClientQuotaEntity`,
`ClientQuotaFilterComponent`, `ClientQuotaAlteration`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

USER: Final = "user"
CLIENT_ID: Final = "client-id"


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """Whom quotas apply to: a user, a client id, or both. A part named None is the
    default entity (`<default>`): `ClientQuotaEntity(user="alice", client_id=None)` is
    <alice, default client id>; a part left out is not part of the entity."""

    user: str | None = None
    client_id: str | None = None
    has_user: bool = False
    has_client_id: bool = False

    @classmethod
    def of(cls, parts: Mapping[str, str | None]) -> ClientQuotaEntity:
        """From Kafka's map form: {"user": "alice", "client-id": None}."""
        unknown = set(parts) - {USER, CLIENT_ID}
        if unknown:
            raise ValueError(f"unknown client quota entity types: {sorted(unknown)}")
        return cls(parts.get(USER), parts.get(CLIENT_ID), USER in parts, CLIENT_ID in parts)

    def parts(self) -> tuple[tuple[str, str | None], ...]:
        """(entity type, name) pairs sorted by type, None for the default."""
        found: list[tuple[str, str | None]] = []
        if self.has_client_id:
            found.append((CLIENT_ID, self.client_id))
        if self.has_user:
            found.append((USER, self.user))
        return tuple(found)

    def __str__(self) -> str:
        return ", ".join(f"{k}={'<default>' if v is None else v}" for k, v in self.parts())


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """One part of a DescribeClientQuotas filter: `entity(type, name)` an exact name,
    `default(type)` the default entity, `any(type)` any named entity of the type."""

    entity_type: str
    match_type: int
    match: str | None = None

    @classmethod
    def entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 0, name)

    @classmethod
    def default(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 1, None)

    @classmethod
    def any(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, 2, None)


def entity_from_parts(parts: tuple[tuple[str, str | None], ...]) -> ClientQuotaEntity:
    return ClientQuotaEntity.of(dict(parts))
