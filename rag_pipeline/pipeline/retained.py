"""What retention asks the owner of each artifact of a data folder: which of its files may go.

Each artifact (the evaluation reports, the learned reranker's versions and fits, the parquet files of an old
layout, the temporary files a writer leaves when it is killed) is a :class:`RetainedArtifact` defined beside the
code that writes it, so the knowledge of what a file is and when it is no longer read stays with its owner;
``runs/retention.py`` only asks each registered artifact and deletes what they list (every path checked to lie
inside the data folder, in one place). A new artifact is a new implementation and a line in retention's registry.
The Dagster runs are retention's own (``runs/retention.py``): what keeps one is asked of their owners the same
way (``RunKeeper`` there).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from rag_pipeline.settings import Settings

# Kinds several owners contribute to.
TEMPORARY_FILES = "temporary_files"
TEMPORARY_LABEL = "temporary files of interrupted writes"
# A temporary file younger than this may belong to a write in progress.
TEMPORARY_GRACE = timedelta(days=1)


@dataclass(frozen=True)
class Expired:
    """A file or folder an artifact no longer needs, and why; ``mtime``: when it was last written, where the owner
    knows better than the file's own time (a report's stamp; None: the newest file under it)."""

    path: Path
    reason: str
    mtime: float | None = None


@dataclass(frozen=True)
class RetentionScope:
    """The settings and the moment one retention plan is made at."""

    settings: Settings
    now: datetime

    @property
    def report_cutoff(self) -> datetime | None:
        """Reports, reranker versions and fits older than this may go (None: ``report_days`` is 0, kept)."""
        count = self.settings.retention.report_days
        return None if count <= 0 else self.now - timedelta(days=count)

    @property
    def temporary_cutoff(self) -> float:
        """A temporary file written after this (a timestamp) may belong to a write in progress."""
        return (self.now - TEMPORARY_GRACE).timestamp()

    @property
    def report_age(self) -> str:
        """``90 days``: the reports' retention, as reasons say it."""
        return days(self.settings.retention.report_days)


class RetainedArtifact(Protocol):
    """Files of one kind that one module writes and knows when to give up."""

    @property
    def kind(self) -> str:
        """``eval_reports``: how a plan counts and reports them."""
        ...

    @property
    def label(self) -> str:
        """``evaluation reports (reports/history)``: what they are, for a reader of the plan."""
        ...

    def expired(self, scope: RetentionScope) -> Iterable[Expired]:
        """The files or folders it no longer needs at ``scope.now``; nothing is deleted here."""
        ...


def days(count: int) -> str:
    return f"{count} day{'s' if count != 1 else ''}"


def children(folder: Path) -> list[Path]:
    """The entries of ``folder``, sorted (none where it is missing or not a folder)."""
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def newest_mtime(path: Path) -> float:
    """When a file was last written; for a folder, its newest file (the folder's own time only when it holds none:
    it changes with every entry added or removed, which says nothing of the files' age)."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_mtime
    newest: float | None = None
    for folder, _dirs, files in os.walk(path, followlinks=False):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                mtime = (Path(folder) / name).lstat().st_mtime
                newest = mtime if newest is None else max(newest, mtime)
    return path.lstat().st_mtime if newest is None else newest


@dataclass(frozen=True)
class TemporaryWrites:
    """The temporary files a writer that writes a temporary file and renames it leaves when killed half-way: files
    matching ``pattern`` in ``folder(settings)``, older than a day."""

    folder: Callable[[Settings], Path]
    pattern: str
    reason: str = "a file write that never finished"
    kind: str = TEMPORARY_FILES
    label: str = TEMPORARY_LABEL

    def expired(self, scope: RetentionScope) -> Iterable[Expired]:
        for temp in sorted(self.folder(scope.settings).glob(self.pattern)):
            if temp.is_file() and temp.lstat().st_mtime < scope.temporary_cutoff:
                yield Expired(temp, self.reason)


def folders_older_than(
    folder: Path, cutoff: datetime | None, kept: Callable[[Path], bool] = lambda _: False
) -> Iterator[tuple[Path, float]]:
    """(sub-folder, when its newest file was written) of each sub-folder of ``folder`` that ``kept`` does not keep
    and that nothing was written to since ``cutoff`` (none where ``cutoff`` is None: kept forever)."""
    if cutoff is None:
        return
    for sub in children(folder):
        if sub.is_dir() and not kept(sub):
            mtime = newest_mtime(sub)
            if mtime < cutoff.timestamp():
                yield sub, mtime


def human_bytes(size: int) -> str:
    """``1.5 MiB``: binary units, one decimal above bytes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns at GiB
