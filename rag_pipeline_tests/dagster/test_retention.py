"""Retention (``rag-pipeline prune``, the ``retention_schedule``) on a real Dagster instance: the runners' own SQLite
instance under the data folder, real runs with real materialization events, ages taken from the instant the plan
is made for (runs made before ``split`` are ``run_days`` old when the plan is made ``run_days`` after it).

What must hold: a dry run deletes nothing and lists exactly the old finished runs and old files; a real run
deletes them and reclaims the bytes it listed; the runs each sync watermark and each partition's newest
materialization come from are kept (no week turns "missing", no watermark moves); an unfinished run is never
deleted; 0 days keeps everything of that kind; nothing outside the data folder is touched."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from rag_pipeline.commands import prune
from rag_pipeline.commands.arguments import OneLineParser
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.defs.retention import RETENTION_SCHEDULE, build_retention_definitions
from rag_pipeline.pipeline.tags import FAILED_CONTAINERS_TAG, SOURCE_TAG
from rag_pipeline.runs.dagster_private import make_new_run_id
from rag_pipeline.runs.execution import runner_instance
from rag_pipeline.runs.instance import ensure_dagster_home
from rag_pipeline.runs.retention import (
    EVAL_REPORTS,
    RERANKER_FITS,
    RERANKER_MODELS,
    SUPERSEDED_PARQUET,
    TEMPORARY_FILES,
    apply_retention,
    event_log_folder,
    plan_retention,
)
from rag_pipeline.runs.sync_runs import source_states, sync_request
from rag_pipeline.scheduling.plan import RangeRequest
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.pipeline import settings_for

C1, C2 = "C0RETAIN01", "C0RETAIN02"
W1, W2 = "2024-03-04", "2024-03-11"  # two weeks (Mondays)
PLANNED = datetime(2024, 3, 12, 10, 0, 30, tzinfo=UTC)
WEEKS = weekly_partitions("2024-01-01")


# --- a small stand-in for a source's chain, materialized for real ------------------------------------------------


@dg.asset(
    name="slack_threads",  # the Slack spec's raw asset: the watermark reader reads its run config
    partitions_def=WEEKS,
    config_schema={"plan": dg.Field(dg.Permissive(), is_required=False)},
)
def raw_weeks(context) -> dg.MaterializeResult:  # no hint: Dagster refuses this module's string annotations
    return dg.MaterializeResult(metadata={"weeks": len(context.partition_keys)})


@dg.asset(name="toy_directory")
def toy_directory() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"accounts": 3})


@dg.asset(name="toy_checked", check_specs=[dg.AssetCheckSpec("rows", asset="toy_checked")])
def toy_checked() -> dg.MaterializeResult:
    return dg.MaterializeResult(check_results=[dg.AssetCheckResult(passed=True)])


@dg.asset(name="toy_broken")
def toy_broken() -> None:
    raise ValueError("this run fails on purpose")


@pytest.fixture
def data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    """Offline settings on ``tmp_path/data``; DAGSTER_HOME (which ensure_dagster_home exports) restored afterwards."""
    for name in list(os.environ):
        if name.startswith(("RAG_", "SLACK_", "JIRA_")):
            monkeypatch.delenv(name)
    # Recorded, then unset: the teardown restores whatever was there (ensure_dagster_home exports its own).
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused"))
    monkeypatch.delenv("DAGSTER_HOME")
    settings = settings_for(tmp_path / "data")
    settings.data_dir.mkdir(parents=True)
    ensure_dagster_home(settings)
    return settings


@pytest.fixture
def instance(data: Settings) -> Iterator[dg.DagsterInstance]:
    """The runners' instance of the data folder (SQLite, one event log file per run)."""
    with runner_instance() as opened:
        yield opened


