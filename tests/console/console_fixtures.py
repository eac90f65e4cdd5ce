"""Fixtures of the console tests (imported by each test module: a conftest.py here would
be a second `conftest` module and hide tests/conftest.py from the other tests' imports):
the console served by uvicorn in a thread of the test
process, Debian's Chromium driven by Playwright, a screenshot of the page when a test
fails (test-artifacts/console/), and the docs' screenshots on request
(`LOGBUS_CONSOLE_SCREENSHOTS=docs/images`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from asgi_servers import AsgiServer, serve_in_thread
from logbus.console import create_app

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
# Where the docs' screenshots go when this is set (docs/console.md names them).
SCREENSHOTS = os.environ.get("LOGBUS_CONSOLE_SCREENSHOTS", "")


ConsoleServer = AsgiServer  # the console in this process


def start_console(
    bootstrap: str, allowed_hosts: list[str] | None = None, **settings: Any
) -> ConsoleServer:
    app = create_app({"bootstrap.servers": bootstrap, **settings}, allowed_hosts=allowed_hosts)
    return serve_in_thread(app, "console", timeout=30)


@pytest.fixture(name="console_factory")
def console_factory_fixture() -> Iterator[Callable[..., ConsoleServer]]:
    started: list[ConsoleServer] = []

    def make(
        bootstrap: str, allowed_hosts: list[str] | None = None, **settings: Any
    ) -> ConsoleServer:
        started.append(start_console(bootstrap, allowed_hosts, **settings))
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
