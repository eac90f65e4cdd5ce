"""The console's users file, cookie signing, CSRF tokens and session table, driven with
plain values (a clock of our own for expiry)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from logbus.console.access import FAILURE_WINDOW, MAX_FAILURES, FailedSignIns, TooManyFailures
from logbus.console.sessions import CookieSigner, SessionStore
from logbus.console.users import (
    UsersFileError,
    hash_password,
    read_users,
    set_user,
    verify_password,
)
from logbus.console.views.login import _next_page

SECRET = b"s" * 32


def test_a_hash_is_salted_and_checks_only_its_password() -> None:
    first, second = hash_password("pa55word"), hash_password("pa55word")
    assert first != second and first.startswith("scrypt$16384$8$1$")
    assert verify_password("pa55word", first) and verify_password("pa55word", second)
    assert not verify_password("pa55word ", first)
    assert not verify_password("", first)


def test_hashes_made_with_other_costs_still_check() -> None:
    cheap = hash_password("x", n=1024, r=4, p=2)
    assert cheap.startswith("scrypt$1024$4$2$") and verify_password("x", cheap)


@pytest.mark.parametrize(
    "stored",
    [
        "md5$abc",
        "scrypt$16384$8$1$c2FsdA==",
        "scrypt$1000$8$1$c2FsdA==$a2V5",  # N not a power of 2
        "scrypt$1073741824$8$1$c2FsdA==$a2V5",  # N too costly to check
        "scrypt$16384$8$1$not base64$a2V5",
        "scrypt$16384$8$1$$a2V5",
    ],
)
def test_unreadable_hashes_are_refused(stored: str) -> None:
    with pytest.raises(ValueError):
        verify_password("x", stored)


def test_set_user_adds_and_replaces_entries_in_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "console-users"
    assert set_user(path, "alice", "alice-pw") is True
    assert set_user(path, "bob@example.com", "bob-pw") is True
    assert set_user(path, "alice", "new-pw") is False
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    users = read_users(path)
    assert sorted(users) == ["alice", "bob@example.com"]
    assert verify_password("new-pw", users["alice"])
    assert not verify_password("alice-pw", users["alice"])
    assert verify_password("bob-pw", users["bob@example.com"])
    assert not list(tmp_path.glob("*.new"))


def test_comments_and_empty_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text(f"# the console's users\n\n  carol:{hash_password('c')}  \n")
    assert list(read_users(path)) == ["carol"]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("no-colon-here\n", "line 1: expected NAME:HASH"),
        ("bad name:scrypt$1\n", "line 1: expected NAME:HASH"),
        ("dave:plain-text-password\n", "the hash of dave is not readable"),
        ("erin:{h}\nerin:{h}\n", "line 2: erin is listed twice"),
    ],
)
def test_bad_users_files_name_the_line(tmp_path: Path, text: str, phrase: str) -> None:
    path = tmp_path / "users"
    original = text.format(h=hash_password("e", n=1024))
    path.write_text(original)
    with pytest.raises(UsersFileError, match=phrase):
        read_users(path)
    # ... and are not rewritten by set_user either.
    with pytest.raises(UsersFileError):
        set_user(path, "frank", "f")
    assert path.read_text() == original


def test_set_user_refuses_names_the_file_cannot_hold(tmp_path: Path) -> None:
    for name in ("", "a:b", "with space", "x" * 129):
        with pytest.raises(UsersFileError):
            set_user(tmp_path / "users", name, "pw")
    assert not (tmp_path / "users").exists()


def test_cookies_are_signed_and_forgeries_are_not_read() -> None:
    signer = CookieSigner(SECRET)
    value = signer.cookie_value("abc")
    assert signer.browser_id(value) == "abc"
    browser, _, mac = value.rpartition(".")
    assert signer.browser_id(f"abd.{mac}") is None  # another id, the old signature
    assert signer.browser_id(f"{browser}.{mac[:-1]}A") is None
    assert signer.browser_id(browser) is None
    assert signer.browser_id("") is None and signer.browser_id(None) is None
    assert CookieSigner(b"t" * 32).browser_id(value) is None  # another console's secret
    with pytest.raises(ValueError):
        CookieSigner(b"short")


def test_csrf_tokens_belong_to_one_browser_id() -> None:
    signer = CookieSigner(SECRET)
    token = signer.csrf_token("abc")
    assert signer.csrf_matches("abc", token)
    assert not signer.csrf_matches("abd", token)
    assert not signer.csrf_matches("abc", None) and not signer.csrf_matches("abc", "")
    assert not signer.csrf_matches("abc", token + "x")
    assert token != signer.cookie_value("abc").rpartition(".")[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_end_when_idle_and_at_their_maximum_age() -> None:
    clock = Clock()
    store = SessionStore(idle_timeout=60, max_age=300, clock=clock)
    browser, evicted = store.sign_in("alice", None)
    assert evicted == []
    found = store.find(browser)
    assert found is not None and found.user == "alice"
    assert store.find("another-id") is None and store.find(None) is None
    for _ in range(4):  # used every 50 seconds: alive, until the maximum age
        clock.now += 50
        assert store.find(browser) is not None
    clock.now += 50
    assert store.find(browser) is not None
    clock.now += 50  # 300 seconds after the sign-in
    assert store.find(browser) is None
    assert [s.user for s in store.expired()] == ["alice"] and len(store) == 0
    idle, _ = store.sign_in("bob", None)
    clock.now += 61
    assert store.find(idle) is None


def test_sign_out_and_the_cap_on_sessions() -> None:
    clock = Clock()
    store = SessionStore(clock=clock, max_sessions=2)
    first, _ = store.sign_in("a", None)
    clock.now += 1
    second, _ = store.sign_in("b", None)
    clock.now += 1
    assert store.find(first) is not None  # used last: the other one goes first
    third, evicted = store.sign_in("c", None)
    assert [s.user for s in evicted] == ["b"]
    assert store.find(second) is None and store.find(third) is not None
    assert store.sign_out(first) is not None and store.find(first) is None
    assert store.sign_out(first) is None
    assert [s.user for s in store.take_all()] == ["c"] and len(store) == 0


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/topics/a?x=1", "/topics/a?x=1"),
        ("", "/"),
        (None, "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("topics", "/"),
    ],
)
def test_after_sign_in_only_this_consoles_pages(target: str | None, expected: str) -> None:
    assert _next_page(target) == expected


def test_failed_sign_ins_lock_one_name_from_one_address_for_a_while() -> None:
    clock = Clock()
    failures = FailedSignIns(clock)
    for _ in range(MAX_FAILURES - 1):
        failures.check("10.0.0.1", "alice")
        failures.failed("10.0.0.1", "alice")
        clock.now += 1
    failures.check("10.0.0.1", "alice")  # one more try is allowed
    failures.failed("10.0.0.1", "ALICE")  # names are compared case-blind
    with pytest.raises(TooManyFailures) as refused:
        failures.check("10.0.0.1", "alice")
    assert refused.value.retry_after == FAILURE_WINDOW - (MAX_FAILURES - 1)
    failures.check("10.0.0.2", "alice")  # from elsewhere: not locked out
    failures.check("10.0.0.1", "bob")
    clock.now += refused.value.retry_after + 0.5  # the first failure is out of the window
    failures.check("10.0.0.1", "alice")
    failures.failed("10.0.0.1", "alice")
    with pytest.raises(TooManyFailures):
        failures.check("10.0.0.1", "alice")


def test_a_success_forgets_the_failures() -> None:
    failures = FailedSignIns(Clock())
    for _ in range(MAX_FAILURES - 1):
        failures.failed("10.0.0.1", "alice")
    failures.succeeded("10.0.0.1", "alice")
    for _ in range(MAX_FAILURES - 1):
        failures.failed("10.0.0.1", "alice")
    failures.check("10.0.0.1", "alice")
