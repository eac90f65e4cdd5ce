"""`logbus storage`: prepare and inspect a KRaft node's storage, as Kafka's
`kafka-storage` tool does.

    logbus storage random-uuid
    logbus storage format -t CLUSTER_ID -c server.properties [--ignore-formatted]
    logbus storage info -c server.properties

`format` writes a version 1 meta.properties (cluster.id, node.id, directory.id) into every
log directory and the metadata log directory of a configuration with `process.roles`.
"""

from __future__ import annotations

import argparse

from logbus.cli.common import fail
from logbus.common.config_def import ConfigError
from logbus.server.config.broker_config import BrokerConfig
from logbus.storage.formatter import (
    FormatterError,
    describe_directories,
    format_directories,
    random_uuid,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "storage", help="format or describe a KRaft node's storage (kafka-storage)"
    )
    actions = parser.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    uuid = actions.add_parser("random-uuid", help="print a new random cluster id")
    uuid.set_defaults(func=_random_uuid)
    fmt = actions.add_parser("format", help="format the log directories of a KRaft node")
    fmt.add_argument("-t", "--cluster-id", required=True, help="the cluster id")
    fmt.add_argument("-c", "--config", required=True, help="the node's server.properties")
    fmt.add_argument(
        "-g",
        "--ignore-formatted",
        action="store_true",
        help="skip directories already formatted instead of stopping",
    )
    fmt.set_defaults(func=_format)
    info = actions.add_parser("info", help="describe the log directories of a node")
    info.add_argument("-c", "--config", required=True, help="the node's server.properties")
    info.set_defaults(func=_info)


def _random_uuid(args: argparse.Namespace) -> int:
    print(random_uuid())
    return 0


def _load(path: str) -> BrokerConfig:
    return BrokerConfig.load(path)


def _format(args: argparse.Namespace) -> int:
    try:
        config = _load(args.config)
    except (ConfigError, OSError) as exc:
        return fail(str(exc))
    if config.kraft is None:
        return fail(
            "The kafka configuration file appears to be for a legacy cluster. Formatting is "
            "only supported for clusters in KRaft mode."
        )
    try:
        lines = format_directories(
            config.log_dirs,
            config.kraft.metadata_log_dir,
            cluster_id=args.cluster_id,
            node_id=config.kraft.node_id,
            ignore_formatted=args.ignore_formatted,
        )
    except FormatterError as exc:
        return fail(str(exc))
    for line in lines:
        print(line)
    return 0


def _info(args: argparse.Namespace) -> int:
    try:
        config = _load(args.config)
    except (ConfigError, OSError) as exc:
        return fail(str(exc))
    directories = list(config.log_dirs)
    if config.kraft is not None:
        directories.append(config.kraft.metadata_log_dir)
    found = describe_directories(directories)
    for line in found.lines():
        print(line)
    return 1 if found.problems else 0
