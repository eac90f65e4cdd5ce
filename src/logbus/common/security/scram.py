"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them.

- `ScramCredential`: what is stored per user and mechanism, in Kafka's text form
  `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
- `ScramServer`: the broker's side of one exchange (client-first → server-first,
  client-final → server-final). Malformed messages, a nonce that does not match, an
  unknown user or a wrong proof raise `SaslAuthenticationFailed`, never anything else.
- `ScramClient`: the client's side (the logbus client, a broker connecting to another).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from logbus.server.security.sasl_server import SaslAuthenticationFailed, SaslServer

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""AlterUserScramCredentials' mechanism numbers (Kafka's ScramMechanism)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
MAX_MESSAGE = 4096


def mechanism_type(name: str) -> int:
    return next(k for k, v in MECHANISM_TYPES.items() if v == name)


def _hmac(key: bytes, message: bytes, digest: str) -> bytes:
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
        client_key = _hmac(salted, b"Client Key", digest)
        return cls(
            salt,
            hashlib.new(digest, client_key).digest(),
            _hmac(salted, b"Server Key", digest),
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


def _attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, equals, value = part.partition("=")
        if len(key) != 1 or not equals:
            raise SaslAuthenticationFailed(f"Invalid SCRAM message attribute {part[:20]!r}")
        attributes.setdefault(key, value)
    return attributes


def _decode_name(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise SaslAuthenticationFailed("Invalid SCRAM username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


CredentialLookup = Callable[[str, str], "ScramCredential | None"]


class ScramServer(SaslServer):
    """The broker's side of one SCRAM exchange; `lookup(user, mechanism)` gives the
    stored credential."""

    def __init__(
        self, mechanism: str, lookup: CredentialLookup, *, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._server_nonce = nonce  # tests only: RFC 7677's example exchange
        self.digest = MECHANISMS[mechanism]
        self.lookup = lookup
        self.username: str | None = None
        self.complete = False
        self._step = 0
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""

    def evaluate(self, token: bytes) -> bytes:
        if len(token) > MAX_MESSAGE:
            raise SaslAuthenticationFailed("SCRAM message too long")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(message)
        if self._step == 1:
            return self._client_final(message)
        raise SaslAuthenticationFailed("SCRAM exchange already complete")

    def _client_first(self, message: str) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (channel binding is not supported: "y"/"p")
        match = re.fullmatch(r"([ny]),(a=[^,]*)?,(.*)", message, re.DOTALL)
        if match is None:
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        self._gs2_header = message[: len(message) - len(match.group(3))]
        bare = match.group(3)
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        if not bare.startswith("n="):
            raise SaslAuthenticationFailed("Invalid SCRAM client first message")
        username = _decode_name(attributes["n"])
        authzid = match.group(2)
        if authzid and _decode_name(authzid[2:]) not in ("", username):
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        credential = self.lookup(username, self.mechanism)
        if credential is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslAuthenticationFailed("Iterations less than minimum")
        self.username = username
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attributes["r"] + (self._server_nonce or secrets.token_urlsafe(24))
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        attributes = _attributes(message)
        if not {"c", "r", "p"} <= attributes.keys() or not message.rsplit(",", 1)[1].startswith(
            "p="
        ):
            raise SaslAuthenticationFailed("Invalid SCRAM client final message")
        # Kafka accepts a nonce that ends with the server's (some librdkafka versions
        # repeat the client's part); anything else is refused.
        if not attributes["r"].endswith(self._nonce):
            raise SaslAuthenticationFailed("Invalid client nonce in the final client message.")
        try:
            binding = base64.b64decode(attributes["c"], validate=True)
            proof = base64.b64decode(attributes["p"], validate=True)
        except binascii.Error:
            raise SaslAuthenticationFailed("Invalid SCRAM client final message") from None
        if binding != self._gs2_header.encode():
            raise SaslAuthenticationFailed("Invalid SCRAM channel binding")
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(credential.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise SaslAuthenticationFailed(self._invalid())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored = hashlib.new(self.digest, client_key).digest()
        if not hmac.compare_digest(stored, credential.stored_key):
            raise SaslAuthenticationFailed(self._invalid())
        self._step = 2
        self.complete = True
        server_signature = _hmac(credential.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(server_signature)

    def _invalid(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )


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
        client_key = _hmac(salted, b"Client Key", self.digest)
        stored_key = hashlib.new(self.digest, client_key).digest()
        signature = _hmac(stored_key, auth_message, self.digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(salted, b"Server Key", self.digest)
        self._server_signature = _hmac(server_key, auth_message, self.digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ValueError(f"SCRAM authentication failed: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise ValueError("the broker's SCRAM signature does not match")
