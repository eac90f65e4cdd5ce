"""What the `logbus perf` tools share: a properties file reader, the progress reporter
(rich on a terminal, plain lines otherwise) and Kafka's --print-metrics table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from logbus.cli.common import CommandError

MB = 1024 * 1024  # Kafka's tools count MB in MiB
REPORT_INTERVAL = 5.0


class ToolParser(argparse.ArgumentParser):
    """A tool's argument parser: a bad argument is reported on one line and the tool
    exits with status 1, as Kafka's tools do (argparse's own status is 2)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def read_properties_file(path: str) -> dict[str, str]:
    """A client .properties file (CommandError when it cannot be read or parsed)."""
    # The broker's parser; imported here so the client commands stay light.
    from logbus.common.properties import parse_properties

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return parse_properties(text, path)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


class Reporter:
    """Where a long-running tool writes: plain lines on a pipe; on a terminal, a rich
    progress bar of `total` with the lines printed above it."""

    def __init__(self, label: str, total: int | None, live: bool | None = None) -> None:
        self._progress: Any = None
        self._task: Any = None
        if live if live is not None else sys.stdout.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
            )
            self._task = self._progress.add_task(label, total=total)

    def __enter__(self) -> Reporter:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def advance(self, count: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, count)


def print_metrics(group: str, metrics: Mapping[str, float]) -> None:
    """Metrics as Kafka's tools print them with --print-metrics."""
    names = [f"{group}:{name}" for name in sorted(metrics)]
    width = max(map(len, names), default=0)
    print()
    print(f"{'Metric Name':<{width}} : Value")
    for name, (_, value) in zip(names, sorted(metrics.items()), strict=True):
        print(f"{name:<{width}} : {value:.3f}")
