"""`logbus console`: the web console (logbus.console) for a cluster, served by uvicorn.

logbus console --bootstrap-server HOST:PORT [--bind 127.0.0.1:8080] [--command-config FILE]
    [--login none|users-file|scram] [--users-file FILE] [--read-only]
    [--session-timeout SECONDS] [--session-secret-file FILE] [--ssl-certfile F --ssl-keyfile F]
    [--schema-registry-url URL]
logbus console --users-file FILE --add-user NAME   (the password on stdin or at a prompt)
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_settings,
    fail,
    positive_int,
    security_of,
)

if TYPE_CHECKING:
    from logbus.console.access import AccessSettings, Login

DEFAULT_BIND = "127.0.0.1:8080"
LOGIN_CHOICES = ("none", "users-file", "scram")
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Placeholders that let the console's settings be checked when, with SCRAM logins, it has
# no credentials of its own (each user brings theirs).
_CHECK_ONLY = {"sasl.username": "-", "sasl.password": "-"}


def bind_address(text: str) -> tuple[str, int]:
    """HOST:PORT to listen on, for argparse."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0 to 65535, got {port}")
    return host.strip("[]"), port


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "console", help="a web console for the cluster (topics, messages, groups, lag)"
    )
    add_bootstrap(parser)
    parser.add_argument(
        "--bind",
        type=bind_address,
        default=bind_address(DEFAULT_BIND),
        metavar="HOST:PORT",
        help=f"where the console listens (default: {DEFAULT_BIND}, this machine only)",
    )
    parser.add_argument(
        "--schema-registry-url", metavar="URL",
        help="show this schema registry's subjects and versions (e.g. http://localhost:8081)",
    )
    _add_access_options(parser)
    parser.set_defaults(func=run)


def _add_access_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--login", choices=LOGIN_CHOICES, default=None,
        help="how people sign in: users-file (--users-file), scram (the cluster's SCRAM "
        "credentials, over the listener of --command-config) or none; default: users-file "
        "with --users-file, scram when --command-config names a SCRAM mechanism, else none",
    )
    parser.add_argument(
        "--users-file", type=Path, metavar="FILE",
        help="the console's users, one NAME:HASH a line (made with --add-user)",
    )
    parser.add_argument(
        "--add-user", metavar="NAME",
        help="add NAME to --users-file (or change its password) and exit; the password is "
        "read from stdin, or asked for twice on a terminal",
    )
    parser.add_argument(
        "--read-only", action="store_true",
        help="show the cluster but change nothing: every form is hidden and refused",
    )
    parser.add_argument(
        "--session-timeout", type=positive_int, default=None, metavar="SECONDS",
        help="sign a browser out after this long without a request (default: 1800)",
    )
    parser.add_argument(
        "--session-secret-file", type=Path, metavar="FILE",
        help="the secret that signs session cookies (default: a new one at each start, "
        "which signs everyone out when the console restarts)",
    )
    parser.add_argument("--ssl-certfile", metavar="FILE",
                        help="serve HTTPS with this certificate chain (PEM)")
    parser.add_argument("--ssl-keyfile", metavar="FILE",
                        help="the private key of --ssl-certfile (PEM)")


def access_settings(args: argparse.Namespace, settings: dict[str, Any]) -> AccessSettings:
    """Who may sign in, from the options (CommandError for a combination that cannot
    work)."""
    from logbus.console.access import AccessSettings
    from logbus.console.sessions import IDLE_TIMEOUT_SECONDS
    from logbus.console.users import UsersFileError, read_users

    mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "")
    scram_settings = mechanism.upper() in _SCRAM
    login = cast(
        "Login",
        args.login or ("users-file" if args.users_file else "scram" if scram_settings else "none"),
    )
    if login == "users-file" and args.users_file is None:
        raise CommandError("--login users-file needs --users-file FILE")
    if login != "users-file" and args.users_file is not None:
        raise CommandError(f"--users-file is for --login users-file, not {login}")
    if login == "scram" and not scram_settings:
        raise CommandError(
            "--login scram needs --command-config with security.protocol=SASL_PLAINTEXT or "
            "SASL_SSL and sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    users: dict[str, str] = {}
    if login == "users-file":
        try:
            users = read_users(args.users_file)
        except UsersFileError as exc:
            raise CommandError(str(exc)) from None
        if not users:
            raise CommandError(f"{args.users_file} has no users: add one with --add-user")
    return AccessSettings(
        login=login,
        users=users,
        read_only=args.read_only,
        secret=_secret(args.session_secret_file),
        session_timeout=args.session_timeout or IDLE_TIMEOUT_SECONDS,
    )


def _secret(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        secret = path.read_bytes().strip()
    except OSError as exc:
        raise CommandError(f"cannot read --session-secret-file: {exc}") from None
    if len(secret) < 32:
        raise CommandError(
            f"{path}: the session secret must be at least 32 bytes (for example the output "
            "of `python3 -c 'import secrets; print(secrets.token_urlsafe(48))'`)"
        )
    return secret


def _read_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise CommandError("the two passwords differ")
    return first


def add_user(args: argparse.Namespace) -> int:
    """`--add-user NAME`: write NAME's hash to --users-file."""
    from logbus.console.users import UsersFileError, set_user

    if args.users_file is None:
        return fail("--add-user needs --users-file FILE")
    try:
        password = _read_password()
        if not password:
            raise CommandError("an empty password is not allowed")
        new = set_user(args.users_file, args.add_user, password)
    except (CommandError, UsersFileError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot write {args.users_file}: {exc}")
    print(f"{'added' if new else 'changed the password of'} {args.add_user} in {args.users_file}")
    return 0


def run(args: argparse.Namespace) -> int:
    # Imported here: the web stack is needed by this command only.
    import uvicorn

    from logbus.console.app import LOOPBACK_HOSTS, create_app

    if args.add_user is not None:
        return add_user(args)
    settings: dict[str, Any] = {**client_settings(args), "bootstrap.servers": args.bootstrap_server}
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        return fail("--ssl-certfile and --ssl-keyfile go together")
    try:
        access = access_settings(args, settings)
        checked = {**settings, **_CHECK_ONLY} if access.login == "scram" else settings
        security_of(checked, "--command-config")
    except CommandError as exc:
        return fail(str(exc))
    host, port = args.bind
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if args.ssl_certfile else "http"
    print(f"logbus console for {args.bootstrap_server}: {scheme}://{shown}:{port}/ "
          f"(login: {access.login}{', read-only' if access.read_only else ''})", flush=True)
    app = create_app(
        settings, allowed_hosts=LOOPBACK_HOSTS if host in LOOPBACK_HOSTS else None,
        access=access, schema_registry_url=args.schema_registry_url,
    )
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", loop="asyncio", lifespan="on",
        ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile,
    )
    try:
        uvicorn.Server(config).run()
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"logbus: error: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
