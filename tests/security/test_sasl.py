"""SASL listeners: PLAIN over SASL_PLAINTEXT and SCRAM-SHA-512 over SASL_SSL with every
client (produce, consume in a group, an admin call); SCRAM credentials managed with
AlterUserScramCredentials / DescribeUserScramCredentials and stored as Kafka stores them;
and the exchange's refusals, seen byte by byte: wrong password, unknown mechanism, a
request before authentication, an oversized frame, malformed SCRAM messages, an expired
session (KIP-368)."""

from __future__ import annotations

import asyncio
import base64
import ssl
import struct
import subprocess
import time
import uuid
from typing import Any

import pytest
from client_round_trips import (
    TIMEOUT,
    aiokafka_round_trip,
    kafka_python_round_trip,
    produce_consume_confluent,
    values,
)
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from security_support import Pki, address, listener, sasl_broker

from logbus.common.security.scram import ScramClient, ScramCredential
from logbus.protocol import ApiKey, ErrorCode

pytest_plugins = ["secure_fixtures"]




def plain_config(running: Any, password: str = "alice-secret") -> dict[str, Any]:
    return {
        "bootstrap.servers": address(running, "SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def scram_config(running: Any, pki: Pki) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(running, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca.cert_file),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }


def test_confluent_kafka_plain_and_scram(secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki)
    produce_consume_confluent(plain_config(running), f"plain-{uuid.uuid4().hex[:6]}", 5)
    produce_consume_confluent(scram_config(running, pki), f"scram-{uuid.uuid4().hex[:6]}", 5)
    principals = {str(c.principal) for c in listener(running, "SASL_SSL")._connections}
    assert principals == {"User:alice"}


def test_scram_credentials_described_deleted_and_stored_in_kafka_format(
    secure_broker: Any, pki: Pki
) -> None:
    running = sasl_broker(secure_broker, pki)
    admin = AdminClient({"bootstrap.servers": address(running, "PLAINTEXT")})
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(TIMEOUT)
    infos = [(i.mechanism, i.iterations) for i in described.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    store = running.broker.store
    config = store.get_json("/config/users/alice")["config"]
    credential = ScramCredential.from_text(config["SCRAM-SHA-512"])
    assert credential.iterations == 4096 and len(credential.stored_key) == 64
    assert set(config["SCRAM-SHA-512"].split(",")[0].split("=", 1)[0:1]) == {"salt"}
    # too few iterations: refused, nothing stored
    weak = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"
    )
    with pytest.raises(Exception, match=r"UNACCEPTABLE_CREDENTIAL|[Ii]terations"):
        admin.alter_user_scram_credentials([weak])["bob"].result(TIMEOUT)
    assert not store.exists("/config/users/bob")
    # deleting a credential that does not exist
    missing = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.alter_user_scram_credentials([missing])["alice"].result(TIMEOUT)
    # deleted: alice can no longer authenticate with SCRAM
    gone = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([gone])["alice"].result(TIMEOUT)
    assert running.broker.credentials.get("alice", "SCRAM-SHA-512") is None
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["alice"])["alice"].result(TIMEOUT)


def test_kafka_python_plain_and_scram(secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki)
    variants = {
        "plain": {
            "bootstrap_servers": address(running, "SASL_PLAINTEXT"),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
        },
        "scram": {
            "bootstrap_servers": address(running, "SASL_SSL"),
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(pki.ca.cert_file),
            "sasl_mechanism": "SCRAM-SHA-512",
        },
    }
    for name, common in variants.items():
        common = {**common, "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
        topic = f"kp-{name}-{uuid.uuid4().hex[:6]}"
        assert kafka_python_round_trip(common, topic, 5) == values(5), name


def test_aiokafka_plain_and_scram(secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki)

    def scenario(common: dict[str, Any], topic: str) -> list[bytes]:
        return asyncio.run(aiokafka_round_trip(common, topic, 5))

    credentials = {"sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    plain = {
        "bootstrap_servers": address(running, "SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        **credentials,
    }
    expected = values(5)
    assert scenario(plain, f"aio-plain-{uuid.uuid4().hex[:6]}") == expected
    scram = {
        "bootstrap_servers": address(running, "SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": ssl.create_default_context(cafile=str(pki.ca.cert_file)),
        "sasl_mechanism": "SCRAM-SHA-512",
        **credentials,
    }
    assert scenario(scram, f"aio-scram-{uuid.uuid4().hex[:6]}") == expected


def test_kcat_scram_over_sasl_ssl(secure_broker: Any, pki: Pki) -> None:
    running = sasl_broker(secure_broker, pki, **{"auto.create.topics.enable": "true"})
    topic = f"kcat-scram-{uuid.uuid4().hex[:6]}"
    common = ["kcat", "-b", address(running, "SASL_SSL")]
    for name, value in scram_config(running, pki).items():
        if name != "bootstrap.servers":
            common += ["-X", f"{name}={value}"]
    subprocess.run([*common, "-P", "-t", topic], input=b"a\nb\n", check=True, timeout=TIMEOUT)
    out = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"],
        check=True, capture_output=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert out.stdout.split() == [b"a", b"b"]


# --- the exchange, byte by byte -------------------------------------------------------


def handshake(conn: Any, mechanism: str, version: int = 1) -> dict[str, Any]:
    return conn.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})  # type: ignore[no-any-return]


def authenticate(conn: Any, token: bytes, version: int = 2) -> dict[str, Any]:
    return conn.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})  # type: ignore[no-any-return]


