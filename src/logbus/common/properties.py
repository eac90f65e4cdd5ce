"""Java `.properties` input: properties files (the broker's server.properties, the CLI's
client settings) and `--override name=value` items.

Follows `java.util.Properties.load`; pure code apart from `load_properties`, which reads
one file. Errors are `ConfigError`s naming the file and line or the override.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from logbus.common.config_def import ConfigError

__all__ = ["load_properties", "parse_overrides", "parse_properties"]

_WHITESPACE: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java .properties text (`java.util.Properties.load`): `#`/`!` comment lines,
    `key=value`, `key: value` or `key value`, a trailing odd backslash continuing the line
    (the next line's leading whitespace dropped), escapes `\\t \\n \\r \\f \\uXXXX` and
    `\\<char>` for any other char. Later duplicates win."""
    props: dict[str, str] = {}
    pending: list[str] = []
    start_line = 0
    for number, natural in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        line = natural.lstrip(_WHITESPACE)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start_line = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        key, value = _split_entry("".join(pending), f"{source}:{start_line}")
        props[key] = value
        pending = []
    if pending:  # a continuation backslash on the last line
        key, value = _split_entry("".join(pending), f"{source}:{start_line}")
        props[key] = value
    return props


def _split_entry(line: str, where: str) -> tuple[str, str]:
    index = 0
    while index < len(line) and line[index] not in "=:" and line[index] not in _WHITESPACE:
        index += 2 if line[index] == "\\" else 1
    index = min(index, len(line))
    key = line[:index]
    rest = line[index:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key, where), _unescape(rest, where)


def _unescape(text: str, where: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1 : index + 2]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(where, "Malformed \\uXXXX escape", text)
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a server.properties file (UTF-8, which covers Kafka's ISO-8859-1 ASCII files)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(str(file), f"Cannot read the properties file: {error}") from error
    return parse_properties(text, str(file))


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """Parse command-line overrides ("name=value"); the value may itself contain '='."""
    props: dict[str, str] = {}
    for item in items:
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            raise ConfigError(name.strip() or item, "Expected an override of the form name=value")
        props[name.strip()] = value
    return props
