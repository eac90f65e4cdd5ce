"""`logbus configs` with kafka-configs' options for client quotas:

    logbus configs --entity-type users|clients (--entity-name N | --entity-default)
                   [--entity-type clients (--entity-name N | --entity-default)]
                   --alter [--add-config k=v,k=v] [--delete-config k,k]
    logbus configs --entity-type users|clients [--entity-name N | --entity-default] --describe

`--user N`, `--client N`, `--user-defaults`, `--client-defaults` are kafka-configs'
shorthands. Quotas: producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate. Without a name, --describe lists every named entity of the
type.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from logbus.aio import Admin
from logbus.cli.common import CommandError, client_settings, run
from logbus.client.admin import ClientQuotaEntity, ClientQuotaFilterComponent
from logbus.client.admin.types import AdminBatchError

ENTITY_TYPES = {"users": "user", "clients": "client-id"}
# kafka-configs' entity type for broker loggers' levels (cli/logger_configs.py)
BROKER_LOGGERS = "broker-loggers"
_DEFAULT = object()


class _EntityAction(argparse.Action):
    """--entity-name and --entity-default in the order given, paired with --entity-type."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: str | Sequence[Any] | None, option_string: str | None = None,
    ) -> None:
        found = list(getattr(namespace, "entity_names", None) or [])
        found.append(_DEFAULT if self.const is _DEFAULT else values)
        namespace.entity_names = found


class _ShortAction(argparse.Action):
    """--user/--client/--user-defaults/--client-defaults: a type and a name at once."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
        values: str | Sequence[Any] | None, option_string: str | None = None,
    ) -> None:
        kind, default = self.const
        types = list(getattr(namespace, "entity_types", None) or [])
        names = list(getattr(namespace, "entity_names", None) or [])
        types.append(kind)
        names.append(_DEFAULT if default else values)
        namespace.entity_types, namespace.entity_names = types, names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("client quotas (kafka-configs options)")
    group.add_argument(
        "--entity-type", dest="entity_types", action="append",
        choices=sorted([*ENTITY_TYPES, BROKER_LOGGERS]),
        help="users or clients (twice: a user with a client id), or broker-loggers",
    )
    group.add_argument("--entity-name", action=_EntityAction, metavar="NAME",
                       help="the entity's name (a user principal's name or a client id)")
    group.add_argument("--entity-default", action=_EntityAction, nargs=0, const=_DEFAULT,
                       help="the default entity of the type (<default>)")
    group.add_argument("--user", action=_ShortAction, const=("users", False), metavar="NAME",
                       help="same as --entity-type users --entity-name NAME")
    group.add_argument("--client", action=_ShortAction, const=("clients", False),
                       metavar="NAME", help="same as --entity-type clients --entity-name NAME")
    group.add_argument("--broker-logger", action=_ShortAction, const=(BROKER_LOGGERS, False),
                       metavar="ID", help="same as --entity-type broker-loggers --entity-name ID")
    group.add_argument("--user-defaults", action=_ShortAction, nargs=0,
                       const=("users", True), help="the default user")
    group.add_argument("--client-defaults", action=_ShortAction, nargs=0,
                       const=("clients", True), help="the default client id")
    mode = group.add_mutually_exclusive_group()
    mode.add_argument("--alter", action="store_true", help="change the entity's quotas")
    mode.add_argument("--describe", action="store_true", help="show quotas")
    group.add_argument("--add-config", metavar="K=V,K=V",
                       help="quotas to set, e.g. producer_byte_rate=1048576")
    group.add_argument("--delete-config", metavar="K,K", help="quotas to remove")
    group.add_argument("--validate-only", dest="quota_validate_only", action="store_true",
                       help="with --alter: check the change but apply nothing")


def command(args: argparse.Namespace) -> int:
    return run(_command(args))


def parse_add_config(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CommandError(f"invalid --add-config entry '{item}': expected KEY=VALUE")
        try:
            value = float(raw)
        except ValueError:
            raise CommandError(f"invalid value '{raw}' for {key}: not a number") from None
        if not math.isfinite(value) or value < 0:
            raise CommandError(f"invalid value '{raw}' for {key}: must be a non-negative number")
        values[key] = value
    return values


def _entities(args: argparse.Namespace) -> list[tuple[str, object]]:
    types: list[str] = args.entity_types or []
    names: list[object] = getattr(args, "entity_names", None) or []
    if len(types) > 2 or len(set(types)) != len(types):
        raise CommandError("give --entity-type users, clients, or both once each")
    if len(names) > len(types):
        raise CommandError("more entity names than --entity-type options")
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]


def describe_entity(entity: ClientQuotaEntity) -> str:
    parts = []
    for kind, value in (("user-principal", entity.user if entity.has_user else _DEFAULT),
                        ("client-id", entity.client_id if entity.has_client_id else _DEFAULT)):
        present = entity.has_user if kind == "user-principal" else entity.has_client_id
        if not present:
            continue
        parts.append(f"the default {kind}" if value is None else f"{kind} '{value}'")
    return ", ".join(parts)


async def _command(args: argparse.Namespace) -> int:
    if not args.entity_types:
        raise CommandError(
            "give an action (describe, alter) for topics and brokers, "
            "or --entity-type users|clients for client quotas"
        )
    if not args.alter and not args.describe:
        raise CommandError("give --alter or --describe with --entity-type")
    pairs = _entities(args)
    async with Admin({**client_settings(args), "bootstrap.servers": args.bootstrap_server,
                      "client.id": "logbus-configs"}) as admin:
        if args.describe:
            return await _describe(admin, pairs)
        return await _alter(admin, pairs, args)


async def _describe(admin: Admin, pairs: list[tuple[str, object]]) -> int:
    components = []
    for kind, value in pairs:
        entity_type = ENTITY_TYPES[kind]
        if value is _DEFAULT:
            components.append(ClientQuotaFilterComponent.default(entity_type))
        elif value is None:
            components.append(ClientQuotaFilterComponent.any(entity_type))
        else:
            components.append(ClientQuotaFilterComponent.entity(entity_type, str(value)))
    found = await admin.describe_client_quotas(components, strict=True)
    for entity, values in sorted(found.items(), key=lambda item: describe_entity(item[0])):
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {describe_entity(entity)} are {shown}")
    return 0


async def _alter(admin: Admin, pairs: list[tuple[str, object]], args: argparse.Namespace) -> int:
    if any(value is None for _, value in pairs):
        raise CommandError("--alter needs --entity-name or --entity-default for each entity type")
    if not args.add_config and not args.delete_config:
        raise CommandError("nothing to change: give --add-config K=V or --delete-config K")
    ops: dict[str, float | None] = dict(parse_add_config(args.add_config or ""))
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    both = sorted(set(ops) & set(deleted))
    if both:
        raise CommandError(f"{', '.join(both)} cannot be both added and deleted")
    ops.update(dict.fromkeys(deleted))
    parts = {ENTITY_TYPES[kind]: None if value is _DEFAULT else str(value) for kind, value in pairs}
    entity = ClientQuotaEntity.of(parts)
    try:
        await admin.alter_client_quotas({entity: ops}, validate_only=args.quota_validate_only)
    except AdminBatchError as exc:
        raise CommandError(str(exc.errors.get(entity, exc))) from None
    verb = "Completed updating config"
    if args.quota_validate_only:
        verb = "Validated the config change"
    print(f"{verb} for {describe_entity(entity)}.")
    return 0
