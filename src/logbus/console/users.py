"""The console's own users (`logbus console --users-file FILE`): one `name:hash` a line,
each hash salted scrypt, written by `logbus console --users-file FILE --add-user NAME`.

    # comments and empty lines are skipped
    alice:scrypt$16384$8$1$<salt, base64>$<key, base64>

The parameters travel with each hash, so entries made with other costs keep working."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

# scrypt's cost: N = 2**14, r = 8, p = 1 (16 MiB, tens of milliseconds a check), the
# interactive-login parameters of the scrypt paper and of OWASP's password advice.
SCRYPT_N = 16384
SCRYPT_R = 8
SCRYPT_P = 1
_KEY_BYTES = 32
_SALT_BYTES = 16
# Above these a hash is refused rather than checked: a file must not make a login take
# minutes or gigabytes.
_MAX_N = 1 << 20
_MAX_RP = 64
_SCHEME = "scrypt"
USER_NAME = re.compile(r"[A-Za-z0-9._@+-]{1,128}")


class UsersFileError(ValueError):
    """A users file that cannot be read (the message names the file and line)."""


@dataclass(frozen=True)
class _Parameters:
    n: int
    r: int
    p: int
    salt: bytes
    key: bytes


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    """A new salted hash of `password`, as the users file holds it."""
    salt = secrets.token_bytes(_SALT_BYTES)
    key = _derive(password, _Parameters(n, r, p, salt, b""))
    return "$".join(
        (_SCHEME, str(n), str(r), str(p), _b64(salt), _b64(key))
    )


def verify_password(password: str, stored: str) -> bool:
    """True when `password` is the one `stored` was made from."""
    params = _parse(stored)
    return hmac.compare_digest(_derive(password, params), params.key)


def _derive(password: str, params: _Parameters) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=params.salt, n=params.n, r=params.r, p=params.p,
        maxmem=256 * params.n * params.r + (1 << 20), dklen=len(params.key) or _KEY_BYTES,
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _parse(stored: str) -> _Parameters:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != _SCHEME:
        raise ValueError(f"expected {_SCHEME}$N$r$p$salt$key")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except ValueError:
        raise ValueError("N, r and p must be numbers, salt and key base64") from None
    if n < 2 or n & (n - 1) or n > _MAX_N or not 0 < r <= _MAX_RP or not 0 < p <= _MAX_RP:
        raise ValueError(f"N must be a power of 2 up to {_MAX_N}, r and p 1 to {_MAX_RP}")
    if not salt or not key:
        raise ValueError("salt and key must not be empty")
    return _Parameters(n, r, p, salt, key)


def read_users(path: Path) -> dict[str, str]:
    """Every user of the file and its hash (UsersFileError naming a bad line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsersFileError(f"cannot read the users file {path}: {exc}") from None
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        name, sep, stored = entry.partition(":")
        where = f"{path}, line {number}"
        if not sep or not USER_NAME.fullmatch(name):
            raise UsersFileError(f"{where}: expected NAME:HASH with a name of letters, digits "
                                 "and . _ @ + -")
        try:
            _parse(stored)
        except ValueError as exc:
            raise UsersFileError(f"{where}: the hash of {name} is not readable: {exc}") from None
        if name in users:
            raise UsersFileError(f"{where}: {name} is listed twice")
        users[name] = stored
    return users


def set_user(path: Path, name: str, password: str) -> bool:
    """Add `name` to the file with a new hash of `password`, or replace its hash; the file
    is created if missing (readable by its owner only) and replaced atomically. True when
    the user was new."""
    if not USER_NAME.fullmatch(name):
        raise UsersFileError(f"user name {name!r}: letters, digits and . _ @ + - only")
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if lines:
        read_users(path)  # refuse to rewrite a file that is already wrong
    entry = f"{name}:{hash_password(password)}"
    kept = [line for line in lines if line.strip().partition(":")[0] != name]
    new = len(kept) == len(lines)
    temporary = path.with_name(path.name + ".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write("\n".join([*kept, entry]) + "\n")
    os.replace(temporary, path)
    return new
