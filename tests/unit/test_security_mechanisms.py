"""The pure security pieces: SCRAM against RFC 7677's example exchange and Kafka's stored
credential format, SCRAM's refusals, PLAIN, the JAAS parser, ssl.principal.mapping.rules
and RFC 2253 names, kafka-configs' --add-config syntax."""

from __future__ import annotations

import base64

import pytest

from logbus.cli.common import CommandError
from logbus.cli.user_configs import split_configs
from logbus.common.security.jaas import parse_jaas
from logbus.common.security.scram import ScramClient, ScramCredential
from logbus.server.security.sasl_plain import PlainServer
from logbus.server.security.sasl_server import SaslAuthenticationFailed
from logbus.server.security.scram_server import ScramServer
from logbus.server.security.ssl_principal import PrincipalMapper, parse_rules, rfc2253_name

# RFC 7677 section 3: user "user", password "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return ScramCredential.from_password("pencil", "SCRAM-SHA-256", 4096, RFC_SALT)


def test_scram_sha_256_matches_rfc_7677() -> None:
    credential = rfc_credential()
    server = ScramServer(
        "SCRAM-SHA-256", lambda user, mech: credential if user == "user" else None,
        nonce=RFC_SERVER_NONCE,
    )  # fmt: skip
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(client.first())
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = client.final(server_first)
    assert final == RFC_CLIENT_FINAL
    assert server.evaluate(final) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"
    client.verify(RFC_SERVER_FINAL)


def test_stored_credential_is_kafkas_text() -> None:
    credential = rfc_credential()
    text = credential.to_text()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential
    with pytest.raises(ValueError, match="not a SCRAM credential"):
        ScramCredential.from_text("salt=!!,stored_key=,server_key=,iterations=x")


@pytest.mark.parametrize(
    "messages",
    [
        [b"garbage"],
        [b"p=tls-server-end-point,,n=user,r=abc"],
        [b"n,,r=abc,n=user"],
        [b"n,a=other,n=user,r=abc"],
        [b"n,,n=nobody,r=abc"],
        [b"n,,n=us=5Fer,r=abc"],
        [b"n,,n=user,r=" + RFC_CLIENT_NONCE.encode(), b"c=biws,r=wrong,p=AAAA"],
        [b"n,,n=user,r=" + RFC_CLIENT_NONCE.encode(), b"c=biws,p=AAAA"],
        [b"n,,n=user,r=" + RFC_CLIENT_NONCE.encode(), RFC_CLIENT_FINAL[:-8] + b"AAAAAAA="],
        [b"n,,n=user,r=" + RFC_CLIENT_NONCE.encode(), b"\xff\xfe"],
        [b"n,,n=user,r=x" * 1000],
    ],
)
def test_scram_refusals_are_authentication_failures(messages: list[bytes]) -> None:
    credential = rfc_credential()
    server = ScramServer(
        "SCRAM-SHA-256", lambda user, mech: credential if user == "user" else None,
        nonce=RFC_SERVER_NONCE,
    )  # fmt: skip
    with pytest.raises(SaslAuthenticationFailed):
        for message in messages:
            server.evaluate(message)
    assert not server.complete


def test_plain() -> None:
    server = PlainServer({"alice": "secret"})
    assert server.evaluate(b"\0alice\0secret") == b"" and server.username == "alice"
    refused = (b"\0alice\0wrong", b"alice\0secret", b"\0bob\0secret", b"\0\0", b"b\0alice\0secret")
    for token in refused:
        with pytest.raises(SaslAuthenticationFailed):
            PlainServer({"alice": "secret"}).evaluate(token)


def test_jaas() -> None:
    jaas = parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin \\"secret\\"" user_alice="a;b" user_bob=bob;'
    )
    assert jaas.login_module.endswith("PlainLoginModule") and jaas.flag == "required"
    assert jaas.options["password"] == 'admin "secret"'
    assert jaas.plain_users == {"alice": "a;b", "bob": "bob"}
    for bad in ("", "Module;", "Module sometimes a=b;", "Module required a=b", "M required a;"):
        with pytest.raises(ValueError):
            parse_jaas(bad)


def test_principal_mapping_rules() -> None:
    mapper = PrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT"
    )
    assert mapper.name_of("CN=kafka-server,OU=ServiceUsers,O=org") == "kafka-server"
    assert mapper.name_of("CN=Duke,OU=JavaSoft,O=Sun,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert mapper.name_of("OU=x,cn=admin.user") == "ADMIN.USER"
    assert mapper.name_of("O=nobody") == "O=nobody"
    with pytest.raises(ValueError, match="no rule"):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name_of("O=x")
    assert parse_rules("RULE:a\\/b/c/")[0].apply("a/b") == "c"
    for bad in ("RULE:abc", "NOPE", "RULE:(/x/", ""):
        with pytest.raises(ValueError):
            parse_rules(bad)


def test_rfc2253_names_of_peer_certificates() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "7")),
        (("commonName", "alice"),),
    )
    assert rfc2253_name(subject) == "CN=alice,OU=eng+UID=7,O=Example\\, Inc.,C=US"
    mapper = PrincipalMapper("DEFAULT")
    assert str(mapper.principal({"subject": subject})) == (
        "User:CN=alice,OU=eng+UID=7,O=Example\\, Inc.,C=US"
    )
    assert mapper.principal({}) is None


def test_kafka_configs_add_config_syntax() -> None:
    assert split_configs(
        "SCRAM-SHA-256=[iterations=8192,password=a,b],SCRAM-SHA-512=[password=c]"
    ) == [("SCRAM-SHA-256", "iterations=8192,password=a,b"), ("SCRAM-SHA-512", "password=c")]
    for bad in ("SCRAM-SHA-256=[password=x", "x]", "novalue"):
        with pytest.raises(CommandError):
            split_configs(bad)
