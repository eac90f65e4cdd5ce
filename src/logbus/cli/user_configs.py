"""`logbus configs` in kafka-configs' own syntax for users' SCRAM credentials:

    logbus configs --bootstrap-server B --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],\\
                      SCRAM-SHA-512=[password=alice-secret]'
    logbus configs --bootstrap-server B --alter --entity-type users --entity-name alice \\
        --delete-config 'SCRAM-SHA-512'
    logbus configs --bootstrap-server B --describe --entity-type users [--entity-name alice]

The salted password is computed here, as kafka-configs does (a random salt, 4096
iterations unless given), and sent with AlterUserScramCredentials; the password itself
never leaves the command. Describe lists each user's mechanisms and iterations.
"""

from __future__ import annotations

import argparse
import secrets

from logbus.cli import configs_quotas
from logbus.cli.common import CommandError, client_security, run
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.scram_credentials import (
    Upsertion,
    alter_user_scram_credentials,
    build_alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from logbus.common.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS,
    mechanism_type,
    salted_password,
)
from logbus.protocol import ErrorCode


def command(args: argparse.Namespace) -> int:
    """`logbus configs` in kafka-configs' form (the options are cli/configs_quotas.py's):
    SCRAM credentials of users here, quotas there; describing users shows both."""
    types = list(getattr(args, "entity_types", None) or [])
    if not types or not (args.alter or args.describe):
        return configs_quotas.command(args)
    scram_keys = [k for k in _named_keys(args) if k in MECHANISMS]
    if types != ["users"] or (args.alter and not scram_keys):
        return configs_quotas.command(args)
    names = list(getattr(args, "entity_names", None) or [])
    if any(not isinstance(name, str) for name in names):
        if args.describe:  # the default user has quotas, never credentials (kafka-configs)
            return configs_quotas.command(args)
        raise SystemExit("logbus configs: SCRAM credentials belong to named users, not defaults")
    if args.alter and len(scram_keys) != len(_named_keys(args)):
        raise SystemExit(
            "logbus configs: change SCRAM credentials and quotas in separate commands"
        )
    if args.describe:
        status = configs_quotas.command(args)
        return status or run(_run(args, names[0] if names else None))
    return run(_run(args, names[0] if names else None))


def _named_keys(args: argparse.Namespace) -> list[str]:
    try:
        keys = [key for key, _ in split_configs(args.add_config or "")]
    except CommandError:
        return []  # not SCRAM's syntax: the quota command reports it
    keys += [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    return keys


def split_configs(text: str) -> list[tuple[str, str]]:
    """kafka-configs' "k=v,k2=[a=1,b=2]" into [(k, v), (k2, "a=1,b=2")]."""
    items: list[tuple[str, str]] = []
    depth, start = 0, 0
    parts: list[str] = []
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise CommandError(f"unbalanced ']' in {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise CommandError(f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    for part in filter(None, (p.strip() for p in parts)):
        key, equals, value = part.partition("=")
        if not equals or not key:
            raise CommandError(f"expected KEY=VALUE in --add-config, got {part!r}")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        items.append((key.strip(), value))
    return items


def _scram_upsertion(user: str, mechanism: str, spec: str) -> Upsertion:
    options = dict(item for item in split_configs(spec))
    password = options.pop("password", None)
    if not password:
        raise CommandError(f"{mechanism} needs a password: {mechanism}=[password=...]")
    iterations_text = options.pop("iterations", str(DEFAULT_ITERATIONS))
    if not iterations_text.isdigit():
        raise CommandError(f"iterations must be a whole number, got {iterations_text!r}")
    if options:
        raise CommandError(f"unknown {mechanism} options: {', '.join(sorted(options))}")
    iterations = int(iterations_text)
    salt = secrets.token_bytes(16)
    salted = salted_password(password, salt, iterations, MECHANISMS[mechanism])
    return Upsertion(user, mechanism_type(mechanism), iterations, salt, salted)


async def _run(args: argparse.Namespace, user: str | None) -> int:
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-configs", security=client_security(args)
    ) as cluster:
        conn = await cluster.bootstrap()
        if args.describe:
            return await _describe(conn, user)
        return await _alter(conn, args, user)


async def _alter(conn: Connection, args: argparse.Namespace, user: str | None) -> int:
    if not user:
        raise CommandError("--alter --entity-type users needs --entity-name")
    if not args.add_config and not args.delete_config:
        raise CommandError("nothing to change: give --add-config or --delete-config")
    upsertions = []
    for key, value in split_configs(args.add_config or ""):
        if key not in MECHANISMS:
            raise CommandError(
                f"logbus sets SCRAM credentials of users ({', '.join(MECHANISMS)}), not {key!r}"
            )
        upsertions.append(_scram_upsertion(user, key, value))
    deletions = []
    for key in filter(None, (k.strip() for k in (args.delete_config or "").split(","))):
        if key not in MECHANISMS:
            raise CommandError(f"unknown SCRAM mechanism {key!r}")
        deletions.append((user, mechanism_type(key)))
    # Deleting and setting one mechanism in one request is a DUPLICATE_RESOURCE for the
    # broker (as Kafka): deletions go first, on their own.
    for body in (
        build_alter_user_scram_credentials(0, deletions, []),
        build_alter_user_scram_credentials(0, [], upsertions),
    ):
        if not body["deletions"] and not body["upsertions"]:
            continue
        answer = await alter_user_scram_credentials(conn, body)
        for result in answer["results"]:
            if result["error_code"] != ErrorCode.NONE:
                raise KafkaError(
                    result["error_code"],
                    f"cannot alter the credentials of {result['user']}: "
                    f"{result.get('error_message') or ErrorCode(result['error_code']).name}",
                )
    print(f"Completed updating config for user {user}.")
    return 0


async def _describe(conn: Connection, user: str | None) -> int:
    # No name: an empty array, as kafka-configs (the Java admin client) sends; the broker
    # reads it as every user with credentials, as it reads a null one.
    answer = await describe_user_scram_credentials(conn, [user] if user else [])
    if answer["error_code"] != ErrorCode.NONE:
        raise KafkaError(answer["error_code"], answer.get("error_message") or "describe failed")
    for result in answer["results"]:
        if result["error_code"] == ErrorCode.RESOURCE_NOT_FOUND:
            continue  # kafka-configs prints nothing for a user without credentials
        if result["error_code"] != ErrorCode.NONE:
            raise KafkaError(result["error_code"], result.get("error_message") or "")
        credentials = ", ".join(
            f"{MECHANISM_TYPES.get(c['mechanism'], c['mechanism'])}=iterations={c['iterations']}"
            for c in result["credential_infos"]
        )
        print(f"SCRAM credential configs for user-principal '{result['user']}' are {credentials}")
    return 0
