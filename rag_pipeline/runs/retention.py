"""Retention: what a data folder and its Dagster instance may lose after a while, and what they must keep.

:func:`plan_retention` lists what would be deleted (nothing is touched); :func:`apply_retention` deletes what a
plan lists. ``rag-pipeline prune`` and the daily ``retention_schedule`` (``defs/retention.py``) both call them.

**Runs** (``RAG_RETENTION_RUN_DAYS``, default 30; 0 keeps every run): a finished run (succeeded, failed or
canceled) that ended more than ``run_days`` ago is deleted with ``DagsterInstance.delete_run``, which removes its
event log too, unless the current version still reads it:

- **the newest materialization of every partition of every asset** (and of every unpartitioned asset). Deleting a
  run deletes its materialization events, and ``get_materialized_partitions`` (the ``no_missing_days`` check, the
  UI whenever it rebuilds its partition status cache) reads those events: a week materialized only by a deleted
  run turns "missing". The run holding a partition's newest materialization is therefore kept (usually the first
  index, which materialized the whole history, and the newest sync run of each week). Runless events (the upgrade's
  records of converted weeks) belong to no run and are never touched;
- **each sync watermark**: the planner folds a container's sync runs into its state
  (:func:`rag_pipeline.scheduling.watermarks.container_state`). For every source and container the runs that give
  that state are kept: the successful run with the newest watermark, the last success (its API calls size the next
  range), the last failure when it is newer (``status`` and the sensor's retry rule read it) and the first
  successful sync (the gap check's first week). Sync runs of a source this version does not know are kept whole;
- **the newest successful index run of each source and input file** (``rag/source_fingerprint``): ``index`` skips
  an unchanged file because that run exists, so deleting it would index the whole history again;
- runs that are **not finished** (queued, starting, running, canceling) are never deleted, whatever their age.

With the runners' SQLite instance each run's events also live in a file of their own
(``<dagster_home>/history/runs/<run id>.db``) that ``delete_run`` empties but leaves on disk: it is removed with
its run, and such files whose run is gone (runs deleted in the UI) are removed too. Freed pages inside
``index.db`` and ``runs.db`` are reused by new events; SQLite does not give them back to the disk.

**Files** (``RAG_RETENTION_REPORT_DAYS``, default 90, for reports; 0 keeps them): evaluation report folders under
``reports/history`` older than ``report_days``, except each eval set's newest report and the newest report as a
whole (``ReportStore.newest``); learned reranker versions under ``reports/reranker`` that ``CURRENT`` does not name;
cached reranker fits under ``reports/reranker_fits`` not written for ``report_days`` (a cache: a fit still needed
is trained again once). Superseded parquet files (those of the (day x container) layout, and its empty-file
templates, left in a folder already upgraded to weeks, which nothing reads) and temporary files older than a day
(a write killed half-way) go whatever the settings. Files of the old layout in a folder not yet upgraded are the
upgrade's input and are kept. The index, the embedding cache, the directory, the weekly parquet files, the
``latest`` reports, the baseline, the caches of rewrites and grades and the request audit (pruned by its own
setting) are never touched.

Every path is resolved before it is deleted and must lie inside the data folder: a symlink that leads out of it is
refused (reported, left alone), and a folder is removed without following the links inside it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.defs.dagster_private import SqliteEventLogStorage
from rag_pipeline.defs.sync.tags import SOURCE_TAG
from rag_pipeline.evaluation.report_store import SUMMARY_FILE
from rag_pipeline.retrieval.rerank.learned import FITS_FOLDER
from rag_pipeline.runs.migration import LAYOUT, LAYOUT_FILE
from rag_pipeline.scheduling.watermarks import RunState, SyncRun, container_state
from rag_pipeline.settings import Settings

# What a plan deletes, in the order it is reported.
RUNS = "runs"
EVENT_LOG_SHARDS = "event_log_shards"
EVAL_REPORTS = "eval_reports"
RERANKER_MODELS = "reranker_models"
RERANKER_FITS = "reranker_fits"
SUPERSEDED_PARQUET = "superseded_parquet"
TEMPORARY_FILES = "temporary_files"
KINDS = (RUNS, EVENT_LOG_SHARDS, EVAL_REPORTS, RERANKER_MODELS, RERANKER_FITS, SUPERSEDED_PARQUET, TEMPORARY_FILES)
KIND_LABELS = {
    RUNS: "finished Dagster runs and their event logs",
    EVENT_LOG_SHARDS: "event log files of runs already deleted",
    EVAL_REPORTS: "evaluation reports (reports/history)",
    RERANKER_MODELS: "learned reranker versions not CURRENT",
    RERANKER_FITS: "cached reranker fits",
    SUPERSEDED_PARQUET: "parquet files of the (day x container) layout",
    TEMPORARY_FILES: "temporary files of interrupted writes",
}

FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
# A temporary file younger than this may belong to a write in progress.
TEMPORARY_GRACE = timedelta(days=1)
# An event log file without a run younger than this may belong to a run being created (a run is stored before its
# first event, so this is belt and braces).
SHARD_GRACE = timedelta(days=1)
_RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_REPORT_STAMP = "%Y%m%dT%H%M%SZ"
# Storage ids looked up at a time when mapping each partition's newest materialization to its run.
_LOOKUP_CHUNK = 500
# Sync runs of one source read per page.
_PAGE = 500


@dataclass(frozen=True)
class RunItem:
    """A finished run the plan deletes, with its event log file's bytes (0 where the instance keeps no file)."""

    run_id: str
    job_name: str
    status: str
    ended_at: datetime
    age_days: float
    bytes: int
    reason: str
    shard: Path | None = None  # its event log file inside the data folder, removed with it

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job_name": self.job_name,
            "status": self.status,
            "ended_at": self.ended_at.isoformat(timespec="seconds"),
            "age_days": round(self.age_days, 1),
            "bytes": self.bytes,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class PathItem:
    """A file or folder the plan deletes."""

    kind: str
    path: Path
    bytes: int
    age_days: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "bytes": self.bytes,
            "age_days": round(self.age_days, 1),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class KeptRun:
    """A finished run old enough to go that the plan keeps, and why."""

    run_id: str
    job_name: str
    age_days: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "job_name": self.job_name,
            "age_days": round(self.age_days, 1),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class KindTotal:
    """How many items of one kind, and their bytes."""

    count: int
    bytes: int


