"""The Admin client's settings: the common client settings plus the Java AdminClient's
own (`default.api.timeout.ms`, `retries`)."""

from __future__ import annotations

from logbus.client.config import COMMON, ConfigSchema, Setting

ADMIN = (
    Setting(
        "default.api.timeout.ms",
        int,
        60000,
        "how long an admin call may take, retries included, unless it is given timeout_ms",
        at_least=1,
    ),
    Setting("retries", int, 2147483647, "how often a retriable failure is retried", at_least=0),
)

ADMIN_CONFIG = ConfigSchema("admin", COMMON, ADMIN)
