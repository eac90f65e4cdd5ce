"""`logbus acls`: add, remove and list ACLs with the options of Kafka's `kafka-acls`.

    logbus acls --add --allow-principal User:alice --operation Read --topic orders
    logbus acls --add --allow-principal User:alice --consumer --topic orders --group g
    logbus acls --add --allow-principal User:bob --producer --topic orders- \\
                --resource-pattern-type prefixed
    logbus acls --list [--topic orders] [--principal User:alice]
    logbus acls --remove --force --topic orders

Principals are "Type:name" (User:alice, User:* for everyone); hosts default to "*";
operations default to All. `--producer` allows Write, Describe and Create on the topics
(and Write, Describe on `--transactional-id`, IdempotentWrite on the cluster with
`--idempotent`); `--consumer` allows Read and Describe on the topics and Read on the
group. A bad principal, operation or pattern type, or an operation the resource type does
not have, is an error (exit 1) and nothing is sent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from logbus.cli.common import CommandError, add_bootstrap, client_security, run
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaError
from logbus.client.requests.acls import create_acls, delete_acls, describe_acls
from logbus.protocol.acl_types import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation
# The operations each resource type has (kafka-acls refuses the others).
SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.ALTER, Op.DELETE,
         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}
    ),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE, Op.ALL}),
    ResourceType.CLUSTER: frozenset(
        {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
         Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE, Op.ALL}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE, Op.ALL}),
}  # fmt: skip


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "acls",
        help="add, remove and list ACLs (kafka-acls)",
        description="Manage ACLs with kafka-acls' options. The broker needs "
        "authorizer.class.name set (see docs/security.md).",
    )
    add_bootstrap(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="principal (User:alice) the ACLs allow (repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="principal the ACLs deny (repeatable)")
    parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                        help="with --list: only the ACLs of this principal")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="host the allow ACLs apply to (default: every host, *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="host the deny ACLs apply to (default: every host, *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite or All (default; "
                        "repeatable)")
    parser.add_argument("--topic", action="append", default=[], help="topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[],
                        help="transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default=None,
                        metavar="literal|prefixed|match|any",
                        help="how resource names match (default: literal; match and any "
                        "only with --list and --remove)")
    parser.add_argument("--producer", action="store_true",
                        help="the ACLs a producer needs on --topic (and --transactional-id)")
    parser.add_argument("--consumer", action="store_true",
                        help="the ACLs a consumer needs on --topic and --group")
    parser.add_argument("--idempotent", action="store_true",
                        help="with --producer: IdempotentWrite on the cluster as well")
    parser.add_argument("--force", action="store_true", help="remove without asking")
    parser.set_defaults(func=lambda args: run(_main(args)))  # fmt: skip


def _principal(text: str) -> str:
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        raise CommandError(f"invalid principal {text!r}: expected Type:name (User:alice)")
    return text


def _pattern_type(args: argparse.Namespace) -> PatternType:
    text = args.resource_pattern_type or "literal"
    try:
        pattern = PatternType.parse(text)
    except AclError:
        raise CommandError(
            f"invalid --resource-pattern-type {text!r}: expected literal, prefixed, match or any"
        ) from None
    if pattern in (PatternType.UNKNOWN,):
        raise CommandError(f"invalid --resource-pattern-type {text!r}")
    if args.add and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError("--add takes only literal or prefixed patterns")
    return pattern


def _operations(texts: Iterable[str]) -> list[AclOperation]:
    operations: list[AclOperation] = []
    for text in texts:
        try:
            operation = AclOperation.parse(text)
        except AclError:
            raise CommandError(f"unknown --operation {text!r}") from None
        if operation in (Op.ANY, Op.UNKNOWN):
            raise CommandError(f"unknown --operation {text!r}")
        operations.append(operation)
    return operations


def _resources(args: argparse.Namespace, pattern: PatternType) -> list[ResourcePattern]:
    resources = [ResourcePattern(ResourceType.TOPIC, t, pattern) for t in args.topic]
    resources += [ResourcePattern(ResourceType.GROUP, g, pattern) for g in args.group]
    resources += [
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id
    ]
    if args.cluster:
        cluster_pattern = PatternType.LITERAL if pattern is PatternType.PREFIXED else pattern
        resources.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, cluster_pattern))
    for resource in resources:
        if not resource.name:
            raise CommandError(f"the {resource.resource_type.label} name must not be empty")
    return resources


def _by_resource(args: argparse.Namespace, pattern: PatternType) -> dict[ResourcePattern, set[Op]]:
    """The operations to grant or remove on each resource."""
    wanted: dict[ResourcePattern, set[Op]] = {}
    if args.producer or args.consumer:
        if args.operation:
            raise CommandError("--operation cannot be given with --producer or --consumer")
        if not args.topic:
            raise CommandError("--producer and --consumer need --topic")
        for topic in args.topic:
            ops = wanted.setdefault(ResourcePattern(ResourceType.TOPIC, topic, pattern), set())
            if args.producer:
                ops |= {Op.WRITE, Op.DESCRIBE, Op.CREATE}
            if args.consumer:
                ops |= {Op.READ, Op.DESCRIBE}
        if args.consumer:
            if not args.group:
                raise CommandError("--consumer needs --group")
            for group in args.group:
                wanted[ResourcePattern(ResourceType.GROUP, group, pattern)] = {Op.READ}
        if args.producer:
            for txn in args.transactional_id:
                key = ResourcePattern(ResourceType.TRANSACTIONAL_ID, txn, pattern)
                wanted[key] = {Op.WRITE, Op.DESCRIBE}
            if args.idempotent:
                key = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
                wanted[key] = {Op.IDEMPOTENT_WRITE}
        return wanted
    operations = set(_operations(args.operation) or [Op.ALL])
    for resource in _resources(args, pattern):
        unsupported = operations - SUPPORTED[resource.resource_type]
        if unsupported:
            names = ", ".join(sorted(op.label for op in unsupported))
            allowed = ", ".join(sorted(op.label for op in SUPPORTED[resource.resource_type]))
            raise CommandError(
                f"{resource.resource_type.label} does not have the operation(s) {names}; "
                f"it has {allowed}"
            )
        wanted[resource] = set(operations)
    return wanted


def _entries(args: argparse.Namespace, operations: Iterable[Op]) -> list[AccessControlEntry]:
    entries = []
    for permission, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                for operation in sorted(operations):
                    entries.append(
                        AccessControlEntry(_principal(principal), host, operation, permission)
                    )
    return entries


def _show(pattern: ResourcePattern) -> str:
    return (
        f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
        f"patternType={pattern.pattern_type.name})"
    )


def _show_entry(entry: AccessControlEntry) -> str:
    return (
        f"\t(principal={entry.principal}, host={entry.host}, "
        f"operation={entry.operation.name}, permissionType={entry.permission.name})"
    )


def _print_bindings(bindings: Iterable[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for pattern, entry in bindings:
        by_pattern.setdefault(pattern, []).append(entry)
    for pattern in sorted(by_pattern):
        print(f"Current ACLs for resource `{_show(pattern)}`: ")
        for entry in sorted(by_pattern[pattern]):
            print(_show_entry(entry))
        print()


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """--list / --remove: one filter per resource named (every resource when none)."""
    pattern = _pattern_type(args)
    operations = _operations(args.operation)
    principals: list[str | None] = [_principal(p) for p in (*args.principal, *args.allow_principal,
                                          *args.deny_principal)]  # fmt: skip
    resource_filters: list[tuple[ResourceType, str | None, PatternType]] = [
        (r.resource_type, r.name, r.pattern_type) for r in _resources(args, pattern)
    ]
    if not resource_filters:  # every resource; any pattern unless one was given
        given = args.resource_pattern_type is not None
        resource_filters = [(ResourceType.ANY, None, pattern if given else PatternType.ANY)]
    filters = []
    for resource_type, name, pattern_type in resource_filters:
        for principal in principals or [None]:
            for operation in operations or [Op.ANY]:
                filters.append(
                    AclBindingFilter(resource_type, name, pattern_type, principal, None, operation)
                )
    return filters


async def _main(args: argparse.Namespace) -> int:
    if args.add:
        if not args.allow_principal and not args.deny_principal:
            raise CommandError("--add needs --allow-principal or --deny-principal")
        pattern = _pattern_type(args)
        wanted = _by_resource(args, pattern)
        if not wanted:
            raise CommandError("--add needs a resource: --topic, --group, --cluster or "
                               "--transactional-id")  # fmt: skip
        bindings = [
            AclBinding(resource, entry)
            for resource, operations in wanted.items()
            for entry in _entries(args, operations)
        ]
    else:
        filters = _filters(args)
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-acls", security=client_security(args)
    ) as cluster:
        conn = await cluster.bootstrap()
        if args.add:
            results = await create_acls(conn, bindings)
            failed = [(b, e) for b, e in zip(bindings, results, strict=True) if e is not None]
            if failed:
                binding, error = failed[0]
                raise CommandError(f"cannot add {_show_entry(binding.entry).strip()} on "
                                   f"{_show(binding.pattern)}: {error}")  # fmt: skip
            for resource in wanted:
                print(f"Adding ACLs for resource `{_show(resource)}`: ")
                for binding in bindings:
                    if binding.pattern == resource:
                        print(_show_entry(binding.entry))
                print()
            _print_bindings(await describe_acls(conn, AclBindingFilter()))
            return 0
        if args.list:
            found: list[AclBinding] = []
            for acl_filter in filters:
                found.extend(await describe_acls(conn, acl_filter))
            _print_bindings(dict.fromkeys(found))
            return 0
        if not args.force and not _confirm():
            print("Nothing removed.")
            return 1
        for result in await delete_acls(conn, filters):
            if isinstance(result, KafkaError):
                raise CommandError(f"cannot remove ACLs: {result}")
            for binding in result:
                print(f"Removed {_show_entry(binding.entry).strip()} from {_show(binding.pattern)}")
        return 0


def _confirm() -> bool:
    print("Are you sure you want to remove the ACLs matching the filter? (y/n)", flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")
