"""The principal of a TLS client certificate: its subject's distinguished name in RFC 2253
form ("CN=alice,OU=eng,O=Example"), mapped by `ssl.principal.mapping.rules` (Kafka's
`SslPrincipalMapper`).

Rules are tried in order: `RULE:pattern/replacement/[L|U]` applies when the pattern
matches the whole name and gives the replacement (`$1` for groups), lower- or upper-cased
with L or U; `DEFAULT` gives the name unchanged. No rule applying is an error (the client
is not authenticated), as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from logbus.server.security.principal import USER_TYPE, KafkaPrincipal

# OpenSSL's long attribute names to the short ones Java's X500Principal writes.
_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(self.replacement)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _until_slash(text: str, start: int) -> tuple[str, int]:
    """The text up to the next unescaped '/' and the index after it."""
    out = []
    i = start
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] == "/":
            out.append("/")
            i += 2
            continue
        if char == "/":
            return "".join(out), i + 1
        out.append(char)
        i += 1
    raise ValueError(f"unterminated rule at {text[start:]!r}")


def parse_rules(text: str) -> list[Rule]:
    """Parse `ssl.principal.mapping.rules`; ValueError with a readable message."""
    rules: list[Rule] = []
    i = 0
    while i < len(text):
        if text[i] in " \t\n,":
            i += 1
            continue
        if text.startswith("DEFAULT", i):
            rules.append(Rule(None))
            i += len("DEFAULT")
            continue
        if not text.startswith("RULE:", i):
            raise ValueError(f"expected RULE:pattern/replacement/[LU] or DEFAULT at {text[i:]!r}")
        pattern, i = _until_slash(text, i + len("RULE:"))
        replacement, i = _until_slash(text, i)
        case = ""
        if i < len(text) and text[i] in "LU":
            case, i = text[i], i + 1
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid pattern {pattern!r}: {exc}") from None
        # Java's $1 group references become Python's \g<1>.
        python_replacement = re.sub(r"\$(\d+)", r"\\g<\1>", replacement.replace("\\", "\\\\"))
        rules.append(Rule(compiled, python_replacement, case))
    if not rules:
        raise ValueError("no rules")
    return rules


class PrincipalMapper:
    """Maps a certificate's distinguished name to a `KafkaPrincipal`."""

    def __init__(self, rules_text: str) -> None:
        self.rules = parse_rules(rules_text)

    def name_of(self, distinguished_name: str) -> str:
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise ValueError(f"no rule of ssl.principal.mapping.rules applies to {distinguished_name}")

    def principal(self, peer_certificate: dict[str, Any] | None) -> KafkaPrincipal | None:
        """The principal of a verified peer certificate (`SSLSocket.getpeercert()`); None
        when the client sent none."""
        if not peer_certificate or "subject" not in peer_certificate:
            return None
        return KafkaPrincipal(USER_TYPE, self.name_of(rfc2253_name(peer_certificate["subject"])))


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def rfc2253_name(subject: tuple[tuple[tuple[str, str], ...], ...]) -> str:
    """`getpeercert()["subject"]` (RDNs in certificate order) as RFC 2253 text (last RDN
    first), as Java's `X500Principal.getName()`."""
    parts = []
    for rdn in reversed(subject):
        parts.append(
            "+".join(f"{_SHORT_NAMES.get(attr, attr)}={_escape(value)}" for attr, value in rdn)
        )
    return ",".join(parts)
