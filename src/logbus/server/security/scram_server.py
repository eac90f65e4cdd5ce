"""The broker's side of one SCRAM-SHA-256 or SCRAM-SHA-512 exchange (RFC 5802, RFC 7677),
Kafka's `ScramSaslServer`: client-first → server-first, client-final → server-final.
Malformed messages, a nonce that does not match, an unknown user or a wrong proof raise
`SaslAuthenticationFailed`, never anything else. Credentials, mechanisms and the client's
side are `logbus.common.security.scram`'s.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from logbus.common.security.scram import (
    MAX_MESSAGE,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    hmac_digest,
)
from logbus.server.security.sasl_server import SaslAuthenticationFailed, SaslServer


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
        signature = hmac_digest(credential.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise SaslAuthenticationFailed(self._invalid())
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored = hashlib.new(self.digest, client_key).digest()
        if not hmac.compare_digest(stored, credential.stored_key):
            raise SaslAuthenticationFailed(self._invalid())
        self._step = 2
        self.complete = True
        server_signature = hmac_digest(credential.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(server_signature)

    def _invalid(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )
