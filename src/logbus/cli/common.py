"""What every subcommand shares: the bootstrap option, whole-number and `key=value`
arguments, and running a coroutine with Kafka errors turned into a one-line message and
exit status 1."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from logbus.client.connection import parse_bootstrap
from logbus.client.errors import KafkaError
from logbus.protocol.errors import ProtocolError

DEFAULT_BOOTSTRAP = "localhost:9092"

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
    """"key=value" (the value may contain '='), for argparse."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def run(coro: Coroutine[Any, Any, int]) -> int:
    """Run a subcommand's coroutine; report failures on one line of stderr, exit 1."""
    try:
        return asyncio.run(coro)
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
