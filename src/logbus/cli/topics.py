"""`logbus topics`: create, list, describe, alter (add partitions) and delete topics, with
kafka-topics' output formats."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from logbus.cli.common import CommandError, add_bootstrap, key_value, positive_int, run
from logbus.client import admin_ops
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.metadata import NO_LEADER, ClusterMetadata, TopicInfo, topic_id_string
from logbus.protocol import ErrorCode

_Action = Callable[[Cluster, argparse.Namespace], Awaitable[int]]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser("topics", help="create, list, describe, alter, delete topics")
    actions = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument(
        "--partitions", type=positive_int, help="number of partitions (default: the broker's)"
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        help="copies of each partition (default: the broker's)",
    )
    create.add_argument(
        "--config",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a topic configuration override (repeatable)",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )
    create.add_argument(
        "--validate-only", action="store_true", help="check the request but create nothing"
    )
    create.set_defaults(func=_command(_create))

    listing = actions.add_parser("list", help="list topic names")
    listing.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser("describe", help="describe a topic, or every topic")
    describe.add_argument("topic", nargs="?")
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )
    describe.set_defaults(func=_command(_describe))

    alter = actions.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("topic")
    alter.add_argument(
        "--partitions", type=positive_int, required=True, help="the new number of partitions"
    )
    alter.add_argument("--if-exists", action="store_true", help="succeed if there is no topic")
    alter.set_defaults(func=_command(_alter))

    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("topic")
    delete.add_argument("--if-exists", action="store_true", help="succeed if there is no topic")
    delete.set_defaults(func=_command(_delete))

    for sub in (create, listing, describe, alter, delete):
        add_bootstrap(sub)


def _command(action: _Action) -> Callable[[argparse.Namespace], int]:
    def runner(args: argparse.Namespace) -> int:
        return run(_with_cluster(action, args))

    return runner


async def _with_cluster(action: _Action, args: argparse.Namespace) -> int:
    async with await Cluster.connect(args.bootstrap_server, client_id="logbus-topics") as cluster:
        return await action(cluster, args)


async def _create(cluster: Cluster, args: argparse.Namespace) -> int:
    controller = await cluster.controller()
    try:
        await admin_ops.create_topics(
            controller,
            args.topic,
            -1 if args.partitions is None else args.partitions,
            -1 if args.replication_factor is None else args.replication_factor,
            dict(args.config),
            validate_only=args.validate_only,
        )
    except KafkaError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return 0
        raise
    if not args.validate_only:
        print(f"Created topic {args.topic}.")
    return 0


async def _list(cluster: Cluster, args: argparse.Namespace) -> int:
    md = await cluster.refresh(None)
    for name in sorted(md.topics):
        if not (args.exclude_internal and md.topics[name].is_internal):
            print(name)
    return 0


async def _describe(cluster: Cluster, args: argparse.Namespace) -> int:
    md = await cluster.refresh(None if args.topic is None else [args.topic])
    if args.topic is not None:
        infos = [md.topic(args.topic)]
    else:
        infos = [
            md.topics[name]
            for name in sorted(md.topics)
            if not (args.exclude_internal and md.topics[name].is_internal)
        ]
    configs = await _configs(await cluster.bootstrap(), [info.name for info in infos])
    out = []
    for info in infos:
        out.extend(describe_lines(info, configs.get(info.name, {})))
    if out:
        print("\n".join(out))
    return 0


async def _configs(conn: Connection, names: list[str]) -> dict[str, dict[str, str | None]]:
    if not names:
        return {}
    try:
        return await admin_ops.describe_topic_configs(conn, names)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNSUPPORTED_VERSION:
            return {}  # a broker without DescribeConfigs: show no configs
        raise


def describe_lines(info: TopicInfo, configs: dict[str, str | None]) -> list[str]:
    """kafka-topics --describe output for one topic."""
    shown = ",".join(f"{k}={'<sensitive>' if v is None else v}" for k, v in configs.items())
    lines = [
        f"Topic: {info.name}\tTopicId: {topic_id_string(info.topic_id)}\t"
        f"PartitionCount: {len(info.partitions)}\t"
        f"ReplicationFactor: {info.replication_factor}\tConfigs: {shown}"
    ]
    for part in info.partitions.values():
        leader = "none" if part.leader == NO_LEADER else str(part.leader)
        line = (
            f"\tTopic: {info.name}\tPartition: {part.partition}\tLeader: {leader}\t"
            f"Replicas: {_ids(part.replicas)}\tIsr: {_ids(part.isr)}"
        )
        if part.offline_replicas:
            line += f"\tOffline: {_ids(part.offline_replicas)}"
        lines.append(line)
    return lines


def _ids(nodes: tuple[int, ...]) -> str:
    return ",".join(map(str, nodes))


async def _existing(cluster: Cluster, name: str) -> ClusterMetadata | None:
    md = await cluster.refresh([name])
    try:
        md.topic(name)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        raise
    return md


async def _alter(cluster: Cluster, args: argparse.Namespace) -> int:
    md = await _existing(cluster, args.topic)
    if md is None:
        if args.if_exists:
            return 0
        raise CommandError(f"Topic '{args.topic}' does not exist")
    await admin_ops.create_partitions(await cluster.controller(), args.topic, args.partitions)
    return 0


async def _delete(cluster: Cluster, args: argparse.Namespace) -> int:
    if await _existing(cluster, args.topic) is None:
        if args.if_exists:
            return 0
        raise CommandError(f"Topic '{args.topic}' does not exist")
    try:
        await admin_ops.delete_topics(await cluster.controller(), [args.topic])
    except KafkaError as exc:
        if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            return 0
        raise
    return 0

