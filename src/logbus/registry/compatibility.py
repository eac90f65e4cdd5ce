"""Compatibility levels (Confluent's): which earlier versions a new schema is checked
against, and in which direction. BACKWARD: the new schema reads data written with the
latest version; FORWARD: the latest version reads data written with the new one; FULL:
both; the _TRANSITIVE levels check every live version, not only the latest; NONE checks
nothing."""

from __future__ import annotations

from collections.abc import Sequence

from logbus.registry.schema_types import ParsedSchema

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` breaks `level` against `previous` (oldest first; [] when compatible)."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            messages += new.can_read(old)
        if base in ("FORWARD", "FULL"):
            messages += old.can_read(new)
        if messages:
            break
    return messages
