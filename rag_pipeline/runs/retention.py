"""Retention: what a data folder and its Dagster instance may lose after a while, and what they must keep.

:func:`plan_retention` lists what would be deleted (nothing is touched); :func:`apply_retention` deletes what a
plan lists. ``rag-pipeline prune`` and the daily ``retention_schedule`` (``defs/retention.py``) both call them.

This module orchestrates; what may go is asked of the owners. Each kind of file is a
:class:`~rag_pipeline.pipeline.retained.RetainedArtifact` beside the code that writes it (:data:`ARTIFACTS`: the
report store, the learned reranker, the parquet upgrade and writer, the skipped-records report, the instance
config), and which old runs must stay is asked of the sync runs, the index runs and the asset catalog
(:func:`run_keepers`). Here: listing the finished runs, the event log files of the runners' SQLite instance, the
check that every path lies inside the data folder, and the deletion.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.evaluation.report_store import ReportHistory
from rag_pipeline.pipeline.parquet import ParquetWrites
from rag_pipeline.pipeline.retained import RetainedArtifact, RetentionScope, children, days, human_bytes, newest_mtime
from rag_pipeline.retrieval.rerank.learned import RerankerFits, RerankerFitSaves, RerankerVersions
from rag_pipeline.runs.backfill import index_runs
from rag_pipeline.runs.code_location import source_specs
from rag_pipeline.runs.dagster_private import SqliteEventLogStorage
from rag_pipeline.runs.instance import INSTANCE_CONFIG_WRITES
from rag_pipeline.runs.migration import SupersededParquet
from rag_pipeline.runs.skipped import SKIPPED_REPORT_WRITES
from rag_pipeline.runs.sync_runs import FINISHED, all_run_records, watermark_runs
from rag_pipeline.settings import Settings

# The data folder's files, each kind asked of the module that writes it, in the order the plan lists them. A new
# artifact is one more line here (and its RetainedArtifact beside its writer).
ARTIFACTS: tuple[RetainedArtifact, ...] = (
    ReportHistory(),
    RerankerVersions(),
    RerankerFits(),
    SupersededParquet(),
    ParquetWrites(),
    RerankerFitSaves(),
    SKIPPED_REPORT_WRITES,
    INSTANCE_CONFIG_WRITES,
)

# A question retention asks of the owner of some runs: run id -> why it is kept, among the finished runs old enough
# to go (``candidates``).
RunKeeper = Callable[[dg.DagsterInstance, Sequence[dg.RunRecord]], Mapping[str, str]]

# What a plan deletes, in the order it is reported: the instance's runs and their files, then the artifacts' kinds.
RUNS = "runs"
EVENT_LOG_SHARDS = "event_log_shards"
KIND_LABELS = {
    RUNS: "finished Dagster runs and their event logs",
    EVENT_LOG_SHARDS: "event log files of runs already deleted",
    **{artifact.kind: artifact.label for artifact in ARTIFACTS},
}
KINDS = tuple(KIND_LABELS)
EVAL_REPORTS = ReportHistory.kind
RERANKER_MODELS = RerankerVersions.kind
RERANKER_FITS = RerankerFits.kind
SUPERSEDED_PARQUET = SupersededParquet.kind
TEMPORARY_FILES = ParquetWrites.kind

# An event log file without a run younger than this may belong to a run being created (a run is stored before its
# first event, so this is belt and braces).
SHARD_GRACE = timedelta(days=1)
_RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Storage ids looked up at a time when mapping each partition's newest materialization to its run.
_LOOKUP_CHUNK = 500


class _Item:
    """A plan's line as ``--json`` prints it: its fields, paths as text, instants to the second, ages to a tenth of a
    day (a field marked ``json=False`` is left out)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, spec.name)
            if not spec.metadata.get("json", True):
                continue
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, datetime):
                value = value.isoformat(timespec="seconds")
            elif spec.name == "age_days":
                value = round(value, 1)
            out[spec.name] = value
        return out


@dataclass(frozen=True)
class RunItem(_Item):
    """A finished run the plan deletes, with its event log file's bytes (0 where the instance keeps no file)."""

    run_id: str
    job_name: str
    status: str
    ended_at: datetime
    age_days: float
    bytes: int
    reason: str
    # Its event log file inside the data folder, removed with it.
    shard: Path | None = field(default=None, metadata={"json": False})


@dataclass(frozen=True)
class PathItem(_Item):
    """A file or folder the plan deletes."""

    kind: str
    path: Path
    bytes: int
    age_days: float
    reason: str


@dataclass(frozen=True)
class KeptRun(_Item):
    """A finished run old enough to go that the plan keeps, and why."""

    run_id: str
    job_name: str
    age_days: float
    reason: str


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
        age = _age_days(self.now, mtime if mtime is not None else newest_mtime(path))
        self.items.append(PathItem(kind, path, tree_bytes(path), age, reason))


# --- runs -------------------------------------------------------------------------------------------------------


def _ended(record: dg.RunRecord) -> float:
    if record.end_time:
        return float(record.end_time)
    return record.update_timestamp.replace(tzinfo=record.update_timestamp.tzinfo or UTC).timestamp()


def _chunks(values: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def run_keepers(settings: Settings) -> tuple[RunKeeper, ...]:
    """Who is asked which old runs to keep: the sync runs (each container's watermark), the index runs (each input
    file's newest) and the asset catalog (each partition's newest materialization)."""
    specs = list(source_specs(settings).values())
    return (partial(watermark_runs, specs=specs), index_runs, newest_materialization_runs)


def newest_materialization_runs(
    instance: dg.DagsterInstance, candidates: Sequence[dg.RunRecord] = ()
) -> dict[str, str]:
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
    candidates = list(all_run_records(instance, dg.RunsFilter(statuses=list(FINISHED), updated_before=cutoff)))
    # update_timestamp is the last status change; the end time decides (a run whose record changed later is younger).
    candidates = [r for r in candidates if r.dagster_run.status in FINISHED and _ended(r) < cutoff.timestamp()]
    shards = event_log_folder(instance)
    # Only files inside the data folder are ever deleted: an instance elsewhere (DAGSTER_HOME) keeps its files,
    # emptied by delete_run.
    own_shards = shards if shards is not None and inside(plan.data_dir, shards) else None
    if candidates:
        keep: dict[str, str] = {}
        for keeper in run_keepers(settings):
            for run_id, reason in keeper(instance, candidates).items():
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
                    reason=f"{run.status.value.lower()} {days(settings.retention.run_days)} ago or more",
                    shard=own_shards / f"{run.run_id}.db" if own_shards is not None else None,
                )
            )
    if own_shards is not None:
        _plan_orphan_shards(instance, own_shards, now, found)


def _plan_orphan_shards(instance: dg.DagsterInstance, folder: Path, now: datetime, found: _Paths) -> None:
    """Event log files of runs no longer in the run storage (deleted in the UI, or by hand)."""
    files = {p.stem: p for p in children(folder) if p.suffix == ".db" and _RUN_ID.fullmatch(p.stem)}
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
    scope = RetentionScope(settings, now)
    for artifact in ARTIFACTS:
        for expired in artifact.expired(scope):
            found.add(artifact.kind, expired.path, expired.reason, expired.mtime)
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
