"""Fixtures of the console tests (imported by each test module: a conftest.py here would
be a second `conftest` module and hide tests/conftest.py from the other tests' imports):
the console served by uvicorn in a thread of the test
process, Debian's Chromium driven by Playwright, a screenshot of the page when a test
fails (test-artifacts/console/), and the docs' screenshots on request
(`LOGBUS_CONSOLE_SCREENSHOTS=docs/images`). For plain HTTP clients: taking a session
cookie and its CSRF token as a browser would (`open_session`, `sign_in`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus.console import AccessSettings, create_app
from logbus.console.sessions import COOKIE_NAME, CSRF_HEADER

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
# Where the docs' screenshots go when this is set (docs/console.md names them).
SCREENSHOTS = os.environ.get("LOGBUS_CONSOLE_SCREENSHOTS", "")


ConsoleServer = AsgiServer  # the console in this process


def start_console(
    bootstrap: str,
    allowed_hosts: list[str] | None = None,
    access: AccessSettings | None = None,
    schema_registry_url: str | None = None,
    **settings: Any,
) -> ConsoleServer:
    app = create_app({"bootstrap.servers": bootstrap, **settings}, allowed_hosts=allowed_hosts,
                     access=access, schema_registry_url=schema_registry_url)
    return serve_in_thread(app, "console", timeout=30)


@pytest.fixture(name="console_factory")
def console_factory_fixture() -> Iterator[Callable[..., ConsoleServer]]:
    started: list[ConsoleServer] = []

    def make(
        bootstrap: str,
        allowed_hosts: list[str] | None = None,
        access: AccessSettings | None = None,
        schema_registry_url: str | None = None,
        **settings: Any,
    ) -> ConsoleServer:
        started.append(
            start_console(bootstrap, allowed_hosts, access, schema_registry_url, **settings)
        )
        return started[-1]

    yield make
    for console in started:
        console.stop()


@pytest.fixture(name="page")
def page_fixture(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser page; its screenshot is kept in test-artifacts/console/ if the
    test fails."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    tab = context.new_page()
    # A failed call phase is counted before the fixtures are torn down.
    failed_before = request.session.testsfailed
    try:
        yield tab
    finally:
        if request.session.testsfailed > failed_before:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
            try:
                tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
            except Exception as exc:  # the page may be gone with the failure
                print(f"no screenshot of {name}: {exc}")
        context.close()


@pytest.fixture(name="snap")
def snap_fixture() -> Callable[[Any, str], None]:
    """`snap(page, "topics")` writes docs/images/console-topics.png when the docs'
    screenshots are asked for (LOGBUS_CONSOLE_SCREENSHOTS); otherwise does nothing."""

    def take(tab: Any, name: str) -> None:
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            tab.screenshot(path=str(Path(SCREENSHOTS) / f"console-{name}.png"), full_page=True)

    return take


_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def new_cookie(response: httpx.Response) -> str | None:
    """The session cookie a response sets ("logbus_console=..."), if it sets one. httpx
    keeps Secure cookies from plain-HTTP pages to itself, so the tests carry it."""
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{COOKIE_NAME}="):
            return header.split(";", 1)[0]
    return None


def csrf_token_of(html: str) -> str:
    found = _CSRF_META.search(html)
    assert found is not None, html
    return found.group(1)


def open_session(http: httpx.Client, path: str = "/") -> str:
    """What a browser has after opening `path`: the session cookie (sent with every later
    request of `http`) and the CSRF token of its forms (sent as the X-CSRF-Token header);
    returns the token."""
    page = http.get(path, headers={"Cookie": http.headers.get("Cookie", "")})
    cookie = new_cookie(page) or http.headers.get("Cookie")
    assert cookie, page.headers
    http.headers["Cookie"] = cookie
    token = csrf_token_of(page.text)
    http.headers[CSRF_HEADER] = token
    return token


def sign_in(http: httpx.Client, user: str, password: str) -> httpx.Response:
    """The login form filled in and sent, as a browser would; on success `http` carries the
    new session's cookie and CSRF token. Returns the answer to the form."""
    open_session(http, "/login")
    answer = http.post("/login", data={"username": user, "password": password, "next": "/"},
                       follow_redirects=False)
    cookie = new_cookie(answer)
    if answer.status_code == 303 and cookie is not None:
        http.headers["Cookie"] = cookie
        open_session(http, "/topics")
    return answer
