"""What every subcommand shares: the bootstrap option, whole-number and `key=value`
arguments, waiting for a topic's leaders, and running a coroutine with Kafka errors turned
into a one-line message and exit status 1."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from logbus.client.admin import Admin, AdminBatchError
from logbus.client.cluster import Cluster
from logbus.client.config import COMMON, ConfigSchema
from logbus.client.connection import parse_bootstrap
from logbus.client.errors import KafkaError
from logbus.client.loop_thread import new_event_loop
from logbus.client.metadata import NO_LEADER, TopicInfo
from logbus.client.security import ClientSecurity, security_from_config
from logbus.common.config_def import ConfigError
from logbus.common.properties import load_properties
from logbus.protocol import ErrorCode
from logbus.protocol.errors import ProtocolError

DEFAULT_BOOTSTRAP = "localhost:9092"

# How long a topic that was just created may take to get leaders for its partitions.
TOPIC_READY_TIMEOUT = 10.0
_UNKNOWN_TOPIC_GRACE = 1.0
_RETRY_BACKOFF = 0.1

# A subcommand's function: parsed arguments in, exit status out.
Command = Callable[[argparse.Namespace], int]


class CommandError(Exception):
    """A failure to report on one line (exit status 1), e.g. a topic that does not exist."""


def bootstrap_servers(text: str) -> str:
    try:
        parse_bootstrap(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_servers,
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,HOST:PORT]",
        help=f"brokers to connect to first (default: {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        type=command_config_file,
        default={},
        metavar="FILE",
        help="client settings in a properties file, as Kafka's tools take them "
        "(security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config or "
        "sasl.username/sasl.password)",
    )


def command_config_file(path: str) -> dict[str, str]:
    """A --command-config properties file, for argparse."""
    try:
        return load_properties(path)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """The --command-config settings (empty without one)."""
    return dict(getattr(args, "command_config", None) or {})


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """TLS and SASL for the commands that talk to brokers directly (`Cluster.connect`):
    the security settings of --command-config; CommandError for bad ones."""
    return security_of(client_settings(args), "--command-config")


def security_of(settings: dict[str, Any], source: str = "client settings") -> ClientSecurity:
    """The TLS and SASL of client settings (other settings in them are ignored)."""
    known = {k: v for k, v in settings.items() if k in _COMMON_SCHEMA.settings}
    try:
        return security_from_config(_COMMON_SCHEMA.parse(known))
    except ConfigError as exc:
        raise CommandError(f"{source}: {exc}") from None


_COMMON_SCHEMA = ConfigSchema("client", COMMON)


def whole_number(text: str, minimum: int, too_small: str, expected: str = "a whole number") -> int:
    """`text` as an int of at least `minimum`, for argparse; otherwise an error saying
    "expected <expected>, got '<text>'" or "<too_small>, got <value>"."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{too_small}, got {value}")
    return value


def positive_int(text: str) -> int:
    return whole_number(text, 1, "must be at least 1")


def non_negative_int(text: str) -> int:
    return whole_number(text, 0, "must not be negative")


def key_value(text: str) -> tuple[str, str]:
    """ "key=value" (the value may contain '='), for argparse."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


AdminAction = Callable[[Admin, argparse.Namespace], Awaitable[int]]


def admin_command(
    action: AdminAction,
    client_id: str,
    check: Callable[[argparse.Namespace], str | None] | None = None,
    parser: argparse.ArgumentParser | None = None,
    *,
    first_error: bool = False,
) -> Callable[[argparse.Namespace], int]:
    """A subcommand's function running `action` with an Admin for the command's
    --bootstrap-server and client settings. `check` finds argument combinations argparse
    cannot express, reported as usage errors by `parser` before anything is sent;
    `first_error` reports an AdminBatchError as its first error, as Kafka's tools do."""

    async def with_admin(args: argparse.Namespace) -> int:
        async with Admin(
            client_settings(args), bootstrap_servers=args.bootstrap_server, client_id=client_id
        ) as admin:
            try:
                return await action(admin, args)
            except AdminBatchError as exc:
                if not first_error:
                    raise
                raise next(iter(exc.errors.values())) from None

    def runner(args: argparse.Namespace) -> int:
        complaint = check(args) if check is not None else None
        if complaint is not None and parser is not None:
            parser.error(complaint)
        return run(with_admin(args))

    return runner


def run(coro: Coroutine[Any, Any, int]) -> int:
    """Run a subcommand's coroutine (on uvloop, as the blocking clients: see
    `loop_thread.new_event_loop`); report failures on one line of stderr, exit 1."""
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(coro)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`logbus consume t | head`): nothing to say.
        _silence_stdout()
        return 0
    except (KafkaError, CommandError, ProtocolError) as exc:
        return fail(str(exc))
    except TimeoutError:
        return fail("timed out")


def fail(message: str) -> int:
    print(f"logbus: error: {message}", file=sys.stderr)
    return 1


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


async def wait_for_topic(cluster: Cluster, topic: str, *, auto_create: bool) -> TopicInfo:
    """The topic's metadata once every partition has a leader. With `auto_create` the
    broker may create it (if its auto.create.topics.enable allows)."""
    start = time.monotonic()
    while True:
        md = await cluster.refresh([topic], allow_auto_topic_creation=auto_create)
        info = md.topics.get(topic)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else info.error_code
        waited = time.monotonic() - start
        if code == ErrorCode.NONE and info is not None and info.partitions:
            if all(p.leader != NO_LEADER for p in info.partitions.values()):
                return info
            code = ErrorCode.LEADER_NOT_AVAILABLE
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if not auto_create or waited >= _UNKNOWN_TOPIC_GRACE:
                return md.topic(topic)  # raises "Topic 'x' does not exist"
        elif code != ErrorCode.LEADER_NOT_AVAILABLE:
            return md.topic(topic)  # raises the topic's error
        if waited >= TOPIC_READY_TIMEOUT:
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE,
                f"Topic '{topic}' has partitions without a leader after {TOPIC_READY_TIMEOUT:g}s",
            )
        await asyncio.sleep(_RETRY_BACKOFF)


def first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (what to report on one line)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc
