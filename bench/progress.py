"""Live progress while the bench runs: a rich progress bar for the run in flight (records
done, MB/s so far) above a log of finished rows. Falls back to plain lines without a TTY."""

from __future__ import annotations

import sys
import time
from typing import Any

try:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress
except ImportError:  # without the bench extra: plain lines
    Console = None  # type: ignore[assignment,misc]


class Progress:
    """Owned by the runner; the load loops call `advance` (cheap: call it every few
    thousand records, not per record). Safe to call from one worker thread at a time."""

    def __init__(self, live: bool | None = None) -> None:
        self.live = (sys.stderr.isatty() if live is None else live) and Console is not None
        self.console = Console(stderr=True) if Console is not None else None
        self._rich: Any = None
        self._task: Any = None
        self._done = 0
        self._bytes = 0
        self._start = 0.0

    def __enter__(self) -> Progress:
        if self.live:
            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=self.console,
                refresh_per_second=4,
            )
            self._rich.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.__exit__(None, None, None)
            self._rich = None

    def note(self, message: str, style: str | None = None) -> None:
        if self._rich is not None:
            self._rich.console.log(message, style=style, markup=False, highlight=False)
        elif self.console is not None:
            self.console.print(message, style=style, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr, flush=True)

    def begin(self, label: str, total: int | None) -> None:
        self._done = 0
        self._bytes = 0
        self._start = time.perf_counter()
        if self._rich is not None:
            if self._task is not None:
                self._rich.remove_task(self._task)
            self._task = self._rich.add_task(label, total=total, rate="")
        else:
            print(f"  {label} ...", file=sys.stderr, flush=True)

    def advance(self, records: int, nbytes: int = 0) -> None:
        self._done += records
        self._bytes += nbytes
        if self._rich is not None and self._task is not None:
            elapsed = max(time.perf_counter() - self._start, 1e-9)
            rate = f"{self._done / elapsed:,.0f} rec/s"
            if self._bytes:
                rate += f"  {self._bytes / elapsed / 1e6:,.1f} MB/s"
            self._rich.update(self._task, completed=self._done, rate=rate)

    def end(self) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.remove_task(self._task)
            self._task = None
