"""`logbus configs`: describe and change topic and broker configs without a restart, with
the output of Kafka's `kafka-configs`.

    logbus configs describe (--topic T | --broker N | --broker-defaults) [--all]
    logbus configs alter (--topic T | --broker N | --broker-defaults)
                         [--set KEY=VALUE]... [--delete KEY]...
    logbus configs --alter|--describe --entity-type users ... (`user_configs`)
    logbus configs --alter|--describe --entity-type broker-loggers ... (`logger_configs`)

`alter` sends IncrementalAlterConfigs: settings not named are left as they are.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from logbus.cli import configs_quotas, logger_configs, user_configs
from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_security,
    key_value,
    non_negative_int,
    run,
)
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.requests.alter_configs import OP_DELETE, OP_SET, incremental_alter_configs
from logbus.client.requests.configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigInfo,
    DescribeConfigsRequest,
    describe_configs,
)

# DescribeConfigs' ConfigSource ids, by the names kafka-configs prints.
SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
_DYNAMIC_TOPIC, _DYNAMIC_BROKER, _DYNAMIC_DEFAULT = 1, 2, 3
_Action = Callable[[Cluster, argparse.Namespace], Awaitable[int]]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configs = subparsers.add_parser(
        "configs", help="describe and change topic and broker configs, and client quotas"
    )
    actions = configs.add_subparsers(dest="configs_command", metavar="ACTION")
    # kafka-configs' form for client quotas (users, clients): cli/configs_quotas.py
    configs_quotas.add_arguments(configs)
    add_bootstrap(configs)
    # SCRAM credentials of users: cli/user_configs.py, which hands quotas on; broker
    # loggers' levels: cli/logger_configs.py
    configs.set_defaults(func=_entity_command)

    describe = actions.add_parser(
        "describe", help="show the dynamic configs of a topic or broker (every config: --all)"
    )
    _add_entity(describe)
    describe.add_argument(
        "--all",
        action="store_true",
        help="every config with its value and where it comes from, not only dynamic ones",
    )
    describe.set_defaults(func=_command(_describe))

    alter = actions.add_parser(
        "alter",
        help="set or delete dynamic configs of a topic or broker",
        description="Change dynamic configs; they take effect at once, without a restart. "
        "Settings not named keep their values.",
    )
    _add_entity(alter)
    alter.add_argument(
        "--set",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="set a config (repeatable)",
    )
    alter.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a dynamic config, so the default applies again (repeatable)",
    )
    alter.add_argument(
        "--validate-only", action="store_true", help="check the change but apply nothing"
    )
    alter.set_defaults(func=_command(_alter))

    for sub in (describe, alter):
        add_bootstrap(sub)


def _entity_command(args: argparse.Namespace) -> int:
    """kafka-configs' form: --entity-type broker-loggers, or users and clients."""
    if list(getattr(args, "entity_types", None) or []) == [configs_quotas.BROKER_LOGGERS]:
        return logger_configs.command(args)
    return user_configs.command(args)


def _add_entity(parser: argparse.ArgumentParser) -> None:
    entity = parser.add_mutually_exclusive_group(required=True)
    entity.add_argument("--topic", metavar="TOPIC", help="a topic")
    entity.add_argument(
        "--broker", type=non_negative_int, metavar="ID", help="one broker, by its id"
    )
    entity.add_argument(
        "--broker-defaults",
        action="store_true",
        help="the cluster-wide defaults of every broker",
    )


def _command(action: _Action) -> Callable[[argparse.Namespace], int]:
    async def with_cluster(args: argparse.Namespace) -> int:
        async with await Cluster.connect(
            args.bootstrap_server, client_id="logbus-configs", security=client_security(args)
        ) as cluster:
            return await action(cluster, args)

    def runner(args: argparse.Namespace) -> int:
        return run(with_cluster(args))

    return runner


async def _target(cluster: Cluster, args: argparse.Namespace) -> tuple[Connection, int, str, str]:
    """(connection, resource type, resource name, label) of the entity given."""
    if args.topic is not None:
        if not args.topic:
            raise CommandError("the topic name must not be empty")
        conn = await cluster.bootstrap()
        return conn, RESOURCE_TOPIC, args.topic, f"topic {args.topic}"
    if args.broker is not None:
        conn = await cluster.node(args.broker)
        return conn, RESOURCE_BROKER, str(args.broker), f"broker {args.broker}"
    conn = await cluster.bootstrap()
    return conn, RESOURCE_BROKER, "", "brokers in the cluster"


def format_entry(entry: ConfigInfo) -> str:
    """One kafka-configs line: `name=value sensitive=false synonyms={SOURCE:name=value}`."""
    synonyms = ", ".join(
        f"{SOURCE_NAMES.get(s.source, str(s.source))}:{s.name}={_shown(s.value, entry)}"
        for s in entry.synonyms
    )
    sensitive = "true" if entry.is_sensitive else "false"
    return (
        f"  {entry.name}={_shown(entry.value, entry)} sensitive={sensitive} synonyms={{{synonyms}}}"
    )


def _shown(value: str | None, entry: ConfigInfo) -> str:
    if entry.is_sensitive:
        return "null"
    return "null" if value is None else value


async def _describe(cluster: Cluster, args: argparse.Namespace) -> int:
    conn, resource_type, name, label = await _target(cluster, args)
    entries = await describe_configs(conn, DescribeConfigsRequest(resource_type, name))
    if not args.all:
        wanted = (
            _DYNAMIC_TOPIC
            if resource_type == RESOURCE_TOPIC
            else _DYNAMIC_BROKER
            if name
            else _DYNAMIC_DEFAULT
        )
        entries = [e for e in entries if e.source == wanted]
    if args.broker_defaults:
        heading = "Default configs for brokers in the cluster are:"
    else:
        heading = f"{'All' if args.all else 'Dynamic'} configs for {label} are:"
    print(heading)
    for entry in entries:
        print(format_entry(entry))
    return 0


async def _alter(cluster: Cluster, args: argparse.Namespace) -> int:
    if not args.set and not args.delete:
        raise CommandError("nothing to change: give --set KEY=VALUE or --delete KEY")
    both = sorted({k for k, _ in args.set} & set(args.delete))
    if both:
        raise CommandError(f"{', '.join(both)} cannot be both set and deleted")
    conn, resource_type, name, label = await _target(cluster, args)
    ops: list[tuple[str, int, str | None]] = [
        (key, OP_SET, value) for key, value in args.set
    ]
    ops += [(key, OP_DELETE, None) for key in args.delete]
    await incremental_alter_configs(
        conn, resource_type, name, ops, validate_only=args.validate_only
    )
    if args.validate_only:
        print(f"Validated the config change for {label}.")
    elif args.broker_defaults:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for {label}.")
    return 0