def _totals(items: Iterable[tuple[str, int]]) -> dict[str, KindTotal]:
    counts: dict[str, list[int]] = {kind: [0, 0] for kind in KINDS}
    for kind, size in items:
        counts[kind][0] += 1
        counts[kind][1] += size
    return {kind: KindTotal(count, size) for kind, (count, size) in counts.items()}


@dataclass
class RetentionPlan:
    """What :func:`apply_retention` would delete, each item with its reason, and the old runs kept."""

    now: datetime
    data_dir: Path
    run_days: int
    report_days: int
    runs: list[RunItem] = field(default_factory=list)
    paths: list[PathItem] = field(default_factory=list)
    kept_runs: list[KeptRun] = field(default_factory=list)
    # Paths a plan would have deleted but refused: they resolve outside the data folder.
    refused: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, KindTotal]:
        """Count and bytes per kind (every kind, zeros included)."""
        return _totals([(RUNS, r.bytes) for r in self.runs] + [(p.kind, p.bytes) for p in self.paths])

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.totals().values())

    @property
    def empty(self) -> bool:
        return not self.runs and not self.paths

    def as_dict(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(timespec="seconds"),
            "data_dir": str(self.data_dir),
            "run_days": self.run_days,
            "report_days": self.report_days,
            "bytes": self.bytes,
            "kinds": {k: {"count": t.count, "bytes": t.bytes} for k, t in self.totals().items()},
            "runs": [r.as_dict() for r in self.runs],
            "paths": [p.as_dict() for p in self.paths],
            "kept_runs": [k.as_dict() for k in self.kept_runs],
            "refused": list(self.refused),
        }


