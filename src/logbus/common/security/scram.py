"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them.

- `ScramCredential`: what is stored per user and mechanism, in Kafka's text form
  `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
- `ScramClient`: the client's side (the logbus client, a broker connecting to another).
- `alteration_error`: Kafka's checks of one AlterUserScramCredentials entry, which both
  the ZooKeeper-mode broker and the KRaft controller apply.

The broker's side of an exchange is `logbus.server.security.scram_server.ScramServer`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logbus.protocol import ErrorCode

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""AlterUserScramCredentials' mechanism numbers (Kafka's ScramMechanism)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
MAX_MESSAGE = 4096


def mechanism_type(name: str) -> int:
    return next(k for k, v in MECHANISM_TYPES.items() if v == name)


def hmac_digest(key: bytes, message: bytes, digest: str) -> bytes:
    return hmac.new(key, message, digest).digest()


def salted_password(password: str, salt: bytes, iterations: int, digest: str) -> bytes:
    return hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted(
        cls, salted: bytes, salt: bytes, iterations: int, mechanism: str
    ) -> ScramCredential:
        digest = MECHANISMS[mechanism]
        client_key = hmac_digest(salted, b"Client Key", digest)
        return cls(
            salt,
            hashlib.new(digest, client_key).digest(),
            hmac_digest(salted, b"Server Key", digest),
            iterations,
        )

    @classmethod
    def from_password(
        cls,
        password: str,
        mechanism: str,
        iterations: int = DEFAULT_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(16)
        salted = salted_password(password, salt, iterations, MECHANISMS[mechanism])
        return cls.from_salted(salted, salt, iterations, mechanism)

    def to_text(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse Kafka's stored form; ValueError if it is not one."""
        fields = dict(part.partition("=")[::2] for part in text.split(","))
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError, binascii.Error) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """The client's side: `first()`, then `final(server_first)`, then
    `verify(server_final)`; ValueError on anything the server got wrong."""

    def __init__(
        self, mechanism: str, username: str, password: str, *, nonce: str | None = None
    ) -> None:
        self.digest = MECHANISMS[mechanism]
        self.username = username
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={encode_name(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        fields = dict(part.partition("=")[::2] for part in text.split(","))
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self.nonce) or not salt or not iterations.isdigit():
            raise ValueError(f"invalid SCRAM server first message: {text!r}")
        salted = salted_password(
            self.password, base64.b64decode(salt), int(iterations), self.digest
        )
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac_digest(salted, b"Client Key", self.digest)
        stored_key = hashlib.new(self.digest, client_key).digest()
        signature = hmac_digest(stored_key, auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac_digest(salted, b"Server Key", self.digest)
        self._server_signature = hmac_digest(server_key, auth_message, self.digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ValueError(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise ValueError("the broker's SCRAM signature does not match")


def alteration_error(entry: Mapping[str, Any], duplicate: bool) -> tuple[int, str] | None:
    """Why one deletion or upsertion of AlterUserScramCredentials is refused (Kafka's
    checks: the error code and message), or None. `duplicate`: the same user and
    mechanism is named twice in the request."""
    if duplicate:
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    if not entry["name"]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if entry["mechanism"] not in MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if "salted_password" in entry:
        if not MIN_ITERATIONS <= entry.get("iterations", 0) <= MAX_ITERATIONS:
            return (
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
            )
        if not entry.get("salt") or not entry.get("salted_password"):
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None
