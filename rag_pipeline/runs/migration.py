"""Upgrading a data folder indexed by an earlier version: from (day x container) partitions to weeks.

Earlier versions stored one parquet file per (day, channel/project) and asset (``slack_threads/C0123/
2024-03-01.parquet``, ``jira_issues/2024-03-01/TIMOB.parquet``, empty days as hard links to one empty file).
The first command of this version that runs the chain on such a folder rewrites them as one file per week
and asset, each row labelled with the day and container its old file was named by, removes the old files
and records the converted weeks as materialized in the Dagster instance (so the UI shows the history as
synced). Nothing else changes: the index, the embedding cache and the sync runs (whose tags still give each
container's watermark, :mod:`rag_pipeline.runs.sync_runs`) are used as they are, so nothing is re-embedded
and no document is lost.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.pipeline.layout import WEEKLY_MARKER, read_layout, record_layout
from rag_pipeline.pipeline.parquet import write_frame
from rag_pipeline.pipeline.retained import Expired, RetentionScope, children
from rag_pipeline.scheduling.coverage import CONTAINER_COLUMN, DAY_COLUMN, week_start, weeks_between

log = logging.getLogger(__name__)

LAYOUT_FILE = WEEKLY_MARKER  # the parquet folder's marker (pipeline/layout.py reads it too)
LAYOUT = "weekly"
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class MigrationReport:
    """What the upgrade did."""

    files_converted: int = 0
    empty_files_removed: int = 0
    week_files_written: int = 0
    weeks_recorded: int = 0
    assets: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def describe(self) -> str:
        return (
            f"upgraded the data folder from (day x container) partitions to weeks: {self.files_converted} partition "
            f"files of {len(self.assets)} assets became {self.week_files_written} weekly files "
            f"({self.empty_files_removed} empty ones removed); the index, embedding cache and watermarks were kept"
        )


def _old_cell(asset_dir: Path, file: Path) -> tuple[str, str] | None:
    """(day, container) of a file of the old layout, None for anything else."""
    parts = file.relative_to(asset_dir).with_suffix("").parts
    if len(parts) != 2:
        return None
    days = [p for p in parts if _DAY.fullmatch(p)]
    if len(days) != 1:
        return None  # a container id never looks like a day; a key of two days is not ours
    container = parts[0] if parts[1] == days[0] else parts[1]
    return days[0], container


def upgrade_data_folder(parquet_dir: Path, instance: dg.DagsterInstance | None) -> MigrationReport | None:
    """Convert ``parquet_dir`` to weekly files where it holds the old layout (None where there was nothing to
    do). Safe to re-run: a folder already converted is marked and skipped, and a conversion stopped half-way
    leaves old files that the next run converts (merged into the weekly files it had written)."""
    marker = parquet_dir / LAYOUT_FILE
    data_dir = parquet_dir.parent
    was = read_layout(data_dir)  # before the conversion changes what the files say
    if was.newer_than_this_version:
        raise ValueError(was.describe())
    if not parquet_dir.is_dir() or (marker.exists() and marker.read_text().strip() == LAYOUT):
        record_layout(data_dir, was=was)  # a new folder, or one converted before its layout was recorded
        return None
    report = MigrationReport()
    for asset_dir in sorted(p for p in parquet_dir.iterdir() if p.is_dir()):
        cells: dict[str, list[pd.DataFrame]] = defaultdict(list)
        old_files: list[Path] = []
        for file in sorted(asset_dir.glob("*/*.parquet")):
            cell = _old_cell(asset_dir, file)
            if cell is None:
                continue
            old_files.append(file)
            day, container = cell
            frame = pd.read_parquet(file)
            if not len(frame):
                report.empty_files_removed += 1
                continue
            frame[DAY_COLUMN] = day
            frame[CONTAINER_COLUMN] = container
            cells[week_start(date.fromisoformat(day)).isoformat()].append(frame)
        if not old_files:
            continue
        report.assets.append(asset_dir.name)
        report.files_converted += len(old_files)
        for week, frames in sorted(cells.items()):
            target = asset_dir / f"{week}.parquet"
            if target.exists():
                frames = [pd.read_parquet(target), *frames]
            write_frame(target, pd.concat(frames, ignore_index=True))
            report.week_files_written += 1
        for file in old_files:
            file.unlink()
        for folder in sorted({f.parent for f in old_files}):
            if not any(folder.iterdir()):
                folder.rmdir()
        for template in asset_dir.glob(".empty-*.parquet"):
            template.unlink()
        if instance is not None and cells:
            weeks = weeks_between(date.fromisoformat(min(cells)), date.fromisoformat(max(cells)))
            for week in weeks:
                instance.report_runless_asset_event(
                    dg.AssetMaterialization(
                        asset_key=asset_dir.name,
                        partition=week,
                        metadata={"migrated_from": "day x container partitions"},
                    )
                )
            report.weeks_recorded += len(weeks)
    marker.write_text(LAYOUT + "\n")
    if not report.assets:
        record_layout(data_dir, was=was)
        return None
    record_layout(data_dir, report.as_dict(), was=was)  # the folder's layout history keeps what the upgrade did
    log.warning(report.describe())
    return report


class SupersededParquet:
    """Retention of the (day x container) layout's files (:class:`~rag_pipeline.pipeline.retained.RetainedArtifact`)
    in a folder already upgraded to weeks: the upgrade converts a folder's old files and then marks it, so files of
    the old layout found after that (written by an older process still running then), and its empty-file templates,
    are read by nothing (the IO manager reads only ``<asset>/<week>.parquet`` and the upgrade skips a marked folder).
    In a folder not yet upgraded they are the upgrade's input: kept."""

    kind = "superseded_parquet"
    label = "parquet files of the (day x container) layout"

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        parquet = scope.settings.paths.parquet
        marker = parquet / LAYOUT_FILE
        if not (marker.is_file() and marker.read_text().strip() == LAYOUT):
            return
        for asset_dir in children(parquet):
            if asset_dir.is_dir() and not asset_dir.is_symlink():
                for file in sorted(asset_dir.glob("*/*.parquet")):
                    if _old_cell(asset_dir, file) is not None:
                        yield Expired(file, "a (day x container) file in a folder upgraded to weeks")
                for template in sorted(asset_dir.glob(".empty-*.parquet")):
                    yield Expired(template, "an empty-partition template of the (day x container) layout")
