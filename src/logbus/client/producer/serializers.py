"""Turning keys and values into bytes: the `key.serializer` / `value.serializer` settings.

A serializer is "bytes" (bytes-like objects as they are), "str" (UTF-8), "json" (compact
UTF-8 JSON) or a function of one argument returning bytes. None always stays None (a
tombstone value, a null key).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from logbus.client.errors import SerializationError
from logbus.common.config_def import ConfigError

Serializer = Callable[[Any], bytes | None]


def _bytes(value: Any) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise SerializationError(
        f"the bytes serializer takes bytes, not {type(value).__name__} "
        "(set key.serializer/value.serializer to str, json or a function)"
    )


def _str(value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SerializationError(f"the str serializer takes str, not {type(value).__name__}")
    return value.encode("utf-8")


def _json(value: Any) -> bytes | None:
    if value is None:
        return None
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"cannot serialize as JSON: {exc}") from None


_BUILT_IN: dict[str, Serializer] = {"bytes": _bytes, "str": _str, "json": _json}


def serializer(setting: str, spec: Any) -> Serializer:
    """The serializer a setting names, or ConfigError."""
    if callable(spec):
        return _checked(spec)
    if isinstance(spec, str) and spec.lower() in _BUILT_IN:
        return _BUILT_IN[spec.lower()]
    raise ConfigError(f"{setting}={spec!r}: use bytes, str, json or a function")


def is_identity(fn: Serializer) -> bool:
    """Whether `fn` is the bytes serializer (which the hot path may skip for bytes)."""
    return fn is _bytes


def _checked(fn: Callable[[Any], Any]) -> Serializer:
    def run(value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            out = fn(value)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(f"serializer {fn!r} failed: {exc!r}") from exc
        if out is None or type(out) is bytes:
            return out
        if isinstance(out, (bytearray, memoryview)):
            return bytes(out)
        raise SerializationError(
            f"serializer {fn!r} returned {type(out).__name__}, not bytes"
        )

    return run
