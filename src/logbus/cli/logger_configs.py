"""`logbus configs` in kafka-configs' syntax for broker loggers' levels (KIP-412):

    logbus configs --bootstrap-server B --describe --entity-type broker-loggers \\
        [--entity-name 0]
    logbus configs --bootstrap-server B --alter --entity-type broker-loggers --entity-name 0 \\
        --add-config logbus.server.replica=DEBUG,kafka.request.logger=TRACE
    logbus configs --bootstrap-server B --alter --entity-type broker-loggers --entity-name 0 \\
        --delete-config logbus.server.replica

`--broker-logger 0` is short for `--entity-type broker-loggers --entity-name 0`. Describe
without a name shows every broker. Alter first checks the loggers named against the
broker's list ("Invalid broker logger(s): ..."), as kafka-configs does, then sends
IncrementalAlterConfigs (SET, DELETE) to that broker. Levels are not kept across a
broker's restart.
"""

from __future__ import annotations

import argparse

from logbus.cli.common import CommandError, client_security, run
from logbus.cli.user_configs import split_configs
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.requests.alter_configs import OP_DELETE, OP_SET, incremental_alter_configs
from logbus.client.requests.configs import DescribeConfigsRequest, describe_configs

ENTITY_TYPE = "broker-loggers"
RESOURCE_BROKER_LOGGER = 8


def command(args: argparse.Namespace) -> int:
    names = list(getattr(args, "entity_names", None) or [])
    if len(names) > 1 or any(not isinstance(name, str) for name in names):
        raise SystemExit("logbus configs: broker-loggers takes one --entity-name, a broker id")
    broker = names[0] if names else None
    if broker is not None and not broker.isdigit():
        raise SystemExit(f"logbus configs: the broker id must be a number, not {broker!r}")
    if not args.alter and not args.describe:
        raise SystemExit("logbus configs: give --alter or --describe with --entity-type")
    return run(_run(args, None if broker is None else int(broker)))


async def _run(args: argparse.Namespace, broker: int | None) -> int:
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-configs", security=client_security(args)
    ) as cluster:
        if args.describe:
            if broker is not None:
                brokers = [broker]
            else:
                brokers = sorted((await cluster.refresh([])).brokers)
            for node in brokers:
                await _describe(await cluster.node(node), node)
            return 0
        if broker is None:
            raise CommandError("--alter --entity-type broker-loggers needs --entity-name")
        return await _alter(await cluster.node(broker), broker, args)


async def loggers(conn: Connection, broker: int) -> dict[str, str]:
    """The broker's loggers and their levels, in the broker's order."""
    entries = await describe_configs(
        conn, DescribeConfigsRequest(RESOURCE_BROKER_LOGGER, str(broker))
    )
    return {entry.name: entry.value or "" for entry in entries}


async def _describe(conn: Connection, broker: int) -> None:
    print(f"Dynamic configs for broker-logger {broker} are:")
    for name, level in (await loggers(conn, broker)).items():
        print(f"  {name}={level} sensitive=false synonyms={{}}")


async def _alter(conn: Connection, broker: int, args: argparse.Namespace) -> int:
    if not args.add_config and not args.delete_config:
        raise CommandError("nothing to change: give --add-config LOGGER=LEVEL or --delete-config")
    added = split_configs(args.add_config or "")
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    both = sorted({name for name, _ in added} & set(deleted))
    if both:
        raise CommandError(f"{', '.join(both)} cannot be both added and deleted")
    known = await loggers(conn, broker)
    invalid = [name for name, _ in added if name not in known]
    invalid += [name for name in deleted if name not in known]
    if invalid:
        raise CommandError(f"Invalid broker logger(s): {','.join(invalid)}")
    ops: list[tuple[str, int, str | None]] = [(name, OP_SET, level) for name, level in added]
    ops += [(name, OP_DELETE, None) for name in deleted]
    await incremental_alter_configs(conn, RESOURCE_BROKER_LOGGER, str(broker), ops)
    print(f"Completed updating config for broker-logger {broker}.")
    return 0
