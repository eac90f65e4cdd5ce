"""`logbus server start [server.properties] [--override key=value]...`: run one broker in
the foreground until SIGTERM or SIGINT, then shut down cleanly. With `process.roles`
(KRaft) it runs a broker-role node (`broker`, or combined `broker,controller`) or a
controller-only node."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

from logbus.common.config_def import ConfigError
from logbus.server.config.broker_config import BrokerConfig, load_properties, parse_overrides

if TYPE_CHECKING:
    from logbus.server.broker import Broker
    from logbus.server.kraft.controller_node import ControllerNode


def load_config(properties: str | None, overrides: list[str]) -> BrokerConfig:
    props = load_properties(properties) if properties else {}
    props.update(parse_overrides(overrides))
    return BrokerConfig.from_properties(props)


async def serve(config: BrokerConfig) -> None:
    from logbus.server.broker import Broker
    from logbus.server.kraft.controller_node import ControllerNode
    from logbus.server.kraft.kraft_broker import KRaftBroker

    broker: Broker | ControllerNode
    if config.kraft is None:
        broker = Broker(config)
    elif config.kraft.is_broker:  # a broker-only or combined (broker,controller) node
        broker = KRaftBroker(config)
    else:
        broker = ControllerNode(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if config.kraft is None:
        await broker.start()  # a start that fails stops what it had built, then raises
    elif not await _start_unless_stopped(broker, stop):
        logging.getLogger("logbus").info("stopped while starting")
        return
    try:
        await stop.wait()
    finally:
        logging.getLogger("logbus").info("shutting down")
        await broker.stop()


async def _start_unless_stopped(broker: Broker | ControllerNode, stop: asyncio.Event) -> bool:
    """Start a KRaft node; False when SIGTERM or SIGINT came first (a KRaft broker waits
    as long as it takes to be unfenced): the start is cancelled, which stops what it had
    built. A start that fails stops what it had built, then raises."""
    starting = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        starting.result()
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return False


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(args, "log_level", "INFO") or "INFO",
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.properties, args.override or [])
    except ConfigError as exc:
        print(f"logbus: invalid configuration: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"logbus: cannot read {args.properties}: {exc.strerror}", file=sys.stderr)
        return 1
    # LOGBUS_EVENT_LOOP=asyncio runs the standard loop instead (the bench compares them)
    if os.environ.get("LOGBUS_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
    from logbus.server.cluster_member import BrokerStartupError
    from logbus.storage.errors import InconsistentBrokerMetadataError

    try:
        asyncio.run(serve(config))
    except (BrokerStartupError, InconsistentBrokerMetadataError) as exc:
        print(f"logbus: cannot start the broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"logbus: cannot start the broker: {exc}", file=sys.stderr)
        return 1
    return 0
