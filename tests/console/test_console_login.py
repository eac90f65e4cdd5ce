"""The console's checks over plain HTTP (httpx) against a real broker: signing in with the
console's users file, what a missing or forged session, a missing or forged CSRF token and
a read-only console get (401/403, and the cluster unchanged), sign-out and expiry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    csrf_token_of,
    new_cookie,
    open_session,
    page_fixture,
    sign_in,
    snap_fixture,
)
from starlette.routing import Route

from kafka_wire import wait_for
from logbus import Admin
from logbus.client.admin import NewTopic
from logbus.client.types import TopicPartition
from logbus.console import AccessSettings, create_app
from logbus.console.access import FAILURE_WINDOW, MAX_FAILURES
from logbus.console.sessions import COOKIE_NAME, CSRF_HEADER
from logbus.console.users import read_users, set_user


@pytest.fixture(name="users")
def users_fixture(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "console-users"
    set_user(path, "alice", "alice-secret")
    set_user(path, "bob", "bob-secret")
    return read_users(path)


def _topics(bootstrap: str) -> set[str]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return set(admin.list_topics())


def _make_topic(bootstrap: str, name: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])


def _refused(response: httpx.Response, status: int, phrase: str) -> None:
    assert response.status_code == status, response.text
    assert 'class="banner error"' in response.text and phrase in response.text, response.text
    assert "Traceback" not in response.text


@pytest.fixture(name="http")
def http_fixture(broker: Any, console_factory: Any, users: dict[str, str]) -> Iterator[Any]:
    console = console_factory(
        broker.bootstrap, access=AccessSettings(login="users-file", users=users)
    )
    with httpx.Client(base_url=console.url, timeout=30) as client:
        yield client


def test_without_a_session_pages_go_to_the_login_form_and_changes_are_401(
    http: httpx.Client, broker: Any
) -> None:
    page = http.get("/topics?x=1")
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Ftopics%3Fx%3D1"
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}=")
    for attribute in ("HttpOnly", "Secure", "SameSite=Lax", "Path=/"):
        assert attribute in cookie
    form = http.get("/login")
    assert form.status_code == 200 and 'id="login"' in form.text
    # A browser that opened the login form, but never signed in, changes nothing.
    token = open_session(http, "/login")
    _refused(http.post("/topics", data={"name": "by-nobody", "csrf_token": token}), 401,
             "Sign in first")
    _refused(http.get("/groups/g/lag", headers={"HX-Request": "true"}), 401, "Sign in first")
    assert http.get("/static/console.css").status_code == 200
    assert "by-nobody" not in _topics(broker.bootstrap)


def test_wrong_passwords_and_unknown_users_are_refused_alike(http: httpx.Client) -> None:
    wrong = sign_in(http, "alice", "bob-secret")
    unknown = sign_in(http, "mallory", "alice-secret")
    for answer in (wrong, unknown):
        _refused(answer, 401, "Wrong user name or password.")
        assert new_cookie(answer) is None
    assert http.get("/topics").status_code == 303
    signed_in = sign_in(http, "alice", "alice-secret")
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"
    page = http.get("/topics")
    assert page.status_code == 200 and '<span id="signed-in-as">alice</span>' in page.text


def test_repeated_wrong_passwords_lock_that_name_out_for_a_while(http: httpx.Client) -> None:
    for _ in range(MAX_FAILURES):
        assert sign_in(http, "bob", "guess").status_code == 401
    locked = sign_in(http, "bob", "bob-secret")  # the right one, too late
    _refused(locked, 429, "Too many wrong passwords for bob")
    assert 0 < int(locked.headers["Retry-After"]) <= FAILURE_WINDOW
    assert new_cookie(locked) is None
    assert sign_in(http, "alice", "alice-secret").status_code == 303  # others are not


def test_a_sign_in_replaces_the_browser_id(http: httpx.Client) -> None:
    open_session(http, "/login")
    before = http.headers["Cookie"]
    answer = http.post("/login", data={"username": "bob", "password": "bob-secret",
                                       "next": "https://evil.example/"})
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    after = new_cookie(answer)
    assert after is not None and after != before
    # The id known before the sign-in (perhaps planted by someone else) is not signed in.
    assert http.get("/topics", headers={"Cookie": before}).status_code == 303
    assert http.get("/topics", headers={"Cookie": after}).status_code == 200


def test_forged_sessions_are_not_signed_in(http: httpx.Client, broker: Any) -> None:
    sign_in(http, "alice", "alice-secret")
    real = http.headers["Cookie"]
    browser, _, mac = real.partition("=")[2].rpartition(".")
    forgeries = [
        f"{COOKIE_NAME}={browser}",  # unsigned
        f"{COOKIE_NAME}={browser}.{mac[::-1]}",  # signed by someone else
        f"{COOKIE_NAME}={browser[:-1]}x.{mac}",  # another id under the real signature
    ]
    for cookie in forgeries:
        headers = {"Cookie": cookie}
        assert http.get("/topics", headers=headers).status_code == 303
        _refused(http.post("/topics", data={"name": "forged"}, headers=headers), 401,
                 "Sign in first")
    assert "forged" not in _topics(broker.bootstrap)
    assert http.get("/topics").status_code == 200  # the real one still works


def test_every_change_needs_the_sessions_csrf_token(http: httpx.Client, broker: Any) -> None:
    _make_topic(broker.bootstrap, "kept")
    sign_in(http, "alice", "alice-secret")
    token = http.headers.pop(CSRF_HEADER)
    other = httpx.Client(base_url=str(http.base_url), timeout=30)
    with other:
        sign_in(other, "bob", "bob-secret")
        bobs_token = other.headers[CSRF_HEADER]
    assert bobs_token != token
    for bad in ({}, {"csrf_token": ""}, {"csrf_token": "forged"}, {"csrf_token": bobs_token}):
        _refused(http.post("/topics", data={"name": "made", **bad}), 403, "CSRF token")
        _refused(http.post("/topics/kept/delete", data={"confirm": "kept", **bad}), 403,
                 "CSRF token")
    assert {"made", "kept"} & _topics(broker.bootstrap) == {"kept"}
    # The form's hidden field, or the header htmx sends: accepted.
    made = http.post("/topics", data={"name": "made", "csrf_token": token})
    assert made.status_code == 303
    deleted = http.post("/topics/kept/delete", data={"confirm": "kept"},
                        headers={CSRF_HEADER: token})
    assert deleted.status_code == 303
    assert {"made", "kept"} & _topics(broker.bootstrap) == {"made"}


def test_no_post_route_runs_without_the_token(
    http: httpx.Client, users: dict[str, str]
) -> None:
    sign_in(http, "alice", "alice-secret")
    del http.headers[CSRF_HEADER]
    app = create_app({"bootstrap.servers": "127.0.0.1:1"},
                     access=AccessSettings(login="users-file", users=users))
    posts = [r.path for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert len(posts) >= 8
    for path in posts:
        concrete = path.replace("{name}", "t").replace("{group}", "g")
        _refused(http.post(concrete, data={"anything": "1"}), 403, "CSRF token")
    assert http.get("/topics").status_code == 200  # logout was refused too


def test_sign_out_ends_the_session(http: httpx.Client) -> None:
    sign_in(http, "alice", "alice-secret")
    cookie = http.headers["Cookie"]
    _refused(http.post("/logout", headers={CSRF_HEADER: "nope"}), 403, "CSRF token")
    out = http.post("/logout")
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert new_cookie(out) not in (None, cookie)
    assert http.get("/topics", headers={"Cookie": cookie}).status_code == 303
    _refused(http.post("/topics", data={"name": "late"}, headers={"Cookie": cookie}), 401,
             "Sign in first")


def test_an_idle_session_expires(broker: Any, console_factory: Any,
                                 users: dict[str, str]) -> None:
    console = console_factory(
        broker.bootstrap,
        access=AccessSettings(login="users-file", users=users, session_timeout=1.0),
    )
    with httpx.Client(base_url=console.url, timeout=30) as http:
        token = open_session(http, "/login")
        answer = http.post("/login", data={"username": "alice", "password": "alice-secret",
                                           "csrf_token": token})
        assert answer.status_code == 303
        http.headers["Cookie"] = str(new_cookie(answer))
        # Each request keeps a session alive: poll less often than it expires.
        wait_for(lambda: http.get("/topics").status_code == 303, timeout=30, interval=1.5,
                 what="the session to expire")
        login = http.get("/login")
        assert login.status_code == 200 and csrf_token_of(login.text)


def test_a_read_only_console_hides_and_refuses_every_change(
    broker: Any, console_factory: Any, users: dict[str, str]
) -> None:
    _make_topic(broker.bootstrap, "stays")
    console = console_factory(
        broker.bootstrap,
        access=AccessSettings(login="users-file", users=users, read_only=True),
    )
    with httpx.Client(base_url=console.url, timeout=30) as http:
        sign_in(http, "alice", "alice-secret")
        topics = http.get("/topics")
        assert topics.status_code == 200 and 'id="read-only"' in topics.text
        assert 'id="create-topic"' not in topics.text and 'href="/produce"' not in topics.text
        topic = http.get("/topics/stays")
        assert topic.status_code == 200
        for form in ("alter-config", "add-partitions", "delete-topic"):
            assert f'id="{form}"' not in topic.text
        _refused(http.get("/produce"), 403, "read-only")
        _refused(http.post("/topics", data={"name": "new"}), 403, "read-only")
        _refused(http.post("/topics/stays/delete", data={"confirm": "stays"}), 403, "read-only")
        _refused(http.post("/produce", data={"topic": "stays", "value": "v"}), 403, "read-only")
        _refused(http.post("/groups/g/reset", data={"strategy": "earliest"}), 403, "read-only")
        assert {"new", "stays"} & _topics(broker.bootstrap) == {"stays"}
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            ends = admin.list_offsets({TopicPartition("stays", 0): "latest"})
        assert [o.offset for o in ends.values()] == [0]
        # Signing out still works.
        assert http.post("/logout").status_code == 303


def test_a_console_without_login_still_wants_csrf_tokens(
    broker: Any, console_factory: Any
) -> None:
    console = console_factory(broker.bootstrap)
    with httpx.Client(base_url=console.url, timeout=30) as http:
        assert http.get("/login").status_code == 404
        page = http.get("/topics")
        assert page.status_code == 200 and 'id="signed-in-as"' not in page.text
        _refused(http.post("/topics", data={"name": "no-token"}), 403, "CSRF token")
        open_session(http, "/topics")
        assert http.post("/topics", data={"name": "with-token"}).status_code == 303
    assert {"no-token", "with-token"} & _topics(broker.bootstrap) == {"with-token"}


def test_the_login_form_warns_when_the_cookie_cannot_be_kept(http: httpx.Client) -> None:
    assert 'id="cookie-warning"' not in http.get("/login").text
    # Plain HTTP under another machine's name: browsers drop a Secure cookie.
    remote = http.get("/login", headers={"Host": "console.example:8080"})
    assert remote.status_code == 200 and 'id="cookie-warning"' in remote.text
