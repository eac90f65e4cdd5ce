"""`logbus topics`: create, list, describe, alter (add partitions) and delete topics, with
kafka-topics' options and output formats, through the Admin client.

Both `logbus topics create T` and kafka-topics' `--create --topic T` work (see
tool_syntax). A topic given as the positional argument is taken literally; `--topic` is a
regular expression for list, describe, alter and delete, as in kafka-topics."""

from __future__ import annotations

import argparse
import re
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    admin_command,
    key_value,
    positive_int,
)
from logbus.cli.tool_syntax import ToolSyntax
from logbus.client.admin import (
    Admin,
    AdminBatchError,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from logbus.client.errors import KafkaError
from logbus.client.metadata import NO_LEADER, PartitionInfo, TopicInfo, topic_id_string
from logbus.protocol import ErrorCode

_Action = Callable[[Admin, argparse.Namespace], Awaitable[int]]

SYNTAX = ToolSyntax(
    "topics",
    {f"--{word}": word for word in ("create", "list", "describe", "alter", "delete")},
    "Command must include exactly one action: --list, --describe, --create, --alter or --delete",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser(
        "topics",
        help="create, list, describe, alter, delete topics",
        epilog="kafka-topics' syntax works too: logbus topics --bootstrap-server B "
        "(--create|--list|--describe|--alter|--delete) [--topic T] [options]",
    )
    actions = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    _add_topic(create, "the topic to create")
    create.add_argument(
        "--partitions", type=positive_int, help="number of partitions (default: the broker's)"
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        help="copies of each partition (default: the broker's)",
    )
    _add_replica_assignment(create)
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
    listing.add_argument(
        "--topic", dest="topic_option", metavar="REGEX", help="only topics matching REGEX"
    )
    listing.set_defaults(func=_command(_list))

    describe = actions.add_parser("describe", help="describe a topic, or every topic")
    describe.add_argument("topic", nargs="?")
    describe.add_argument(
        "--topic", dest="topic_option", metavar="REGEX", help="the topics matching REGEX"
    )
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )
    describe.add_argument(
        "--if-exists", action="store_true", help="succeed if no topic matches --topic"
    )
    describe.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="only the topic lines of topics with config overrides",
    )
    filters = describe.add_argument_group(
        "partition filters",
        "print only the partitions that match one of these, without the topic lines",
    )
    filters.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="partitions whose ISR is smaller than their replica list",
    )
    filters.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="partitions without a leader, or whose leader is not a live broker",
    )
    filters.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="partitions whose ISR is smaller than min.insync.replicas",
    )
    filters.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="partitions whose ISR is exactly min.insync.replicas",
    )
    describe.set_defaults(func=_command(_describe))

    alter = actions.add_parser("alter", help="add partitions to a topic")
    _add_topic(alter, "the topic to alter (--topic: the topics matching a REGEX)")
    alter.add_argument(
        "--partitions", type=positive_int, required=True, help="the new number of partitions"
    )
    _add_replica_assignment(alter)
    alter.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="refused: change configs with `logbus configs alter`",
    )
    alter.add_argument("--if-exists", action="store_true", help="succeed if there is no topic")
    _add_exclude_internal(alter)
    alter.set_defaults(func=_command(_alter))

    delete = actions.add_parser("delete", help="delete a topic")
    _add_topic(delete, "the topic to delete (--topic: the topics matching a REGEX)")
    delete.add_argument("--if-exists", action="store_true", help="succeed if there is no topic")
    _add_exclude_internal(delete)
    delete.set_defaults(func=_command(_delete))

    for sub in (create, listing, describe, alter, delete):
        add_bootstrap(sub)


def _add_topic(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("topic", nargs="?", help=what)
    parser.add_argument("--topic", dest="topic_option", metavar="TOPIC", help=what)


def _add_exclude_internal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exclude-internal",
        action="store_true",
        help="--topic does not match internal topics",
    )


def _add_replica_assignment(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replica-assignment",
        type=replica_assignment,
        metavar="B:B,B:B",
        help="the brokers of each partition: partitions separated by commas, each one's "
        "brokers by colons, the preferred leader first",
    )


def replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' `--replica-assignment 0:1,1:2,2:0`, for argparse."""
    partitions: list[list[int]] = []
    for number, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected broker ids such as 0:1,1:2, got {text!r}"
            ) from None
        if len(set(brokers)) != len(brokers):
            raise argparse.ArgumentTypeError(
                f"Partition replica lists may not contain duplicate entries: {part}"
            )
        if partitions and len(brokers) != len(partitions[0]):
            raise argparse.ArgumentTypeError(
                f"Partition {number} has different replication factor: {part}"
            )
        partitions.append(brokers)
    return partitions


