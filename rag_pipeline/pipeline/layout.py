"""The data folder's layout version: what an upgrade reads to know whether a migration is pending, and where the
history of the migrations that ran is kept.

A data folder (``RAG_DATA_DIR``, the volume of a deployment) outlives the code that wrote it: an operator upgrades
the images on the same volumes. Each change of how the folder is laid out that older code cannot read, or newer
code must convert, raises :data:`LAYOUT_VERSION` and adds a row to :data:`MIGRATIONS`. The version a folder holds is
recorded in ``layout.json`` at its root when a command of this version has brought it up to date; a folder written
before the record existed is read from its files (the weekly layout's marker, or partition files a day each).

Version history:

1. one parquet file per (day, channel/project) and asset (up to 2026-11-27);
2. one parquet file per week and asset, each row labelled with its day and container (the migration runs on the
   first ``index``, ``sync``, ``demo`` or scheduled run of a version that knows it: :mod:`rag_pipeline.runs.migration`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

LAYOUT_VERSION = 2
LAYOUT_RECORD = "layout.json"
# The weekly layout's own marker (runs/migration.py writes it into the parquet folder once converted).
WEEKLY_MARKER = ".layout"


@dataclass(frozen=True)
class Migration:
    """One step from a layout version to the next: what it changes and what it keeps."""

    source: int
    target: int
    describes: str


MIGRATIONS = (
    Migration(
        1,
        2,
        "(day x channel/project) partition files become one file per week and asset; the index, the embedding "
        "cache and the sync watermarks are kept (nothing is re-embedded)",
    ),
)


@dataclass
class LayoutState:
    """The layout a data folder holds, how it was known, and the migrations a command of this version will run."""

    version: int | None  # None: nothing written yet (a new folder)
    known_from: str  # "record" (layout.json), "files" (read from the folder's files) or "empty"
    current: int = LAYOUT_VERSION
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pending(self) -> list[Migration]:
        if self.version is None:
            return []
        return [m for m in MIGRATIONS if m.source >= self.version]

    @property
    def newer_than_this_version(self) -> bool:
        return self.version is not None and self.version > LAYOUT_VERSION

    def describe(self) -> str:
        if self.version is None:
            return f"data folder layout: none yet (this version writes layout {LAYOUT_VERSION})"
        if self.newer_than_this_version:
            return (
                f"data folder layout: {self.version}, written by a newer rag-pipeline (this version reads up to "
                f"{LAYOUT_VERSION}): upgrade rag-pipeline before running anything on it"
            )
        if self.pending:
            steps = "; ".join(f"{m.source} -> {m.target}: {m.describes}" for m in self.pending)
            return (
                f"data folder layout: {self.version}, migration pending to {LAYOUT_VERSION} ({steps}); the next "
                "index, sync, demo or scheduled run performs it and can be re-run if stopped"
            )
        return f"data folder layout: {self.version} (current)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "known_from": self.known_from,
            "current": self.current,
            "pending": [vars(m) for m in self.pending],
            "history": self.history,
        }


def _has_daily_partition_files(parquet: Path) -> bool:
    """Whether any asset folder still holds a file of the first layout (``<asset>/<a>/<b>.parquet``)."""
    return parquet.is_dir() and any(
        next(asset.glob("*/*.parquet"), None) is not None for asset in parquet.iterdir() if asset.is_dir()
    )


def read_layout(data_dir: Path) -> LayoutState:
    """The layout ``data_dir`` holds: its record, else what its files say."""
    record = data_dir / LAYOUT_RECORD
    if record.is_file():
        try:
            written = json.loads(record.read_text(encoding="utf-8"))
            return LayoutState(int(written["version"]), "record", history=list(written.get("history", [])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{record} is not a layout record ({type(exc).__name__}): restore it from a backup, or "
                             "delete it to have the folder's files read again") from None  # fmt: skip
    parquet = data_dir / "parquet"
    if _has_daily_partition_files(parquet):
        return LayoutState(1, "files")
    marker = parquet / WEEKLY_MARKER
    if marker.is_file() or (parquet.is_dir() and any(parquet.iterdir())):
        return LayoutState(2, "files")
    return LayoutState(None, "empty")


def record_layout(
    data_dir: Path, migrated: dict[str, Any] | None = None, was: LayoutState | None = None
) -> LayoutState:
    """Record that ``data_dir`` now holds :data:`LAYOUT_VERSION` (and, after a migration from the layout ``was``
    read before it, what it did), atomically; a folder whose layout is newer than this version is refused."""
    before = was or read_layout(data_dir)
    if before.newer_than_this_version:
        raise ValueError(before.describe())
    history = list(before.history)
    if migrated is not None or (before.version is not None and before.version < LAYOUT_VERSION):
        history.append(
            {
                "from": before.version,
                "to": LAYOUT_VERSION,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "by": _package_version(),
                "report": migrated or {},
            }
        )
    if before.known_from == "record" and before.version == LAYOUT_VERSION and history == before.history:
        return before
    record = {"version": LAYOUT_VERSION, "written_by": _package_version(), "history": history}
    data_dir.mkdir(parents=True, exist_ok=True)
    temporary = data_dir / f".{LAYOUT_RECORD}.{os.getpid()}"
    temporary.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    temporary.replace(data_dir / LAYOUT_RECORD)
    return LayoutState(LAYOUT_VERSION, "record", history=history)


def _package_version() -> str:
    try:
        return f"rag_pipeline {metadata.version('rag_pipeline')}"
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "rag_pipeline (not installed)"
