"""Signing in to the console with the cluster's SCRAM credentials, against a broker with
ACLs on: the console connects as the user (a wrong password is refused by the broker), the
user's pages act as that user (the brokers' ACLs decide, and a refusal shows the
authorization error), and in Chromium: the login form, a forbidden action, a request
without the CSRF token and a form sent from another page, a read-only console."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    sign_in,
    snap_fixture,
)
from playwright.sync_api import expect
from security_support import address, sasl_broker

from kafka_wire import create_topic, wait_for
from logbus.console import AccessSettings
from logbus.console.users import read_users, set_user

pytest_plugins = ["secure_fixtures"]

TIMEOUT = 30


class AclCluster:
    """A broker with ACLs on, whose PLAINTEXT listener is a super user (the tests' own
    administration), and alice, a SCRAM-SHA-512 user with no ACLs yet."""

    def __init__(self, running: Any) -> None:
        self.running = running
        self.plaintext = address(running, "PLAINTEXT")
        self.sasl = address(running, "SASL_PLAINTEXT")
        self.admin = AdminClient({"bootstrap.servers": self.plaintext})

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=TIMEOUT).topics)

    def create_topic(self, name: str) -> None:
        self.admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)

    def grant(self, user: str, topic: str, *operations: AclOperation) -> None:
        bindings = [
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}",
                       "*", operation, AclPermissionType.ALLOW)
            for operation in operations
        ]
        for future in self.admin.create_acls(bindings).values():
            future.result(TIMEOUT)

    def console_settings(self) -> dict[str, Any]:
        """The console's client settings: the SCRAM listener, and no user of its own."""
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"}


@pytest.fixture(name="acl_cluster")
def acl_cluster_fixture(secure_broker: Any, pki: Any) -> AclCluster:
    running = sasl_broker(
        secure_broker, pki,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ANONYMOUS",
        },
    )
    return AclCluster(running)


@pytest.fixture(name="scram_console")
def scram_console_fixture(acl_cluster: AclCluster, console_factory: Any) -> Any:
    return console_factory(acl_cluster.sasl, access=AccessSettings(login="scram"),
                           **acl_cluster.console_settings())


@pytest.fixture(name="http")
def http_fixture(scram_console: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=scram_console.url, timeout=30) as client:
        yield client


def test_a_password_the_broker_refuses_is_not_a_sign_in(http: httpx.Client) -> None:
    # alice with another password, a user with no SCRAM credential, a PLAIN-only user
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret"),
                           ("admin", "admin-secret"), ("alice", "")):
        answer = sign_in(http, user, password)
        assert answer.status_code == 401, answer.text
        assert "Wrong user name or password." in answer.text
    assert http.get("/topics").status_code == 303
    assert sign_in(http, "alice", "alice-secret").status_code == 303
    page = http.get("/topics")
    assert page.status_code == 200 and '<span id="signed-in-as">alice</span>' in page.text


def test_the_signed_in_user_acts_as_themself_and_acls_decide(
    http: httpx.Client, acl_cluster: AclCluster
) -> None:
    acl_cluster.create_topic("payroll")
    sign_in(http, "alice", "alice-secret")
    # alice may describe no topic: the list does not show the administrator's.
    listing = http.get("/topics")
    assert listing.status_code == 200 and "payroll" not in listing.text
    wanted = f"alice-{uuid.uuid4().hex[:6]}"
    refused = http.post("/topics", data={"name": wanted})
    assert refused.status_code == 403, refused.text
    assert "TOPIC_AUTHORIZATION_FAILED" in refused.text and "Traceback" not in refused.text
    refused_delete = http.post("/topics/payroll/delete", data={"confirm": "payroll"})
    assert refused_delete.status_code == 403, refused_delete.text
    assert "TOPIC_AUTHORIZATION_FAILED" in refused_delete.text
    assert wanted not in acl_cluster.topics() and "payroll" in acl_cluster.topics()
    acl_cluster.grant("alice", wanted, AclOperation.CREATE, AclOperation.DESCRIBE)
    made = http.post("/topics", data={"name": wanted})
    assert made.status_code == 303, made.text
    assert wanted in acl_cluster.topics()
    listing = http.get("/topics")
    assert wanted in listing.text and "payroll" not in listing.text
    # Its page shows its configs too, which need one more permission.
    refused_page = http.get(f"/topics/{wanted}")
    assert refused_page.status_code == 403 and "AUTHORIZATION_FAILED" in refused_page.text
    acl_cluster.grant("alice", wanted, AclOperation.DESCRIBE_CONFIGS)
    page = http.get(f"/topics/{wanted}")
    assert page.status_code == 200 and wanted in page.text