@dataclass
class RetentionResult:
    """What :func:`apply_retention` deleted (and what it left because it had changed since the plan)."""

    runs_deleted: int = 0
    bytes_reclaimed: int = 0
    kinds: dict[str, KindTotal] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs_deleted": self.runs_deleted,
            "bytes_reclaimed": self.bytes_reclaimed,
            "kinds": {k: {"count": t.count, "bytes": t.bytes} for k, t in self.kinds.items()},
            "skipped": list(self.skipped),
        }


def human_bytes(size: int) -> str:
    """``1.5 MiB``: binary units, one decimal above bytes."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover - the loop returns at GiB


# --- paths ------------------------------------------------------------------------------------------------------


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, its symlinks resolved, lies inside ``root`` (also resolved)."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def tree_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder, without following symlinks (a link counts its own size)."""
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
    except FileNotFoundError:
        return 0
    total = 0
    for folder, dirs, files in os.walk(path, followlinks=False):
        for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(folder) / name).lstat().st_size
    return total


def _newest_mtime(path: Path) -> float:
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


def _age_days(now: datetime, timestamp: float) -> float:
    return (now.timestamp() - timestamp) / 86400


class _Paths:
    """Collects the plan's paths, refusing any that leads out of the data folder."""

    def __init__(self, root: Path, now: datetime) -> None:
        self.root = root
        self.now = now
        self.items: list[PathItem] = []
        self.refused: list[str] = []

    def add(self, kind: str, path: Path, reason: str, mtime: float | None = None) -> None:
        if not inside(self.root, path):
            self.refused.append(f"{path}: resolves outside the data folder {self.root}")
            return
        age = _age_days(self.now, mtime if mtime is not None else _newest_mtime(path))
        self.items.append(PathItem(kind, path, tree_bytes(path), age, reason))


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _plan_reports(settings: Settings, found: _Paths, cutoff: datetime) -> None:
    """Old report folders, reranker versions that are not CURRENT and fits not written since the cutoff."""
    history = settings.paths.reports / "history"
    stamps = [p for p in _children(history) if p.is_dir() and not p.is_symlink()]
    # Each eval set's newest report, and the newest report as a whole, are what `demo`, the report's regression
    # check and a reader of reports/ look at: kept whatever their age.
    newest_of_set: dict[str, Path] = {}
    for stamp in stamps:  # sorted: stamps sort by time
        for eval_set in _children(stamp):
            if eval_set.is_dir():
                newest_of_set[eval_set.name] = stamp
    with_summary = [s for s in stamps if (s / SUMMARY_FILE).exists()]
    newest = with_summary[-1] if with_summary else (stamps[-1] if stamps else None)
    kept = set(newest_of_set.values()) | ({newest} if newest else set())
    for stamp in stamps:
        made = _stamp_time(stamp)
        if made >= cutoff.timestamp():
            continue
        if stamp not in kept:
            found.add(
                EVAL_REPORTS, stamp, f"report of {stamp.name}, older than {_days(settings.retention.report_days)}", made
            )
            continue
        # A kept report folder still loses the eval sets that have a newer report elsewhere.
        for eval_set in _children(stamp):
            if eval_set.is_dir() and newest_of_set.get(eval_set.name) != stamp:
                found.add(
                    EVAL_REPORTS,
                    eval_set,
                    f"{eval_set.name} report of {stamp.name}, older than {_days(settings.retention.report_days)} "
                    "(a newer one exists)",
                    made,
                )

    reranker = settings.paths.reranker
    current_file = reranker / "CURRENT"
    if current_file.is_file():  # without CURRENT no version is known to be unused: nothing is deleted
        current = current_file.read_text().strip()
        for version in _children(reranker):
            if version.is_dir() and version.name != current:
                mtime = _newest_mtime(version)
                if mtime < cutoff.timestamp():
                    found.add(
                        RERANKER_MODELS, version, f"reranker version {version.name} (CURRENT is {current})", mtime
                    )

    for fit in _children(settings.paths.reports / FITS_FOLDER):
        if fit.is_dir() and not fit.name.endswith(".tmp"):
            mtime = _newest_mtime(fit)
            if mtime < cutoff.timestamp():
                found.add(
                    RERANKER_FITS,
                    fit,
                    f"fit cache entry not written for {_days(settings.retention.report_days)}",
                    mtime,
                )


