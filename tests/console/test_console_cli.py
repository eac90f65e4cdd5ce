"""`logbus console` as a subprocess: it prints its URL, serves the pages of a real broker,
binds to loopback by default and stops cleanly on SIGTERM; bad options are refused."""

from __future__ import annotations

import ast
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    csrf_token_of,
    page_fixture,
    sign_in,
    snap_fixture,
)

from kafka_wire import wait_for
from logbus.cli.console import DEFAULT_BIND, bind_address
from logbus.cli.main import main
from logbus.console.users import read_users, set_user, verify_password
from ports import free_port

pytest_plugins = ["secure_fixtures"]

CLI = [sys.executable, "-m", "logbus.cli.main"]
SRC = Path(__file__).resolve().parents[2] / "src" / "logbus"
_NOT_FOR_THE_CONSOLE = [
    ["logbus", package]
    for package in ("server", "storage", "controller", "coordinator", "cli", "spark")
]


def _serve(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([*CLI, "console", *args], stdout=out, stderr=subprocess.STDOUT)


def _first_answer(
    proc: subprocess.Popen[bytes], url: str, log: Path, verify: Any = True
) -> httpx.Response:
    def answers() -> httpx.Response | None:
        try:
            return httpx.get(url + "/", timeout=10, verify=verify)
        except httpx.TransportError:
            assert proc.poll() is None, log.read_text()
            return None

    found: httpx.Response = wait_for(answers, timeout=60, interval=0.2,
                                     what="the console to answer")
    return found


def _stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM: uvicorn shuts down (closing the console's clients), then re-raises it."""
    proc.terminate()
    status = proc.wait(30)
    assert status in (0, -signal.SIGTERM), log.read_text()
    assert "Traceback" not in log.read_text()


def test_console_command_serves_the_cluster(broker: Any, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "console.log"
    proc = _serve(["--bootstrap-server", broker.bootstrap, "--bind", f"127.0.0.1:{port}"], log)
    try:
        url = f"http://127.0.0.1:{port}"
        page = _first_answer(proc, url, log)
        assert page.status_code == 200
        assert "Cluster overview" in page.text
        assert f"{url}/" in log.read_text()
    finally:
        _stop(proc, log)


def test_console_binds_loopback_by_default_and_refuses_bad_binds() -> None:
    assert DEFAULT_BIND == "127.0.0.1:8080"
    assert bind_address(DEFAULT_BIND) == ("127.0.0.1", 8080)
    assert bind_address("[::1]:9000") == ("::1", 9000)
    for bad, message in (("8080", "expected HOST:PORT"), ("localhost:http", "a port number"),
                         ("localhost:70000", "0 to 65535")):
        out = subprocess.run([*CLI, "console", "--bind", bad], capture_output=True,
                             timeout=60)
        assert out.returncode == 2
        assert message in out.stderr.decode(), out.stderr


def test_console_uses_only_the_client() -> None:
    """The console is a client application: it reaches the cluster through the client
    library only, never the broker's packages."""
    offending = set()
    for path in sorted((SRC / "console").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module] if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            offending |= {
                f"{path.name}: {n}" for n in names
                if n.split(".")[:2] in _NOT_FOR_THE_CONSOLE
            }
    assert not offending, offending


def test_templates_and_static_assets_are_package_data() -> None:
    """Every template and static file matches a package-data pattern of pyproject.toml,
    so an installed wheel serves the same pages as the source tree."""
    import fnmatch
    import tomllib

    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["logbus"]
    files = [
        str(path.relative_to(SRC))
        for folder in ("templates", "static")
        for path in sorted((SRC / "console" / folder).rglob("*"))
        if path.is_file()
    ]
    assert any(name.endswith("htmx.min.js") for name in files)
    missing = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not missing, missing


def test_add_user_then_serve_a_read_only_console_with_login(broker: Any, tmp_path: Path) -> None:
    users = tmp_path / "console-users"
    for name, password in (("alice", "alice-secret"), ("bob", "old"), ("bob", "bob-secret")):
        added = subprocess.run(
            [*CLI, "console", "--users-file", str(users), "--add-user", name],
            input=f"{password}\n".encode(), capture_output=True, timeout=60,
        )
        assert added.returncode == 0, added.stderr
    assert "changed the password of bob" in added.stdout.decode()
    found = read_users(users)
    assert sorted(found) == ["alice", "bob"] and verify_password("bob-secret", found["bob"])
    secret = tmp_path / "secret"
    secret.write_text("x" * 48)
    port = free_port()
    log = tmp_path / "console.log"
    proc = _serve(["--bootstrap-server", broker.bootstrap, "--bind", f"127.0.0.1:{port}",
                   "--users-file", str(users), "--read-only",
                   "--session-secret-file", str(secret)], log)
    try:
        url = f"http://127.0.0.1:{port}"
        first = _first_answer(proc, url, log)
        assert first.status_code == 303 and first.headers["location"].startswith("/login")
        with httpx.Client(base_url=url, timeout=30) as http:
            assert sign_in(http, "bob", "bob-secret").status_code == 303
            page = http.get("/topics")
            assert page.status_code == 200 and 'id="create-topic"' not in page.text
            assert http.post("/topics", data={"name": "x"}).status_code == 403
        assert "(login: users-file, read-only)" in log.read_text()
    finally:
        _stop(proc, log)


def test_https_with_the_session_cookie_kept_by_the_client(
    broker: Any, tmp_path: Path, pki: Any
) -> None:
    issued = pki.ca.issue("console", "localhost", server=True)
    users = tmp_path / "users"
    set_user(users, "carol", "carol-secret")
    port = free_port()
    log = tmp_path / "console.log"
    proc = _serve(["--bootstrap-server", broker.bootstrap, "--bind", f"127.0.0.1:{port}",
                   "--users-file", str(users), "--ssl-certfile", str(issued.cert_file),
                   "--ssl-keyfile", str(issued.key_file)], log)
    trust = ssl.create_default_context(cafile=str(pki.ca.cert_file))
    try:
        url = f"https://127.0.0.1:{port}"
        assert _first_answer(proc, url, log, trust).status_code == 303
        assert f"{url}/" in log.read_text()
        # Over HTTPS an ordinary cookie jar keeps and sends the Secure cookie itself.
        with httpx.Client(base_url=url, timeout=30, verify=trust) as http:
            form = http.get("/login")
            assert form.status_code == 200 and 'id="cookie-warning"' not in form.text
            signed_in = http.post("/login", data={
                "username": "carol", "password": "carol-secret", "next": "/topics",
                "csrf_token": csrf_token_of(form.text),
            })
            assert signed_in.status_code == 303, signed_in.text
            page = http.get("/topics")
            assert page.status_code == 200 and '<span id="signed-in-as">carol</span>' in page.text
    finally:
        _stop(proc, log)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--users-file", "{missing}"], "cannot read the users file"),
        (["--users-file", "{empty}"], "has no users: add one with --add-user"),
        (["--login", "users-file"], "--login users-file needs --users-file"),
        (["--login", "scram"], "--login scram needs --command-config"),
        (["--login", "none", "--users-file", "{empty}"], "--users-file is for --login"),
        (["--session-secret-file", "{short}"], "at least 32 bytes"),
        (["--add-user", "carol"], "--add-user needs --users-file"),
        (["--ssl-certfile", "{empty}"], "--ssl-certfile and --ssl-keyfile go together"),
    ],
)
def test_access_options_that_cannot_work_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    files = {"missing": tmp_path / "missing", "empty": tmp_path / "empty",
             "short": tmp_path / "short"}
    files["empty"].write_text("# nobody yet\n")
    files["short"].write_text("tiny")
    args = [o.format(**{k: str(v) for k, v in files.items()}) for o in options]
    assert main(["console", "--bootstrap-server", "127.0.0.1:1", *args]) == 1
    assert message in capsys.readouterr().err


def test_the_login_follows_the_settings_unless_told(tmp_path: Path) -> None:
    from logbus.cli.console import access_settings
    from logbus.cli.main import build_parser

    scram = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}
    plain = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    users = tmp_path / "users"
    set_user(users, "ann", "ann-secret")

    def login(options: list[str], settings: dict[str, str]) -> str:
        args = build_parser().parse_args(["console", *options])
        return access_settings(args, settings).login

    assert login([], {}) == "none"
    assert login([], plain) == "none"
    assert login([], scram) == "scram"
    assert login(["--login", "none"], scram) == "none"
    assert login(["--users-file", str(users)], scram) == "users-file"
    assert login(["--read-only"], scram) == "scram"
