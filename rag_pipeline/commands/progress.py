"""One rich progress display with a bar per named task, for commands that report ``(name, done, total)``."""

from __future__ import annotations

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