def _literal_name(args: argparse.Namespace) -> str:
    """The topic of create: the positional name or --topic."""
    if args.topic is not None and args.topic_option is not None and args.topic != args.topic_option:
        raise CommandError("give the topic either as an argument or with --topic, not both")
    name: str | None = args.topic if args.topic is not None else args.topic_option
    if name is None:
        raise CommandError('Missing required argument "[topic]"')
    return name


def topic_pattern(text: str) -> re.Pattern[str]:
    """kafka-topics' `--topic` regular expression (commas read as `|`, surrounding quotes
    dropped), matched against whole names."""
    raw = text.strip().replace(",", "|").strip("\"'")
    try:
        return re.compile(raw)
    except re.error as exc:
        raise CommandError(f"invalid --topic regular expression {text!r}: {exc}") from None


async def _matching(admin: Admin, args: argparse.Namespace) -> list[str]:
    """The topics alter or delete acts on: the positional name, or every topic matching
    --topic (an error naming it when none does, unless --if-exists)."""
    if args.topic is not None and args.topic_option is not None:
        raise CommandError("give the topic either as an argument or with --topic, not both")
    if args.topic is not None:
        return [args.topic]
    if args.topic_option is None:
        raise CommandError('Missing required argument "[topic]"')
    pattern = topic_pattern(args.topic_option)
    listed = await admin.list_topics(include_internal=not args.exclude_internal)
    names = [name for name in listed if pattern.fullmatch(name)]
    if not names and not args.if_exists:
        raise CommandError(f"Topic '{args.topic_option}' does not exist as expected")
    return names


def _command(action: _Action) -> Callable[[argparse.Namespace], int]:
    return admin_command(action, "logbus-topics")


async def _create(admin: Admin, args: argparse.Namespace) -> int:
    name = _literal_name(args)
    assignment = args.replica_assignment
    if assignment is not None and (args.partitions or args.replication_factor):
        option = "partitions" if args.partitions else "replication-factor"
        raise CommandError(f'Option "[replica-assignment]" can\'t be used with option "[{option}]"')
    topic = NewTopic(
        name,
        -1 if args.partitions is None else args.partitions,
        -1 if args.replication_factor is None else args.replication_factor,
        dict(args.config),
        None if assignment is None else dict(enumerate(assignment)),
    )
    try:
        await admin.create_topics([topic], validate_only=args.validate_only)
    except KafkaError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return 0
        raise
    if not args.validate_only:
        print(f"Created topic {name}.")
    return 0


async def _list(admin: Admin, args: argparse.Namespace) -> int:
    pattern = None if args.topic_option is None else topic_pattern(args.topic_option)
    for name in await admin.list_topics(include_internal=not args.exclude_internal):
        if pattern is None or pattern.fullmatch(name):
            print(name)
    return 0