def _sync(
    instance: dg.DagsterInstance,
    spec: SourceSpec,
    parts: dict[str, tuple[str, str, datetime]],
    planned_at: datetime,
    failed: dict[str, str] | None = None,
) -> str:
    """A sync run as the sensor requests it (its tags and plan from the real ``sync_request``), materialized."""
    requests = [
        RangeRequest(c, date.fromisoformat(a), date.fromisoformat(b), None, through, "tick", 1)
        for c, (a, b, through) in parts.items()
    ]
    tags, run_config = sync_request(spec, requests, planned_at)
    if failed:
        tags[FAILED_CONTAINERS_TAG] = json.dumps(failed)
    result = dg.materialize([raw_weeks], instance=instance, tags=tags, run_config=run_config)
    assert result.success
    return result.run_id


def _materialized(instance: dg.DagsterInstance) -> dict[str, Any]:
    """What the UI and the gap check read: the materialized partitions of each asset (from the event log, the
    path the UI takes whenever its status cache is rebuilt), and the run of each asset's newest materialization."""
    out: dict[str, Any] = {}
    for key in instance.get_asset_keys():
        latest = instance.get_latest_materialization_event(key)
        out[key.to_user_string()] = (
            sorted(instance.get_materialized_partitions(key)),
            latest.run_id if latest else None,
        )
    return out


def _states(instance: dg.DagsterInstance, spec: SourceSpec) -> dict[str, tuple[Any, ...]]:
    """Each container's state as the sync planner, ``status`` and the gap check read it."""
    states, _ = source_states(instance, spec, with_errors=True)
    return {
        s.container: (
            s.watermark,
            s.first_synced_day,
            s.last_success.run_id if s.last_success else None,
            s.last_failure.run_id if s.last_failure else None,
        )
        for s in states
    }


