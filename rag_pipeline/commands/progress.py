"""One rich progress display with a bar per named task, for commands that report ``(name, done, total)``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


@contextmanager
def task_bars(
    console: Console, disable: bool = False, in_bytes: bool = False
) -> Iterator[Callable[[str, int, int], None]]:
    """Yields ``progress(name, done, total)``: the first call for a name adds its bar. ``in_bytes`` counts bytes
    (sizes and a transfer speed) instead of items."""
    counts: tuple[ProgressColumn, ...] = (
        (DownloadColumn(), TransferSpeedColumn(), TimeElapsedColumn())
        if in_bytes
        else (MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    )
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        *counts,
        console=console,
        disable=disable or not console.is_terminal,
    ) as bars:
        tasks: dict[str, TaskID] = {}

        def progress(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bars.add_task(name, total=total)
            bars.update(tasks[name], completed=done, total=total)

        yield progress


class BatchClock:
    """The ETA of a sequence of batches for a log line (a terminal's bar has rich's own): the seconds per batch
    this process has run so far, times the batches left. ``done_at_start`` batches were done before (a resumed
    command) and take no time."""

    def __init__(self, done_at_start: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.done_at_start = done_at_start
        self.clock = clock
        self.started = clock()

    def eta(self, done: int, total: int) -> str:
        """``", ETA 3 min 20 s"`` once a batch ran here and some are left, else empty."""
        ran = done - self.done_at_start
        if ran <= 0 or done >= total:
            return ""
        left = round((self.clock() - self.started) / ran * (total - done))
        minutes, seconds = divmod(left, 60)
        return f", ETA {minutes} min {seconds} s" if minutes else f", ETA {seconds} s"