def _stamp_time(stamp: Path) -> float:
    try:
        return datetime.strptime(stamp.name, _REPORT_STAMP).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return _newest_mtime(stamp)


def _days(days: int) -> str:
    return f"{days} day{'s' if days != 1 else ''}"


def _old_layout_cell(asset_dir: Path, file: Path) -> bool:
    """Whether ``file`` is a partition file of the (day x container) layout: ``<asset>/<day>/<container>.parquet``
    or ``<asset>/<container>/<day>.parquet`` (the upgrade's own test, ``runs/migration.py``)."""
    parts = file.relative_to(asset_dir).with_suffix("").parts
    return len(parts) == 2 and sum(bool(_DAY.fullmatch(p)) for p in parts) == 1


def _plan_parquet(settings: Settings, found: _Paths, now: datetime) -> None:
    """Superseded files of the old layout in upgraded folders, and temporary files of interrupted writes."""
    parquet = settings.paths.parquet
    marker = parquet / LAYOUT_FILE
    upgraded = marker.is_file() and marker.read_text().strip() == LAYOUT
    stale = (now - TEMPORARY_GRACE).timestamp()
    for asset_dir in _children(parquet):
        if not asset_dir.is_dir() or asset_dir.is_symlink():
            continue
        if upgraded:
            # The upgrade converts a folder's old files and then marks it; files of the old layout found after that
            # (written by an older process still running then) are read by nothing: the IO manager reads only
            # <asset>/<week>.parquet and the upgrade skips a marked folder.
            for file in sorted(asset_dir.glob("*/*.parquet")):
                if _old_layout_cell(asset_dir, file):
                    found.add(SUPERSEDED_PARQUET, file, "a (day x container) file in a folder upgraded to weeks")
            for template in sorted(asset_dir.glob(".empty-*.parquet")):
                found.add(SUPERSEDED_PARQUET, template, "an empty-partition template of the (day x container) layout")
        for temp in sorted(asset_dir.rglob(".*.tmp")):
            mtime = temp.lstat().st_mtime
            if temp.is_file() and mtime < stale:
                found.add(TEMPORARY_FILES, temp, "a parquet write that never finished", mtime)
    for temp in _children(settings.paths.reports / FITS_FOLDER):
        if temp.name.endswith(".tmp") and _newest_mtime(temp) < stale:
            found.add(TEMPORARY_FILES, temp, "a reranker fit whose save never finished")
    # The other writers that write a temporary file and rename it: the skipped-records report and the runners'
    # instance config.
    for folder, pattern in (
        (settings.paths.reports / "skipped", ".*.tmp"),
        (settings.paths.dagster_home, ".dagster.yaml.*.tmp"),
    ):
        for temp in sorted(folder.glob(pattern)):
            if temp.is_file() and temp.lstat().st_mtime < stale:
                found.add(TEMPORARY_FILES, temp, "a file write that never finished")


# --- runs -------------------------------------------------------------------------------------------------------


def _ended(record: dg.RunRecord) -> float:
    if record.end_time:
        return float(record.end_time)
    return record.update_timestamp.replace(tzinfo=record.update_timestamp.tzinfo or UTC).timestamp()