def test_wrong_password_fails_and_closes(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = sasl_broker(secure_broker, pki)
    conn = raw(address(running, "SASL_PLAINTEXT"))
    versions = {"client_software_name": "t", "client_software_version": "1"}
    assert conn.request(ApiKey.API_VERSIONS, 3, versions)["error_code"] == 0
    assert handshake(conn, "PLAIN")["error_code"] == ErrorCode.NONE
    answer = authenticate(conn, b"\x00alice\x00wrong")
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Invalid username or password" in answer["error_message"]
    assert conn.closed_by_broker()
    # confluent-kafka sees the failure too, and the broker keeps serving
    errors: list[KafkaError] = []
    admin = AdminClient({**plain_config(running, "wrong"), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + TIMEOUT
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # serves error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    good = raw(address(running, "SASL_PLAINTEXT"))
    handshake(good, "PLAIN")
    assert authenticate(good, b"\x00alice\x00alice-secret")["error_code"] == ErrorCode.NONE
    assert good.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]


def test_unknown_mechanism_lists_the_enabled_ones(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = sasl_broker(secure_broker, pki)
    conn = raw(address(running, "SASL_PLAINTEXT"))
    answer = handshake(conn, "GSSAPI")
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert conn.closed_by_broker()


def test_request_before_authentication_closes(secure_broker: Any, pki: Pki, raw: Any) -> None:
    running = sasl_broker(secure_broker, pki)
    conn = raw(address(running, "SASL_PLAINTEXT"))
    conn.send(ApiKey.METADATA, 1, {"topics": []})
    assert conn.closed_by_broker()
    conn = raw(address(running, "SASL_PLAINTEXT"))
    conn.send(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00alice\x00alice-secret"})
    assert conn.closed_by_broker()
    # and on a plaintext listener SaslHandshake is an illegal state, as in Kafka
    plain = raw(address(running, "PLAINTEXT"))
    assert handshake(plain, "PLAIN")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_oversized_frame_before_authentication_closes(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = sasl_broker(secure_broker, pki, **{"sasl.server.max.receive.size": "1024"})
    conn = raw(address(running, "SASL_PLAINTEXT"))
    handshake(conn, "PLAIN")
    conn.sock.sendall(struct.pack(">i", 100_000_000) + b"x" * 2048)
    assert conn.closed_by_broker()
    # after authentication the usual limit applies
    good = raw(address(running, "SASL_PLAINTEXT"))
    handshake(good, "PLAIN")
    assert authenticate(good, b"\x00alice\x00alice-secret")["error_code"] == ErrorCode.NONE
    topics = [{"name": "t" * 200, "topic_id": uuid.UUID(int=0)} for _ in range(20)]
    request = {
        "topics": topics,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    assert len(good.request(ApiKey.METADATA, 12, request)["topics"]) == 1  # 20 times the same


@pytest.mark.parametrize(
    "case", ["garbage-first", "nonce-mismatch", "bad-proof", "unknown-user", "bad-base64"]
)
def test_malformed_scram_messages_fail_authentication(
    secure_broker: Any, pki: Pki, raw: Any, case: str
) -> None:
    running = sasl_broker(secure_broker, pki)
    conn = raw(address(running, "SASL_PLAINTEXT"))
    assert handshake(conn, "SCRAM-SHA-512")["error_code"] == ErrorCode.NONE
    client = ScramClient("SCRAM-SHA-512", "nobody" if case == "unknown-user" else "alice",
                         "alice-secret")  # fmt: skip
    if case == "garbage-first":
        answer = authenticate(conn, b"\xff\xfe,,,=")
    elif case == "unknown-user":
        answer = authenticate(conn, client.first())
    else:
        first = authenticate(conn, client.first())
        assert first["error_code"] == ErrorCode.NONE
        final = client.final(first["auth_bytes"])
        if case == "nonce-mismatch":
            final = final.replace(b",p=", b"XX,p=", 1)  # the nonce, changed at its end
        elif case == "bad-proof":
            head, _, _ = final.rpartition(b",p=")
            final = head + b",p=" + base64.b64encode(bytes(64))
        else:
            final = final.replace(b",p=", b",p=!!!", 1)
        answer = authenticate(conn, final)
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer["error_message"]
    assert conn.closed_by_broker()


def test_scram_exchange_and_v0_handshake_with_bare_tokens(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = sasl_broker(secure_broker, pki)
    conn = raw(address(running, "SASL_PLAINTEXT"))
    handshake(conn, "SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    first = authenticate(conn, client.first())
    final = authenticate(conn, client.final(first["auth_bytes"]))
    assert final["error_code"] == ErrorCode.NONE
    client.verify(final["auth_bytes"])  # the broker proved it knows the credential
    # SaslHandshake v0: the tokens follow as bare size-prefixed frames
    bare = raw(address(running, "SASL_PLAINTEXT"))
    assert handshake(bare, "PLAIN", version=0)["error_code"] == ErrorCode.NONE
    token = b"\x00alice\x00alice-secret"
    bare.sock.sendall(struct.pack(">i", len(token)) + token)
    assert bare.read_frame() == b""
    assert bare.request(ApiKey.METADATA, 1, {"topics": []})["brokers"]


def test_expired_session_closes_without_reauthentication(
    secure_broker: Any, pki: Pki, raw: Any
) -> None:
    running = sasl_broker(secure_broker, pki, **{"connections.max.reauth.ms": "300"})
    conn = raw(address(running, "SASL_PLAINTEXT"))
    handshake(conn, "PLAIN")
    answer = authenticate(conn, b"\x00alice\x00alice-secret", version=1)
    assert answer["session_lifetime_ms"] == 300
    # re-authentication within the session extends it
    handshake(conn, "PLAIN")
    assert authenticate(conn, b"\x00alice\x00alice-secret", version=1)["error_code"] == 0
    time.sleep(0.6)
    conn.send(ApiKey.METADATA, 1, {"topics": []})
    assert conn.closed_by_broker()
    # librdkafka re-authenticates by itself and keeps working past the lifetime
    config = plain_config(running)
    produce_consume_confluent(config, f"reauth-{uuid.uuid4().hex[:6]}", 3)
