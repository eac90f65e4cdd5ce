"""Who a client quota applies to, and which configured quota wins (Kafka's
`DefaultQuotaCallback` and its ZooKeeper layout).

A quota is configured on an entity: a user (the principal's name), a client id, or a
user with a client id; `<default>` stands for every user or every client id. For one
request the quota of each kind is looked up independently, in Kafka's order:

    1. /config/users/<user>/clients/<client-id>
    2. /config/users/<user>/clients/<default>
    3. /config/users/<user>
    4. /config/users/<default>/clients/<client-id>
    5. /config/users/<default>/clients/<default>
    6. /config/users/<default>
    7. /config/clients/<client-id>
    8. /config/clients/<default>

The rate is measured per matched entity: a quota on `clients/X` is shared by every user
connecting with client id X, a quota on `users/alice` by all of alice's client ids.
Names in ZooKeeper paths are sanitized as Kafka's `Sanitizer` does (URL encoding).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

DEFAULT: Final = "<default>"
USERS: Final = "users"
CLIENTS: Final = "clients"

# AlterClientQuotas / DescribeClientQuotas entity types
USER_TYPE: Final = "user"
CLIENT_ID_TYPE: Final = "client-id"
IP_TYPE: Final = "ip"


class QuotaType(enum.Enum):
    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"


QUOTA_KEYS: Final = frozenset(q.value for q in QuotaType)
# Kafka defines the byte rates as LONG and the others as DOUBLE.
LONG_KEYS: Final = frozenset({QuotaType.PRODUCE.value, QuotaType.FETCH.value})


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: URL encoding with `%20` for spaces and `%2A` for `*`."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A configured entity: `user` and `client_id` are None when not part of it and
    DEFAULT for `<default>`; names are the real (desanitized) ones."""

    user: str | None
    client_id: str | None

    def store_path(self) -> tuple[str, str]:
        """(entity type, name) under /config, as `change_entity_config` takes them."""
        if self.user is not None:
            user = self.user if self.user == DEFAULT else sanitize(self.user)
            if self.client_id is None:
                return USERS, user
            client = self.client_id if self.client_id == DEFAULT else sanitize(self.client_id)
            return USERS, f"{user}/{CLIENTS}/{client}"
        assert self.client_id is not None
        client = self.client_id if self.client_id == DEFAULT else sanitize(self.client_id)
        return CLIENTS, client

    def components(self) -> list[tuple[str, str | None]]:
        """(entity type, name) as the protocol carries them; None for `<default>`."""
        parts: list[tuple[str, str | None]] = []
        if self.user is not None:
            parts.append((USER_TYPE, None if self.user == DEFAULT else self.user))
        if self.client_id is not None:
            parts.append((CLIENT_ID_TYPE, None if self.client_id == DEFAULT else self.client_id))
        return parts


def entity_from_store(entity_type: str, name: str) -> QuotaEntity | None:
    """The entity of a change notification or a stored node (`users`, `alice/clients/c1`);
    None for a name that is not a quota entity."""
    def real(part: str) -> str:
        return part if part == DEFAULT else desanitize(part)

    if entity_type == CLIENTS and name and "/" not in name:
        return QuotaEntity(None, real(name))
    if entity_type == USERS and name:
        user, sep, rest = name.partition("/")
        if not sep:
            return QuotaEntity(real(user), None)
        kind, sep, client = rest.partition("/")
        if kind == CLIENTS and sep and client and "/" not in client:
            return QuotaEntity(real(user), real(client))
    return None


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota settings of a stored entity config (other keys, such as a user's SCRAM
    credentials, are not quotas); values that do not parse are left out."""
    values: dict[str, float] = {}
    for key, raw in config.items():
        if key in QUOTA_KEYS:
            try:
                value = float(raw)
            except ValueError:
                continue
            if math.isfinite(value) and value >= 0:
                values[key] = value
    return values


def lookup_order(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    """The entities whose quota applies to (user, client id), first match wins."""
    return (
        QuotaEntity(user, client_id),
        QuotaEntity(user, DEFAULT),
        QuotaEntity(user, None),
        QuotaEntity(DEFAULT, client_id),
        QuotaEntity(DEFAULT, DEFAULT),
        QuotaEntity(DEFAULT, None),
        QuotaEntity(None, client_id),
        QuotaEntity(None, DEFAULT),
    )


def sensor_key(matched: QuotaEntity, user: str, client_id: str) -> tuple[str, str]:
    """Whose rate a matched quota limits: (user tag, client-id tag) as Kafka's metric tags
    ("" where the entity does not name that part); `<default>` parts stand for the
    client's own name, so each user or client id has its own rate."""
    user_tag = "" if matched.user is None else user
    client_tag = "" if matched.client_id is None else client_id
    return user_tag, client_tag