def _chunks(values: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def newest_materialization_runs(instance: dg.DagsterInstance) -> dict[str, str]:
    """run id -> why it is kept, for every run holding the newest materialization of a partition of an asset (or
    of an unpartitioned asset). One query per asset for the newest storage id of each partition, then the runs of
    those records."""
    weeks: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # run -> asset -> partitions
    for key in instance.get_asset_keys():
        latest = instance.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
        ids = sorted(set(latest.values()))
        for chunk in _chunks(ids, _LOOKUP_CHUNK):
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, storage_ids=list(chunk)), limit=len(chunk)
            ).records
            for record in records:
                if record.run_id:
                    weeks[record.run_id][key.to_user_string()] += 1
    for asset in instance.get_asset_records():
        last = asset.asset_entry.last_materialization_record
        if last is not None and last.run_id:
            weeks[last.run_id].setdefault(asset.asset_entry.asset_key.to_user_string(), 1)
    return {
        run_id: "holds the newest materialization of "
        + ", ".join(f"{asset} ({n} partition{'s' if n != 1 else ''})" for asset, n in sorted(assets.items())[:3])
        + (f" and {len(assets) - 3} more assets" if len(assets) > 3 else "")
        for run_id, assets in weeks.items()
    }


def watermark_runs(instance: dg.DagsterInstance, settings: Settings) -> dict[str, str]:
    """run id -> why it is kept, for the sync runs the planner's state of each container is made of."""
    # Imported here: the builders import the Dagster wiring of this module (defs/retention.py).
    from rag_pipeline.defs.builders import source_specs
    from rag_pipeline.defs.sync.runs import sync_runs

    specs = source_specs(settings)
    by_tag = {spec.api_tag: spec for spec in specs.values()}
    offline = {spec.name for spec in specs.values()}
    keep: dict[str, str] = {}
    # run id -> (source, role) -> containers
    roles: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for _key, values in instance.get_run_tags(tag_keys=[SOURCE_TAG]):
        for value in sorted(values):
            spec = by_tag.get(value)
            if spec is None:
                if value not in offline:
                    # A source this version cannot read (a plugin since removed): its runs' plans are not ours to
                    # interpret, so none of its runs is deleted.
                    for record in _all_records(instance, dg.RunsFilter(tags={SOURCE_TAG: value})):
                        keep[record.dagster_run.run_id] = (
                            f"a sync run of {value!r}, a source this version does not know"
                        )
                continue
            parts: list[SyncRun] = []
            for record in _all_records(instance, dg.RunsFilter(tags={SOURCE_TAG: value}, statuses=list(FINISHED))):
                parts.extend(sync_runs(spec, record))
            by_container: dict[str, list[SyncRun]] = defaultdict(list)
            for part in parts:
                by_container[part.container].append(part)
            for container, runs in sorted(by_container.items()):
                for run_id, role in _state_runs(container, runs):
                    roles[run_id][(spec.name, role)].append(container)
    for run_id, held in roles.items():
        keep[run_id] = "; ".join(
            f"{role} of {source} {_some(containers)}" for (source, role), containers in sorted(held.items())
        )
    return keep