def _write(path: Path, text: str = "x" * 100, mtime: datetime | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


@dataclass
class Folder:
    """The data folder's files, by what retention must do with them."""

    deleted: dict[str, set[Path]]
    kept: list[Path]
    outside: Path


def _files(settings: Settings, now: datetime, outside: Path) -> Folder:
    """Reports, reranker versions and fits, parquet files of both layouts and temporary files, some old and some
    not, and symlinks that lead out of the data folder."""
    old, recent = now - timedelta(days=200), now - timedelta(hours=1)
    reports, parquet = settings.paths.reports, settings.paths.parquet
    history = reports / "history"
    s0, s1, s2, s3 = (_stamp(now - timedelta(days=d)) for d in (300, 200, 150, 1))
    for stamp, sets in ((s0, ["slack_ubuntu_dev"]), (s1, ["slack_ubuntu_dev", "jira_appcelerator_dev"])):
        for name in sets:
            _write(history / stamp / name / "report.md")
        _write(history / stamp / "latest_summary.json", "{}")
    _write(history / s2 / "slack_ubuntu_dev" / "report.md")  # slack's newest report: kept although old
    _write(history / s3 / "acl_bundled_dev" / "report.md")
    _write(history / s3 / "latest_summary.json", "{}")
    _write(outside / "precious.txt", "not retention's to delete")
    # A link inside a deleted report folder goes with it; its target stays.
    (history / s0 / "slack_ubuntu_dev" / "link").symlink_to(outside / "precious.txt")
    # An old fit cache entry that is a link out of the data folder: refused.
    (reports / "reranker_fits").mkdir(parents=True)
    (reports / "reranker_fits" / "0123456789abcdef01234567").symlink_to(outside, target_is_directory=True)
    os.utime(reports / "reranker_fits" / "0123456789abcdef01234567", (old.timestamp(),) * 2, follow_symlinks=False)

    _write(reports / "reranker" / "CURRENT", "lambdarank-current\n")
    _write(reports / "reranker" / "lambdarank-current" / "reranker.json", mtime=old)  # CURRENT: kept whatever its age
    _write(reports / "reranker" / "lambdarank-older" / "reranker.json", mtime=old)
    _write(reports / "reranker" / "lambdarank-newer" / "reranker.json", mtime=recent)
    _write(reports / "reranker_fits" / "aaaaaaaaaaaaaaaaaaaaaaaa" / "model-0.txt", mtime=old)
    _write(reports / "reranker_fits" / "bbbbbbbbbbbbbbbbbbbbbbbb" / "model-0.txt", mtime=recent)
    _write(reports / "reranker_fits" / "cccccccccccccccccccccccc.4242.tmp" / "model-0.txt", mtime=old)
    _write(reports / "latest" / "slack_ubuntu_dev" / "report.md", mtime=old)
    _write(reports / "latest_summary.json", "{}", mtime=old)

    _write(parquet / ".layout", "weekly\n", mtime=old)
    threads = parquet / "slack_threads"
    week_file = _write(threads / f"{W1}.parquet", mtime=old)
    lock = _write(threads / ".lock", "", mtime=old)
    old_cell = _write(threads / C1 / "2024-03-05.parquet", mtime=old)
    old_cell_day_first = _write(parquet / "jira_issues" / "2024-03-05" / "TIMOB.parquet", mtime=old)
    template = _write(threads / ".empty-0123456789abcdef.parquet", "", mtime=old)
    stale_temp = _write(threads / f".{W1}.deadbeef.tmp", mtime=old)
    fresh_temp = _write(threads / f".{W2}.cafecafe.tmp", mtime=recent)  # may be a write in progress
    config_temp = _write(settings.paths.dagster_home / ".dagster.yaml.k2j3.tmp", mtime=old)
    skipped_temp = _write(reports / "skipped" / ".index.jsonl.x8y9.tmp", mtime=old)
    skipped = _write(reports / "skipped" / "index.jsonl", mtime=old)
    for kept in (settings.paths.embedding_cache, settings.paths.directory, settings.paths.language):
        _write(kept, mtime=old)
    _write(settings.paths.qdrant / "segment" / "data.bin", mtime=old)
    _write(settings.paths.request_audit / "2024-01-01.jsonl", mtime=old)
    return Folder(
        deleted={
            EVAL_REPORTS: {history / s0, history / s1 / "slack_ubuntu_dev"},
            RERANKER_MODELS: {reports / "reranker" / "lambdarank-older"},
            RERANKER_FITS: {reports / "reranker_fits" / "aaaaaaaaaaaaaaaaaaaaaaaa"},
            SUPERSEDED_PARQUET: {old_cell, old_cell_day_first, template},
            TEMPORARY_FILES: {
                stale_temp,
                reports / "reranker_fits" / "cccccccccccccccccccccccc.4242.tmp",
                config_temp,
                skipped_temp,
            },
        },
        kept=[
            history / s1 / "jira_appcelerator_dev" / "report.md",  # jira's newest report
            history / s1 / "latest_summary.json",
            history / s2 / "slack_ubuntu_dev" / "report.md",
            history / s3 / "acl_bundled_dev" / "report.md",
            reports / "reranker" / "lambdarank-current" / "reranker.json",
            reports / "reranker" / "lambdarank-newer" / "reranker.json",
            reports / "reranker_fits" / "bbbbbbbbbbbbbbbbbbbbbbbb" / "model-0.txt",
            reports / "latest" / "slack_ubuntu_dev" / "report.md",
            reports / "latest_summary.json",
            week_file,
            lock,
            fresh_temp,
            skipped,
            settings.paths.dagster_home / "dagster.yaml",
            settings.paths.embedding_cache,
            settings.paths.directory,
            settings.paths.qdrant / "segment" / "data.bin",
            settings.paths.request_audit / "2024-01-01.jsonl",
        ],
        outside=outside,
    )


def _split() -> datetime:
    """An instant strictly between the runs made before it and those made after it."""
    time.sleep(0.05)
    split = datetime.now(UTC)
    time.sleep(0.05)
    return split


def test_dry_run_lists_exactly_the_old_runs_and_files_and_a_real_run_deletes_them_keeping_what_is_read(
    data: Settings, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    spec = source_specs(data)["slack"]
    instance.add_dynamic_partitions(spec.containers_name, [C1, C2])
    hour = timedelta(hours=1)
    # Old runs: the initial history (both weeks), three ticks of the current week, one failing for C2, a run that
    # fails outright, and a directory-like asset materialized twice.
    initial = _sync(instance, spec, {c: ("2024-03-04", "2024-03-12", PLANNED) for c in (C1, C2)}, PLANNED)
    tick1 = _sync(instance, spec, {c: ("2024-03-12", "2024-03-12", PLANNED + hour) for c in (C1, C2)}, PLANNED + hour)
    tick2 = _sync(
        instance, spec, {c: ("2024-03-12", "2024-03-12", PLANNED + 2 * hour) for c in (C1, C2)}, PLANNED + 2 * hour
    )
    c2_fails = _sync(
        instance,
        spec,
        {c: ("2024-03-12", "2024-03-12", PLANNED + 3 * hour) for c in (C1, C2)},
        PLANNED + 3 * hour,
        failed={C2: "not_in_channel"},
    )
    broken = dg.materialize([toy_broken], instance=instance, raise_on_error=False)
    assert not broken.success
    directory_before = dg.materialize([toy_directory], instance=instance).run_id
    directory_now = dg.materialize([toy_directory], instance=instance).run_id
    # Never finished: a run not started yet, one running, one being canceled.
    unfinished = []
    for status in (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING):
        run = dg.DagsterRun(
            job_name="__ASSET_JOB", run_id=make_new_run_id(), status=status, tags={SOURCE_TAG: "slack-api"}
        )
        instance.add_run(run)
        unfinished.append(run.run_id)
    split = _split()
    # A recent tick (C1 only): C1's watermark and the week's newest materialization move to it.
    recent = _sync(instance, spec, {C1: ("2024-03-12", "2024-03-12", PLANNED + 4 * hour)}, PLANNED + 4 * hour)

    now = split + timedelta(days=data.retention.run_days)
    folder = _files(data, now, tmp_path / "outside")
    shards = event_log_folder(instance)
    assert shards is not None and shards.is_relative_to(data.data_dir)
    materialized, states = _materialized(instance), _states(instance, spec)
    all_runs = {r.run_id for r in instance.get_runs()}
    assert len(all_runs) == 11

    plan = plan_retention(data, instance, now)

    # The dry run: exactly the superseded tick, the failed run and the superseded directory run ...
    doomed = {tick1, broken.run_id, directory_before}
    assert {r.run_id for r in plan.runs} == doomed
    assert all(r.bytes > 0 and r.age_days >= 30 for r in plan.runs)  # each has its event log file
    # ... while the old runs still read are kept, each with the reason.
    kept = {k.run_id: k.reason for k in plan.kept_runs}
    assert set(kept) == {initial, tick2, c2_fails, directory_now}
    assert "the first synced day of slack" in kept[initial] and "slack_threads (1 partition)" in kept[initial]
    assert f"the watermark of slack {C2}" in kept[tick2] and f"the last success of slack {C2}" in kept[tick2]
    assert kept[c2_fails] == f"the last failure of slack {C2}"
    assert "toy_directory" in kept[directory_now]
    assert not set(unfinished) & (set(kept) | doomed) and recent not in kept
    by_kind: dict[str, set[Path]] = {}
    for item in plan.paths:
        by_kind.setdefault(item.kind, set()).add(item.path)
    assert by_kind == folder.deleted
    assert plan.refused == [
        f"{data.paths.reports / 'reranker_fits' / '0123456789abcdef01234567'}: resolves outside the data folder "
        f"{data.data_dir.resolve()}"
    ]
    # Nothing was touched.
    assert {r.run_id for r in instance.get_runs()} == all_runs
    assert all(p.exists() for paths in folder.deleted.values() for p in paths)
    assert all((shards / f"{run_id}.db").exists() for run_id in doomed)

    result = apply_retention(plan, instance)

    assert result.runs_deleted == 3 and result.bytes_reclaimed == plan.bytes > 0 and not result.skipped
    assert {k: (t.count, t.bytes) for k, t in result.kinds.items()} == {
        k: (t.count, t.bytes) for k, t in plan.totals().items()
    }
    assert {r.run_id for r in instance.get_runs()} == all_runs - doomed
    # Each deleted run's event log file went with it; the kept runs' files stay.
    assert not any((shards / f"{run_id}.db").exists() for run_id in doomed)
    assert all((shards / f"{run_id}.db").exists() for run_id in kept)
    # No week turned missing, no asset's newest materialization moved, no watermark or state changed.
    assert _materialized(instance) == materialized
    assert materialized["slack_threads"][0] == [W1, W2]
    assert _states(instance, spec) == states
    assert states[C2][0] == PLANNED + 2 * hour and states[C1][0] == PLANNED + 4 * hour
    # Files: the listed ones are gone, everything else is there, and nothing outside was touched.
    assert not any(p.exists() or p.is_symlink() for paths in folder.deleted.values() for p in paths)
    assert all(p.exists() for p in folder.kept)
    assert (folder.outside / "precious.txt").read_text() == "not retention's to delete"
    assert (data.paths.reports / "reranker_fits" / "0123456789abcdef01234567").is_symlink()
    # Pruning again deletes nothing more.
    again = plan_retention(data, instance, now)
    assert again.empty and {k.run_id for k in again.kept_runs} == set(kept)


def test_dagster_forgets_a_week_whose_only_run_is_deleted_and_leaves_the_runs_event_log_file(
    data: Settings, instance: dg.DagsterInstance
) -> None:
    # Why retention keeps each partition's newest materialization, and removes a deleted run's file itself.
    spec = source_specs(data)["slack"]
    first = _sync(instance, spec, {C1: ("2024-03-04", "2024-03-12", PLANNED)}, PLANNED)
    _sync(
        instance, spec, {C1: ("2024-03-12", "2024-03-12", PLANNED + timedelta(hours=1))}, PLANNED + timedelta(hours=1)
    )
    key = dg.AssetKey("slack_threads")
    assert instance.get_materialized_partitions(key) == {W1, W2}
    plan = plan_retention(data, instance, datetime.now(UTC) + timedelta(days=365))
    assert first in {k.run_id for k in plan.kept_runs}  # the only materialization of W1

    shard = event_log_folder(instance)
    assert shard is not None
    cached = get_and_update_asset_status_cache_value(instance, key, WEEKS)  # the UI's partition status
    assert cached is not None and set(
        cached.deserialize_materialized_partition_subsets(WEEKS).get_partition_keys()
    ) == {
        W1,
        W2,
    }
    size = (shard / f"{first}.db").stat().st_size
    instance.delete_run(first)  # what retention would do without the rule
    assert instance.get_materialized_partitions(key) == {W2}  # W1 is "missing" for the gap check at once ...
    cached = get_and_update_asset_status_cache_value(instance, key, WEEKS)
    assert cached is not None and W1 in cached.deserialize_materialized_partition_subsets(WEEKS).get_partition_keys()
    instance.wipe_asset_cached_status([key])  # ... and for the UI once its cache is rebuilt
    cached = get_and_update_asset_status_cache_value(instance, key, WEEKS)
    assert cached is not None and set(
        cached.deserialize_materialized_partition_subsets(WEEKS).get_partition_keys()
    ) == {W2}
    assert (shard / f"{first}.db").stat().st_size == size  # the run's own file: emptied, not removed or shrunk

    # An asset check's evaluation is not deleted with its run: the check's history names a run that is gone.
    checked = dg.materialize([toy_checked], instance=instance).run_id
    instance.delete_run(checked)
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("toy_checked"), "rows"), limit=5
    )
    assert [r.run_id for r in history] == [checked] and instance.get_run_by_id(checked) is None


