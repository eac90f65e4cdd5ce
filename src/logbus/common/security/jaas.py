"""Kafka's JAAS configuration text (`sasl.jaas.config`,
`listener.name.<l>.<mechanism>.sasl.jaas.config`):

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

One login module, a control flag, then `key=value` options (values quoted with escapes,
or bare) and a closing semicolon. `parse_jaas` gives the module name and its options;
`ValueError` with a readable message for anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.DOTALL)


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PLAIN's users: the `user_<name>="<password>"` options."""
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"cannot parse the JAAS config at {text[position : position + 20]!r}")
        quoted, bare, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif bare is not None:
            tokens.append(("word", bare))
        elif equals is not None:
            tokens.append(("=", "="))
        elif semicolon is not None:
            tokens.append((";", ";"))
        position = match.end()
    return tokens


def parse_jaas(text: str) -> JaasConfig:
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("a JAAS config starts with a login module class and a control flag")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ValueError(f"unknown JAAS control flag {flag!r}; expected one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if (
            i + 2 >= len(tokens)
            or tokens[i][0] != "word"
            or tokens[i + 1][0] != "="
            or tokens[i + 2][0] not in ("word", "value")
        ):
            raise ValueError("JAAS options are key=value pairs")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ValueError("a JAAS config ends with ';'")
    if i != len(tokens) - 1:
        raise ValueError("logbus takes one login module per JAAS config")
    return JaasConfig(module, flag, options)