def _some(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``."""
    listed = ", ".join(names[:shown])
    return f"{listed} and {len(names) - shown} more" if len(names) > shown else listed


def _state_runs(container: str, runs: Sequence[SyncRun]) -> list[tuple[str, str]]:
    """The runs a container's state is made of (:func:`container_state`), each with its role."""
    state = container_state(container, runs)
    out: list[tuple[str, str]] = []
    marked = [r for r in runs if r.state is RunState.SUCCESS and r.synced_through is not None]
    if state.watermark is not None:
        newest = max((r for r in marked if r.synced_through == state.watermark), key=lambda r: r.planned_at)
        out.append((newest.run_id, "the watermark"))
    if state.last_success is not None:
        out.append((state.last_success.run_id, "the last success"))
    if state.last_failure is not None:
        out.append((state.last_failure.run_id, "the last failure"))
    if state.first_synced_day is not None:
        first = min((r for r in marked if r.first_day == state.first_synced_day), key=lambda r: r.planned_at)
        out.append((first.run_id, "the first synced day"))
    return out


def index_runs(instance: dg.DagsterInstance, candidates: Sequence[dg.RunRecord]) -> dict[str, str]:
    """run id -> why it is kept, for the newest successful ``index``/``demo`` run of each source and input file."""
    from rag_pipeline.runs.backfill import FINGERPRINT_TAG

    pairs = {
        (r.dagster_run.tags[SOURCE_TAG], r.dagster_run.tags[FINGERPRINT_TAG])
        for r in candidates
        if SOURCE_TAG in r.dagster_run.tags and FINGERPRINT_TAG in r.dagster_run.tags
    }
    keep = {}
    for source, fingerprint in sorted(pairs):
        newest = instance.get_run_records(
            dg.RunsFilter(
                tags={SOURCE_TAG: source, FINGERPRINT_TAG: fingerprint}, statuses=[dg.DagsterRunStatus.SUCCESS]
            ),
            limit=1,
        )
        if newest:
            keep[newest[0].dagster_run.run_id] = f"the newest index run of {source}'s input {fingerprint}"
    return keep


def _all_records(instance: dg.DagsterInstance, filters: dg.RunsFilter) -> Iterator[dg.RunRecord]:
    cursor = None
    while True:
        page = instance.get_run_records(filters, limit=_PAGE, cursor=cursor)
        yield from page
        if len(page) < _PAGE:
            return
        cursor = page[-1].dagster_run.run_id


def event_log_folder(instance: dg.DagsterInstance) -> Path | None:
    """The folder of the per-run event log files of a SQLite instance (None for any other storage)."""
    storage = instance.event_log_storage
    if not isinstance(storage, SqliteEventLogStorage):
        return None
    return Path(storage.path_for_shard("index")).parent


def _shard_files(folder: Path, run_id: str) -> list[Path]:
    base = folder / f"{run_id}.db"
    return [p for p in (base, Path(f"{base}-wal"), Path(f"{base}-shm")) if p.exists()]


def _plan_runs(
    settings: Settings, instance: dg.DagsterInstance, now: datetime, plan: RetentionPlan, found: _Paths
) -> None:
    cutoff = now - timedelta(days=settings.retention.run_days)
    candidates = list(_all_records(instance, dg.RunsFilter(statuses=list(FINISHED), updated_before=cutoff)))
    # update_timestamp is the last status change; the end time decides (a run whose record changed later is younger).
    candidates = [r for r in candidates if r.dagster_run.status in FINISHED and _ended(r) < cutoff.timestamp()]
    shards = event_log_folder(instance)
    # Only files inside the data folder are ever deleted: an instance elsewhere (DAGSTER_HOME) keeps its files,
    # emptied by delete_run.
    own_shards = shards if shards is not None and inside(plan.data_dir, shards) else None
    if candidates:
        keep: dict[str, str] = {}
        for reasons in (
            watermark_runs(instance, settings),
            index_runs(instance, candidates),
            newest_materialization_runs(instance),
        ):
            for run_id, reason in reasons.items():
                keep[run_id] = f"{keep[run_id]}; {reason}" if run_id in keep else reason
        for record in sorted(candidates, key=_ended):
            run = record.dagster_run
            age = _age_days(now, _ended(record))
            if run.run_id in keep:
                plan.kept_runs.append(KeptRun(run.run_id, run.job_name, age, keep[run.run_id]))
                continue
            files = _shard_files(own_shards, run.run_id) if own_shards is not None else []
            plan.runs.append(
                RunItem(
                    run_id=run.run_id,
                    job_name=run.job_name,
                    status=run.status.value,
                    ended_at=datetime.fromtimestamp(_ended(record), UTC),
                    age_days=age,
                    bytes=sum(tree_bytes(f) for f in files),
                    reason=f"{run.status.value.lower()} {_days(settings.retention.run_days)} ago or more",
                    shard=own_shards / f"{run.run_id}.db" if own_shards is not None else None,
                )
            )
    if own_shards is not None:
        _plan_orphan_shards(instance, own_shards, now, found)


def _plan_orphan_shards(instance: dg.DagsterInstance, folder: Path, now: datetime, found: _Paths) -> None:
    """Event log files of runs no longer in the run storage (deleted in the UI, or by hand)."""
    files = {p.stem: p for p in _children(folder) if p.suffix == ".db" and _RUN_ID.fullmatch(p.stem)}
    stale = (now - SHARD_GRACE).timestamp()
    for chunk in _chunks(sorted(files), _LOOKUP_CHUNK):
        existing = {r.dagster_run.run_id for r in instance.get_run_records(dg.RunsFilter(run_ids=list(chunk)))}
        for run_id in chunk:
            path = files[run_id]
            if run_id not in existing and path.lstat().st_mtime < stale:
                for file in _shard_files(folder, run_id):
                    found.add(EVENT_LOG_SHARDS, file, f"the event log of run {run_id}, which no longer exists")


# --- plan and apply ---------------------------------------------------------------------------------------------


def plan_retention(settings: Settings, instance: dg.DagsterInstance, now: datetime | None = None) -> RetentionPlan:
    """What retention would delete at ``now`` (default: this instant, UTC) under ``settings.retention``, each item
    with its reason, and the old runs it keeps with theirs. Reads the instance and the data folder, changes
    nothing."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    retention = settings.retention
    root = settings.data_dir.resolve()
    plan = RetentionPlan(now=now, data_dir=root, run_days=retention.run_days, report_days=retention.report_days)
    found = _Paths(root, now)
    if retention.run_days > 0:
        _plan_runs(settings, instance, now, plan, found)
    if retention.report_days > 0:
        _plan_reports(settings, found, now - timedelta(days=retention.report_days))
    _plan_parquet(settings, found, now)
    plan.paths = found.items
    plan.refused = found.refused
    return plan


def _delete_path(root: Path, path: Path) -> int:
    """Delete ``path`` (a file, a symlink or a folder, links inside it unfollowed) if it still lies inside ``root``;
    the bytes it held. Raises ``ValueError`` for a path that now resolves outside."""
    if not inside(root, path):
        raise ValueError(f"{path} resolves outside the data folder {root}")
    size = tree_bytes(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    return size


def apply_retention(plan: RetentionPlan, instance: dg.DagsterInstance) -> RetentionResult:
    """Delete what ``plan`` lists. A run that is gone or no longer finished since the plan is left (and named in
    ``skipped``), as is a path that is gone or now leads out of the data folder. Apply a plan soon after making it:
    runs deleted by someone else in between could make a listed run the newest of a partition again."""
    result = RetentionResult()
    done: list[tuple[str, int]] = []
    for item in plan.runs:
        record = instance.get_run_record_by_id(item.run_id)
        if record is None or record.dagster_run.status not in FINISHED:
            result.skipped.append(f"run {item.run_id}: {'gone' if record is None else 'no longer finished'}")
            continue
        folder = item.shard.parent if item.shard is not None else None
        # What the run's own event log file holds now (the plan's figure, unless the run wrote since).
        freed = sum(tree_bytes(f) for f in _shard_files(folder, item.run_id)) if folder is not None else 0
        instance.delete_run(item.run_id)
        if folder is not None:
            # delete_run empties the run's own SQLite file but leaves it (and its size) on disk; for a run that
            # never logged an event it even creates an empty one. Both go.
            for file in _shard_files(folder, item.run_id):
                try:
                    _delete_path(plan.data_dir, file)
                except ValueError as exc:
                    result.skipped.append(str(exc))
        result.runs_deleted += 1
        done.append((RUNS, freed))
    for path_item in plan.paths:
        if not path_item.path.exists() and not path_item.path.is_symlink():
            result.skipped.append(f"{path_item.path}: gone")
            continue
        try:
            done.append((path_item.kind, _delete_path(plan.data_dir, path_item.path)))
        except ValueError as exc:
            result.skipped.append(str(exc))
    result.kinds = _totals(done)
    result.bytes_reclaimed = sum(size for _kind, size in done)
    return result


def describe(totals: Mapping[str, KindTotal]) -> str:
    """``3 runs (1.2 MiB), 2 eval reports (40.0 KiB)``: the kinds with something in them."""
    parts = [f"{t.count} {kind.replace('_', ' ')} ({human_bytes(t.bytes)})" for kind, t in totals.items() if t.count]
    return ", ".join(parts) or "nothing"