def test_login_forbidden_action_and_csrf_in_chromium(
    scram_console: Any, acl_cluster: AclCluster, page: Any, snap: Callable[[Any, str], None]
) -> None:
    page.goto(scram_console.url + "/topics")
    expect(page).to_have_url(scram_console.url + "/login?next=%2Ftopics")
    form = page.locator("#login")
    form.locator("input[name=username]").fill("alice")
    form.locator("input[name=password]").fill("not-her-password")
    form.locator("button").click()
    expect(page.locator(".banner.error")).to_have_text("Wrong user name or password.")
    snap(page, "login")
    form.locator("input[name=password]").fill("alice-secret")
    form.locator("button").click()
    expect(page).to_have_url(scram_console.url + "/topics")
    expect(page.locator("#signed-in-as")).to_have_text("alice")
    # Creating a topic alice may not create: the broker's refusal, on the page.
    create = page.locator("#create-topic")
    create.locator("input[name=name]").fill("not-for-alice")
    create.locator("button").click()
    banner = page.locator(".banner.error")
    expect(banner).to_have_attribute("data-status", "403")
    expect(banner).to_contain_text("TOPIC_AUTHORIZATION_FAILED")
    expect(banner).to_contain_text("refused this to User:alice")
    snap(page, "forbidden")
    # A request of the console's own origin without the token, or with a forged one.
    page.goto(scram_console.url + "/topics")
    statuses = page.evaluate(
        """async () => Promise.all([undefined, "forged"].map(async token => {
            const body = new URLSearchParams({name: "sneaky"});
            if (token) body.set("csrf_token", token);
            const answer = await fetch("/topics", {method: "POST", body});
            return [answer.status, await answer.text()];
        }))"""
    )
    for status, text in statuses:
        assert status == 403 and "CSRF token" in text, text
    # A form on another page posting to the console.
    page.set_content(
        f'<form id="evil" method="post" action="{scram_console.url}/topics">'
        '<input name="name" value="sneaky"></form>'
    )
    with page.expect_navigation():
        page.locator("#evil").evaluate("form => form.submit()")
    expect(page.locator(".banner.error")).to_have_attribute("data-status", "403")
    assert "sneaky" not in acl_cluster.topics()
    # Signing out: the pages ask for a login again.
    page.goto(scram_console.url + "/topics")
    page.locator("#logout button").click()
    expect(page).to_have_url(scram_console.url + "/login")
    page.goto(scram_console.url + "/topics")
    expect(page).to_have_url(scram_console.url + "/login?next=%2Ftopics")


def test_read_only_console_in_chromium(
    broker: Any, console_factory: Any, page: Any, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "watched")
    users = tmp_path / "users"
    set_user(users, "viewer", "viewer-secret")
    console = console_factory(
        broker.bootstrap,
        access=AccessSettings(login="users-file", users=read_users(users), read_only=True),
    )
    page.goto(console.url + "/")
    page.locator("#login input[name=username]").fill("viewer")
    page.locator("#login input[name=password]").fill("viewer-secret")
    page.locator("#login button").click()
    expect(page.locator("h1")).to_have_text("Cluster overview")
    expect(page.locator("#read-only")).to_have_text("read-only")
    expect(page.get_by_role("link", name="Produce")).to_have_count(0)
    page.goto(console.url + "/topics/watched")
    expect(page.locator("#topic-name")).to_have_text("watched")
    expect(page.locator("form[method=post]:not(#logout)")).to_have_count(0)
    # Sent anyway, with the session's own token: refused, nothing deleted.
    token = page.locator("meta[name=csrf-token]").get_attribute("content")
    status = page.evaluate(
        """async token => (await fetch("/topics/watched/delete", {method: "POST",
            body: new URLSearchParams({confirm: "watched", csrf_token: token})})).status""",
        token,
    )
    assert status == 403
    page.goto(console.url + "/topics")
    expect(page.get_by_role("link", name="watched", exact=True)).to_have_count(1)
    # The admin client is kept in a name: a handle destroyed before its answer arrives
    # purges the request, and its future never completes.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("watched", 1, 1)])["watched"].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_a_password_changed_in_the_cluster_signs_the_user_out(
    secure_broker: Any, pki: Any, console_factory: Any
) -> None:
    # Connections re-authenticate (KIP-368) every 1.5 s: the console's connections as
    # alice end soon after her password changes.
    running = sasl_broker(secure_broker, pki, **{"connections.max.reauth.ms": "1500"})
    cluster = AclCluster(running)
    console = console_factory(cluster.sasl, access=AccessSettings(login="scram"),
                              **cluster.console_settings())
    with httpx.Client(base_url=console.url, timeout=30) as http:
        assert sign_in(http, "alice", "alice-secret").status_code == 303
        assert http.get("/topics").status_code == 200
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"changed"
        )
        for future in cluster.admin.alter_user_scram_credentials([upsert]).values():
            future.result(TIMEOUT)
        signed_out = wait_for(
            lambda: (page := http.get("/topics")).status_code == 401 and page,
            timeout=60, interval=0.5, what="the console to see the old password refused",
        )
        assert "no longer accepts the password alice signed in with" in signed_out.text
        assert http.get("/topics").status_code == 303  # the session has ended
        assert sign_in(http, "alice", "alice-secret").status_code == 401
        assert sign_in(http, "alice", "changed").status_code == 303