@dataclass(frozen=True, slots=True)
class PartitionFilter:
    """kafka-topics' `--describe` partition filters; a partition is printed when it matches
    any filter that is on (every partition when none is on)."""

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False

    @property
    def active(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr

    def matches(
        self, part: PartitionInfo, live_brokers: Collection[int], min_isr: int | None
    ) -> bool:
        if not self.active:
            return True
        has_leader = part.leader != NO_LEADER
        return (
            (self.under_replicated and len(part.isr) < len(part.replicas))
            or (self.unavailable and (not has_leader or part.leader not in live_brokers))
            or (
                self.under_min_isr
                and (not has_leader or (min_isr is not None and len(part.isr) < min_isr))
            )
            or (self.at_min_isr and min_isr is not None and len(part.isr) == min_isr)
        )


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    if args.topic is not None and args.topic_option is not None:
        raise CommandError("give the topic either as an argument or with --topic, not both")
    if args.topic is not None:
        try:
            infos = list((await admin.describe_topics([args.topic])).values())
        except KafkaError as exc:
            if not (_missing(exc) and args.if_exists):
                raise
            infos = []
    else:
        pattern = None if args.topic_option is None else topic_pattern(args.topic_option)
        infos = [
            info
            for name, info in sorted((await admin.describe_topics()).items())
            if not (args.exclude_internal and info.is_internal)
            and (pattern is None or pattern.fullmatch(name))
        ]
        if pattern is not None and not infos and not args.if_exists:
            raise CommandError(f"Topic '{args.topic_option}' does not exist as expected")
    flt = PartitionFilter(
        under_replicated=args.under_replicated_partitions,
        unavailable=args.unavailable_partitions,
        under_min_isr=args.under_min_isr_partitions,
        at_min_isr=args.at_min_isr_partitions,
    )
    configs = await _topic_configs(admin, [info.name for info in infos])
    live: frozenset[int] = frozenset()
    if flt.unavailable:
        live = frozenset(node.node_id for node in (await admin.describe_cluster()).nodes)
    out = []
    for info in infos:
        entries = configs.get(info.name, {})
        if flt.active:
            out.extend(filtered_partition_lines(info, flt, live, _min_isr(entries)))
        elif args.topics_with_overrides:
            own = _own(entries)
            if own:
                out.append(describe_lines(info, own)[0])
        else:
            out.extend(describe_lines(info, _own(entries)))
    if out:
        print("\n".join(out))
    return 0


async def _topic_configs(admin: Admin, names: list[str]) -> dict[str, dict[str, ConfigEntry]]:
    """Every config of each topic; empty for a broker without DescribeConfigs."""
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    try:
        found = await admin.describe_configs(resources)
    except KafkaError as exc:
        if exc.code == ErrorCode.UNSUPPORTED_VERSION:
            return {}  # a broker without DescribeConfigs: show no configs
        raise
    return {resource.name: entries for resource, entries in found.items()}


def _own(entries: dict[str, ConfigEntry]) -> dict[str, str | None]:
    """The configs set on the topic itself (not broker defaults), as kafka-topics shows
    them; a sensitive value is None."""
    return {
        name: entry.value
        for name, entry in sorted(entries.items())
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def _min_isr(entries: dict[str, ConfigEntry]) -> int | None:
    entry = entries.get("min.insync.replicas")
    if entry is None or entry.value is None:
        return None
    try:
        return int(entry.value)
    except ValueError:
        return None


def describe_lines(info: TopicInfo, configs: dict[str, str | None]) -> list[str]:
    """kafka-topics --describe output for one topic: its line, then one per partition."""
    shown = ",".join(f"{k}={'<sensitive>' if v is None else v}" for k, v in configs.items())
    lines = [
        f"Topic: {info.name}\tTopicId: {topic_id_string(info.topic_id)}\t"
        f"PartitionCount: {len(info.partitions)}\t"
        f"ReplicationFactor: {info.replication_factor}\tConfigs: {shown}"
    ]
    lines.extend(partition_line(info.name, part) for _, part in sorted(info.partitions.items()))
    return lines


def filtered_partition_lines(
    info: TopicInfo, flt: PartitionFilter, live_brokers: Collection[int], min_isr: int | None
) -> list[str]:
    """The lines of the partitions that match `flt` (kafka-topics prints no topic line
    when a partition filter is given)."""
    return [
        partition_line(info.name, part)
        for _, part in sorted(info.partitions.items())
        if flt.matches(part, live_brokers, min_isr)
    ]


def partition_line(topic: str, part: PartitionInfo) -> str:
    leader = "none" if part.leader == NO_LEADER else str(part.leader)
    line = (
        f"\tTopic: {topic}\tPartition: {part.partition}\tLeader: {leader}\t"
        f"Replicas: {_ids(part.replicas)}\tIsr: {_ids(part.isr)}"
    )
    if part.offline_replicas:
        line += f"\tOffline: {_ids(part.offline_replicas)}"
    return line


def _ids(nodes: tuple[int, ...]) -> str:
    return ",".join(map(str, nodes))


def _missing(exc: KafkaError) -> bool:
    return isinstance(exc, AdminBatchError) and exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def _alter(admin: Admin, args: argparse.Namespace) -> int:
    if args.config:
        raise CommandError(
            'Option combination "[bootstrap-server],[config]" can\'t be used with option '
            '"[alter]": change topic configs with logbus configs alter --topic T --set K=V '
            "(kafka-configs)"
        )
    names = await _matching(admin, args)
    assignment: list[list[int]] | None = args.replica_assignment
    for name in names:
        wanted: int | NewPartitions = args.partitions
        if assignment is not None:
            current = len((await admin.describe_topics([name]))[name].partitions)
            wanted = NewPartitions(args.partitions, assignment[current:])
        try:
            await admin.create_partitions({name: wanted})
        except KafkaError as exc:
            if not _missing(exc):
                raise
            if args.if_exists:
                continue
            raise CommandError(f"Topic '{name}' does not exist") from None
    return 0


async def _delete(admin: Admin, args: argparse.Namespace) -> int:
    for name in await _matching(admin, args):
        try:
            await admin.delete_topics([name])
        except KafkaError as exc:
            if not _missing(exc):
                raise
            if args.if_exists:
                continue
            raise CommandError(f"Topic '{name}' does not exist") from None
    return 0
