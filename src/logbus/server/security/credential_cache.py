"""SCRAM credentials: stored as Kafka keeps them in ZooKeeper mode, cached on each broker.

`/config/users/<user>` holds `{"version": 1, "config": {"SCRAM-SHA-512":
"salt=...,stored_key=...,server_key=...,iterations=4096", ...}}` next to the user's other
configs (quotas), the name sanitized as Kafka's `Sanitizer` does (`a/b@c` is `a%2Fb%40c`);
a change writes the node and a `/config/changes` notification (the `users/<user>`
entity), so every broker's `ConfigChangeListener` calls `CredentialCache.reload_user` and
sees the new credentials. The embedded store keeps the same paths.

The store functions block on ZooKeeper: callers run them off the event loop in cluster
mode. The cache's dict is replaced per user, so readers on the loop never see a half
update.
"""

from __future__ import annotations

import logging

from logbus.common.security.scram import MECHANISMS, ScramCredential
from logbus.controller.config_store import change_entity_config, fetch_entity_config
from logbus.controller.metadata_store import MetadataStore, NoNode
from logbus.server.quotas.entity import desanitize, sanitize

USERS = "users"
USERS_PATH = "/config/users"

log = logging.getLogger(__name__)


def stored_credentials(store: MetadataStore, user: str) -> dict[str, ScramCredential]:
    """The user's SCRAM credentials by mechanism (malformed ones logged and skipped)."""
    credentials: dict[str, ScramCredential] = {}
    for name, text in fetch_entity_config(store, USERS, sanitize(user)).items():
        if name in MECHANISMS:
            try:
                credentials[name] = ScramCredential.from_text(text)
            except ValueError as exc:
                log.error("ignoring the stored %s credential of %s: %s", name, user, exc)
    return credentials


def users_with_configs(store: MetadataStore) -> list[str]:
    """Every user with a config node (credentials, quotas or neither), by name."""
    try:
        return sorted(desanitize(node) for node in store.children(USERS_PATH))
    except NoNode:
        return []


def alter_credentials(
    store: MetadataStore,
    user: str,
    upserts: dict[str, ScramCredential],
    deletions: list[str],
) -> None:
    """Change one user's credentials, keeping its other configs, and notify the brokers."""
    node = sanitize(user)
    configs = fetch_entity_config(store, USERS, node)
    for mechanism in deletions:
        configs.pop(mechanism, None)
    for mechanism, credential in upserts.items():
        configs[mechanism] = credential.to_text()
    change_entity_config(store, USERS, node, configs)


class CredentialCache:
    """user -> mechanism -> credential, for the SCRAM servers of every listener."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        """Read every user's credentials (blocking)."""
        for user in users_with_configs(self.store):
            self._reload(user)

    def reload_user(self, entity: str) -> None:
        """A change notification for `users/<entity>`, the sanitized name (blocking)."""
        self._reload(desanitize(entity))

    def _reload(self, user: str) -> None:
        credentials = stored_credentials(self.store, user)
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)

    def set_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """A user's credentials by mechanism as a KRaft broker's image has them (empty:
        the user has none)."""
        if credentials:
            self._users[user] = dict(credentials)
        else:
            self._users.pop(user, None)

    def users(self) -> list[str]:
        """Every user with credentials, sorted."""
        return sorted(self._users)

    def credentials_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)