def test_the_newest_index_run_of_an_input_file_is_kept_after_a_sync_superseded_its_weeks(
    data: Settings, instance: dg.DagsterInstance
) -> None:
    # `index` skips an unchanged file because a successful run of it exists: that run stays although a later sync
    # holds every week it wrote; the earlier index run of the same file goes.
    from rag_pipeline.runs.backfill import FINGERPRINT_TAG

    spec = source_specs(data)["slack"]
    tags = {SOURCE_TAG: "slack", FINGERPRINT_TAG: "b3252450fdaea88d"}
    earlier, newest = (
        dg.materialize([raw_weeks], instance=instance, partition_key=W2, tags=tags).run_id for _ in range(2)
    )
    sync = _sync(instance, spec, {C1: ("2024-03-12", "2024-03-12", PLANNED)}, PLANNED)
    plan = plan_retention(data, instance, datetime.now(UTC) + timedelta(days=365))
    kept = {k.run_id: k.reason for k in plan.kept_runs}
    assert [r.run_id for r in plan.runs] == [earlier]
    assert kept[newest] == "the newest index run of slack's input b3252450fdaea88d" and sync in kept


def test_zero_days_keeps_every_run_and_report_and_an_unfinished_run_is_never_deleted(
    data: Settings, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    for _ in range(3):
        dg.materialize([toy_directory], instance=instance)
    stuck = dg.DagsterRun(job_name="__ASSET_JOB", run_id=make_new_run_id(), status=dg.DagsterRunStatus.STARTED)
    instance.add_run(stuck)
    later = datetime.now(UTC) + timedelta(days=3650)
    folder = _files(data, later, tmp_path / "outside")

    keep_all = data.model_copy(
        update={"retention": data.retention.model_copy(update={"run_days": 0, "report_days": 0})}
    )
    plan = plan_retention(keep_all, instance, later)
    assert plan.runs == [] and plan.kept_runs == []
    # Reports, reranker versions and fits stay; superseded and temporary files go whatever the days.
    assert {p.kind for p in plan.paths} == {SUPERSEDED_PARQUET, TEMPORARY_FILES}

    one_day = data.model_copy(update={"retention": data.retention.model_copy(update={"run_days": 1})})
    plan = plan_retention(one_day, instance, later)
    assert len(plan.runs) == 2 and stuck.run_id not in {r.run_id for r in plan.runs}
    assert stuck.run_id not in {k.run_id for k in plan.kept_runs}
    apply_retention(plan, instance)
    assert instance.get_run_by_id(stuck.run_id) is not None
    assert len(instance.get_runs()) == 2
    assert {p for p in folder.deleted[EVAL_REPORTS]} and not any(p.exists() for p in folder.deleted[EVAL_REPORTS])


def test_a_data_folder_behind_a_symlink_is_pruned_inside_only(
    data: Settings, instance: dg.DagsterInstance, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # reports/ itself is a link to another disk: its files resolve outside the data folder and are all refused.
    elsewhere = tmp_path / "other_disk"
    old = datetime.now(UTC) - timedelta(days=400)
    _write(elsewhere / "history" / _stamp(old) / "slack_ubuntu_dev" / "report.md")
    _write(elsewhere / "history" / _stamp(old - timedelta(days=1)) / "slack_ubuntu_dev" / "report.md")
    _write(elsewhere / "reranker_fits" / "dddddddddddddddddddddddd" / "model-0.txt", mtime=old)
    data.paths.reports.symlink_to(elsewhere, target_is_directory=True)
    plan = plan_retention(data, instance)
    assert plan.paths == [] and len(plan.refused) == 2
    apply_retention(plan, instance)
    assert len(list((elsewhere / "history").iterdir())) == 2
    assert (elsewhere / "reranker_fits" / "dddddddddddddddddddddddd" / "model-0.txt").exists()
    # The command says what it left alone on stderr, in --json too (and lists it in the JSON).
    code, text = _prune_command(["--dry-run", "--json", "--data-dir", str(data.data_dir)], data)
    assert code == 0 and len(json.loads(text)["plan"]["refused"]) == 2
    assert capsys.readouterr().err.count("refused (left alone): ") == 2


def test_a_folder_not_yet_upgraded_keeps_its_old_layout_files(data: Settings, instance: dg.DagsterInstance) -> None:
    # Without the weekly marker the (day x container) files are the upgrade's input: never superseded.
    old = datetime.now(UTC) - timedelta(days=400)
    cell = _write(data.paths.parquet / "slack_threads" / C1 / "2024-03-05.parquet", mtime=old)
    template = _write(data.paths.parquet / "slack_threads" / ".empty-0123456789abcdef.parquet", mtime=old)
    plan = plan_retention(data, instance)
    assert plan.empty
    apply_retention(plan, instance)
    assert cell.exists() and template.exists()


def test_real_sync_runs_pruned_keep_every_watermark_week_and_document(
    data: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real Slack chain through four scheduled sync runs against the API emulator (~15 s).
    from rag_pipeline.defs.chain.resources import qdrant_resource
    from rag_pipeline.index.store import SearchFilter
    from rag_pipeline_tests.kit import slack_fixtures as F
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
    from rag_pipeline_tests.kit.sync_harness import SyncHarness

    def at(text: str) -> datetime:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)

    with SlackEmulator(F.crafted_workspace()) as emu:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test-token")
        monkeypatch.setenv("SLACK_API_BASE_URL", emu.base_url)
        settings = settings_for(data.data_dir)
        with runner_instance() as instance:
            h = SyncHarness(settings, "slack", instance, now=at("2024-03-12 10:00:30"))
            runs = []
            for hour in ("10", "11", "12"):  # the initial history, then two hourly ticks
                h.now = at(f"2024-03-12 {hour}:00:30")
                results = h.tick()
                assert len(results) == 1 and results[0].success
                runs.append(results[0].run_id)
            split = _split()
            h.now = at("2024-03-12 13:00:30")
            assert [r.success for r in h.tick()] == [True]
            keys = [dg.AssetKey(k) for k in h.spec.keys.all]
            weeks = {k: instance.get_materialized_partitions(k) for k in keys}
            assert len(weeks[keys[0]]) == 14  # 90 days of history: 14 weeks
            states = _states(instance, h.spec)

            def indexed() -> set[str]:
                with qdrant_resource(settings).open() as store:
                    return set(store.indexed_documents(SearchFilter(sources=("slack",))))

            documents = indexed()
            plan = plan_retention(settings, instance, split + timedelta(days=settings.retention.run_days))
            # The two ticks are superseded by the newest one; the initial history holds 13 weeks and the first days.
            assert {r.run_id for r in plan.runs} == set(runs[1:])
            assert {k.run_id for k in plan.kept_runs} == {runs[0]}
            result = apply_retention(plan, instance)
            assert result.runs_deleted == 2 and result.bytes_reclaimed == plan.bytes > 0
            assert {k: instance.get_materialized_partitions(k) for k in keys} == weeks
            assert _states(instance, h.spec) == states
            assert indexed() == documents
            assert h.plan() == []  # still up to date: the sensor plans from the same watermarks


def _prune_command(argv: list[str], settings: Settings) -> tuple[int, str]:
    """``rag-pipeline prune`` through its own parser and ``run`` (what cli.main dispatches to)."""
    parser = OneLineParser(prog="rag-pipeline")
    prune.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["prune", *argv])
    out = io.StringIO()
    with redirect_stdout(out):
        code = args.func(args, settings.with_data_dir(args.data_dir))
    return code, out.getvalue()


def test_prune_command_dry_run_then_real_run(data: Settings, instance: dg.DagsterInstance, tmp_path: Path) -> None:
    dg.materialize([toy_directory], instance=instance)
    old = datetime.now(UTC) - timedelta(days=400)
    stale = _write(data.paths.parquet / "slack_threads" / ".2024-03-04.0123.tmp", "y" * 2048, mtime=old)
    report = _write(data.paths.reports / "history" / _stamp(old) / "slack_ubuntu_dev" / "report.md", "z" * 1000)
    _write(data.paths.reports / "history" / _stamp(old + timedelta(days=1)) / "slack_ubuntu_dev" / "report.md")

    code, text = _prune_command(["--dry-run", "--json", "--data-dir", str(data.data_dir)], data)
    printed = json.loads(text)
    assert code == 0 and printed["dry_run"] is True and "result" not in printed
    assert printed["plan"]["kinds"]["temporary_files"] == {"count": 1, "bytes": 2048}
    assert printed["plan"]["kinds"]["eval_reports"] == {"count": 1, "bytes": 1000}
    assert printed["plan"]["kinds"]["runs"] == {"count": 0, "bytes": 0}  # the run is minutes old
    assert stale.exists() and report.exists()

    code, text = _prune_command(["--report-days", "0", "--data-dir", str(data.data_dir)], data)
    assert code == 0 and not stale.exists() and report.exists()  # --report-days 0 keeps the reports
    assert "temporary_files: deleted 1 (2.0 KiB)" in text and "reclaimed 2.0 KiB, 0 run(s) deleted" in text

    code, text = _prune_command(["--run-days", "0", "--data-dir", str(data.data_dir)], data)
    assert code == 0 and not report.exists() and "eval_reports: deleted 1 (1000 B)" in text
    assert "runs kept forever" in text
    assert len(instance.get_runs()) == 1

    with pytest.raises(SystemExit) as stop:
        _prune_command(["--run-days", "-1"], data)
    assert stop.value.code == 2


def test_cli_prune_dry_run_json(
    data: Settings, instance: dg.DagsterInstance, capsys: pytest.CaptureFixture[str]
) -> None:
    # In-process through the real entry point (cli.py registers the command).
    from rag_pipeline.cli import main

    old = datetime.now(UTC) - timedelta(days=400)
    stale = _write(data.paths.parquet / "slack_threads" / ".2024-03-04.0123.tmp", "y" * 10, mtime=old)
    assert main(["prune", "--dry-run", "--json", "--data-dir", str(data.data_dir)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["dry_run"] is True and [p["path"] for p in printed["plan"]["paths"]] == [str(stale)]
    assert stale.exists()


def test_retention_schedule_and_job(data: Settings, instance: dg.DagsterInstance) -> None:
    jobs, schedules = build_retention_definitions(data)
    assert [s.name for s in schedules] == [RETENTION_SCHEDULE]
    schedule = schedules[0]
    assert schedule.cron_schedule == "30 3 * * *" and schedule.execution_timezone == "UTC"
    # Offline (no live source syncs on its own) the code location runs nothing by itself: defined stopped.
    assert not data.synced_sources and schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    live = Settings.from_env({"RAG_DATA_DIR": str(data.data_dir), "SLACK_BOT_TOKEN": "xoxb-test"})
    assert live.synced_sources == ("slack",)
    assert build_retention_definitions(live)[1][0].default_status == dg.DefaultScheduleStatus.RUNNING
    off = data.model_copy(update={"retention": data.retention.model_copy(update={"enabled": False})})
    assert build_retention_definitions(off)[1] == []

    old = datetime.now(UTC) - timedelta(days=400)
    stale = _write(data.paths.parquet / "slack_threads" / ".2024-03-04.0123.tmp", "y" * 300, mtime=old)
    result = jobs[0].execute_in_process(instance=instance)
    assert result.success and not stale.exists()
    (materialization,) = [
        e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT
    ]  # the op's output carries the summary
    metadata = materialization.step_output_data.metadata
    assert metadata["bytes_reclaimed"].value == 300 and metadata["runs_deleted"].value == 0
    # Its own run was in progress while it pruned: it is there, finished.
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
