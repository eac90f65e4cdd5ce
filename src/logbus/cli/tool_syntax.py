"""Kafka's tool syntax for the commands that take an action word.

`kafka-topics --create --topic T ...` and `kafka-consumer-groups --reset-offsets --group G
...` select their action with an option given anywhere among the arguments;
`logbus topics create T` and `logbus groups reset-offsets G` take it as the first word.
`translate` turns the first form into the second before argparse sees it (the options
themselves, `--topic T`, `--group G`, ..., are accepted by the subcommands), so both
syntaxes reach the same code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ToolSyntaxError(Exception):
    """Not exactly one action option: Kafka's tools say so and exit with status 1."""


@dataclass(frozen=True, slots=True)
class ToolSyntax:
    """A command (`topics`) whose action options (`--create` -> `create`) select a
    subcommand, and the message Kafka's tool prints when not exactly one is given."""

    command: str
    actions: dict[str, str]
    message: str

    def translate(self, args: Sequence[str]) -> list[str] | None:
        """The arguments after the command word in the action-word form, or None when
        they are already in it (or only ask for help). Raises ToolSyntaxError."""
        if not args or args[0] in self.actions.values():
            return None
        found = [i for i, arg in enumerate(args) if arg in self.actions]
        if not found:
            if any(arg in ("-h", "--help") for arg in args) or not args[0].startswith("-"):
                return None  # help, or a mistyped action word: argparse explains
            raise ToolSyntaxError(self.message)
        if len(found) > 1:
            raise ToolSyntaxError(self.message)
        at = found[0]
        return [self.actions[args[at]], *args[:at], *args[at + 1 :]]


def translate(argv: Sequence[str], syntaxes: Sequence[ToolSyntax]) -> tuple[list[str], bool]:
    """`argv` with a Kafka-style command rewritten, and whether it was Kafka style (then
    usage errors exit with status 1, as Kafka's tools do). Raises ToolSyntaxError."""
    argv = list(argv)
    if not argv:
        return argv, False
    for syntax in syntaxes:
        if argv[0] == syntax.command:
            rewritten = syntax.translate(argv[1:])
            if rewritten is not None:
                return [argv[0], *rewritten], True
    return argv, False
