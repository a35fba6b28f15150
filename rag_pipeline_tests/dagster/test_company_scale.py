"""Company scale: partitions that grow with time only, one sync run per source and tick whatever the number of
channels, runs that rewrite only the cells they cover (re-sync of one channel, a failing channel), and the upgrade
of a data folder built by the previous version (day x container partitions) in place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from datetime import UTC, date, datetime, timedelta
from io import BytesIO
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.instance.ref import InstanceRef

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.chain.frames import CoveredFrames
from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.defs.sync.sensor import build_lag_check, build_sync_sensor, missing_weeks
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.pipeline.tags import FAILED_CONTAINERS_TAG, SOURCE_TAG
from rag_pipeline.runs.dagster_private import make_new_run_id
from rag_pipeline.runs.sync_runs import source_states
from rag_pipeline.scheduling.coverage import Coverage, weeks_between
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.data import TEAM
from rag_pipeline_tests.kit.paths import REPO_ROOT
from rag_pipeline_tests.kit.pipeline import chain, resources, settings_for
from rag_pipeline_tests.kit.sync_harness import plan_of

NOW = datetime(2026, 3, 11, 10, 0, 30, tzinfo=UTC)
# The last commit with (day x container) partitions: the version a data folder is upgraded from.
PREVIOUS_VERSION = "b68f1af"


def test_partitions_grow_with_weeks_only() -> None:
    # Five years of history is 262 partitions per asset, whatever the number of channels or projects.
    partitions = weekly_partitions("2021-01-01")
    keys = partitions.get_partition_keys(current_time=datetime(2026, 1, 1, tzinfo=UTC))
    assert len(keys) == 262 and keys[0] == "2020-12-28" and keys[-1] == "2025-12-29"
    assert all(date.fromisoformat(k).weekday() == 0 for k in keys)  # every key is a Monday
    assert week_key("2026-01-04") == "2025-12-29" and week_key("2026-01-05") == "2026-01-05"
    assert missing_weeks({"2024-01-01", "2024-01-15"}, "2024-01-01", "2024-01-15") == ["2024-01-08"]


def _live_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_API_BASE_URL", "http://127.0.0.1:9/api/")  # never called: only planning here
    monkeypatch.delenv("JIRA_URL", raising=False)
    monkeypatch.setenv("SLACK_REQUESTS_PER_MINUTE", "100000")  # every channel fits one tick's request budget
    return settings_for(tmp_path / "data")


def _tick(sensor: dg.SensorDefinition, instance: dg.DagsterInstance, defs: dg.Definitions) -> list[dg.RunRequest]:
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        data = sensor.evaluate_tick(context)
    return list(data.run_requests or [])


def _record_success(instance: dg.DagsterInstance, request: dg.RunRequest, failed: dict[str, str] | None = None) -> None:
    """The run the daemon would launch for ``request``, recorded as finished (the planner reads only the run)."""
    tags = dict(request.tags)
    if failed:
        tags[FAILED_CONTAINERS_TAG] = json.dumps(failed)
    instance.add_run(
        dg.DagsterRun(
            job_name="__ASSET_JOB",
            run_id=make_new_run_id(),
            run_config=request.run_config,
            tags=tags,
            status=dg.DagsterRunStatus.SUCCESS,
        )
    )


def test_one_tick_requests_one_run_for_200_channels_and_a_failing_one_waits_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = _live_settings(monkeypatch, tmp_path)
    spec = source_specs(settings)["slack"]
    clock = {"now": NOW}
    cron = settings.automation.sync("slack").cron
    sensor = build_sync_sensor(spec, cron, sync_policy(settings, "slack"), clock=lambda: clock["now"])
    defs = build_definitions(settings)
    channels = [f"C{n:08d}" for n in range(200)]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(spec.containers_name, channels)
        first = _tick(sensor, instance, defs)
        # One run covers every channel's initial history, each with its own days and watermark to make good.
        assert len(first) == 1 and first[0].tags[SOURCE_TAG] == "slack-api"
        plan = plan_of(first[0])
        assert sorted(plan) == channels and {p["reason"] for p in plan.values()} == {"initial history"}
        assert first[0].tags["rag/containers"] == "200"
        _record_success(instance, first[0])
        assert _tick(sensor, instance, defs) == []  # up to date until the next cron tick

        # The next tick: still one run; one channel fails inside it, the others move on.
        clock["now"] = NOW + timedelta(hours=1)
        second = _tick(sensor, instance, defs)
        assert len(second) == 1 and len(plan_of(second[0])) == 200
        assert {p["reason"] for p in plan_of(second[0]).values()} == {"tick"}
        _record_success(instance, second[0], failed={channels[7]: "not_in_channel"})
        states = {s.container: s for s in source_states(instance, spec)[0]}
        assert states[channels[0]].watermark == NOW + timedelta(hours=1)
        assert states[channels[7]].watermark == NOW and states[channels[7]].last_failure is not None
        # The failed channel waits for the next tick (no hammering); the others are up to date.
        clock["now"] = NOW + timedelta(hours=1, minutes=5)
        assert _tick(sensor, instance, defs) == []
        # Per-container freshness: within two cron intervals plus the settle window everyone passes; an hour
        # later the channel that failed (watermark NOW) is named, the others are not.
        lag = build_lag_check(spec, cron, sync_policy(settings, "slack"), clock=lambda: clock["now"])
        assert lag(dg.build_asset_check_context(instance=instance)).passed
        clock["now"] = NOW + timedelta(hours=4, minutes=1)
        late = lag(dg.build_asset_check_context(instance=instance))
        assert not late.passed and late.metadata["behind"].value == 1
        assert list(late.metadata["behind_list"].value) == [channels[7]]
        clock["now"] = NOW + timedelta(hours=1, minutes=5)
        clock["now"] = NOW + timedelta(hours=2)
        third = plan_of(_tick(sensor, instance, defs)[0])
        # It is read again from its own (older) watermark's day, the others from theirs.
        assert third[channels[7]]["sync_from"] == NOW.isoformat(timespec="seconds")
        assert third[channels[0]]["sync_from"] == (NOW + timedelta(hours=1)).isoformat(timespec="seconds")


def test_a_partial_run_replaces_only_its_cells_of_a_week(tmp_path: Path) -> None:
    io = PartitionedParquetIOManager(base_dir=str(tmp_path))
    week = "2024-02-26"
    rows = lambda cells: pd.DataFrame(  # noqa: E731
        {"document_id": [f"{c}-{d}-{v}" for c, d, v in cells], "_day": [d for _, d, _ in cells],
         "_container": [c for c, _, _ in cells]}
    )  # fmt: skip
    out = dg.build_output_context(
        asset_key="slack_threads", partition_key=week, asset_partitions_def=weekly_partitions("2024-01-01")
    )  # fmt: skip
    io.handle_output(out, {week: rows([("C1", "2024-02-26", 1), ("C1", "2024-03-01", 1), ("C2", "2024-03-01", 1)])})
    # A re-sync of C1 over 03-01 only: C1's 02-26 row and C2's row stay, C1's 03-01 row is replaced.
    coverage = Coverage({"C1": ("2024-03-01", "2024-03-01")})
    io.handle_output(out, CoveredFrames({week: rows([("C1", "2024-03-01", 2)])}, coverage))
    stored = pd.read_parquet(tmp_path / "slack_threads" / f"{week}.parquet")
    assert sorted(stored["document_id"]) == ["C1-2024-02-26-1", "C1-2024-03-01-2", "C2-2024-03-01-1"]
    # A covered cell that is now empty loses its rows; a week left with no row has no file.
    io.handle_output(out, CoveredFrames({week: rows([])}, Coverage({"C1": ("2024-02-26", "2024-03-03")})))
    assert sorted(pd.read_parquet(tmp_path / "slack_threads" / f"{week}.parquet")["document_id"]) == ["C2-2024-03-01-1"]
    io.handle_output(out, {week: rows([])})
    assert not (tmp_path / "slack_threads" / f"{week}.parquet").exists()


def test_resyncing_one_channel_reads_and_rewrites_only_it(
    tmp_path: Path, slack_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    data = tmp_path / "data"
    res = resources(data)
    from rag_pipeline.defs.slack.resources import SlackExportResource

    res["slack_export"] = res["slack_source"] = SlackExportResource(path=str(slack_export), team_id=TEAM)
    week = week_key("2024-03-01")
    with dg.instance_for_test() as instance:
        containers = sorted(
            {d.container for d in SlackExportResource(path=str(slack_export), team_id=TEAM).read().documents}
        )
        assert len(containers) >= 2
        instance.add_dynamic_partitions("slack_channels", containers)
        whole = dg.materialize(chain("slack"), instance=instance, resources=res, partition_key=week)
        stored = pd.read_parquet(data / "parquet" / "slack_child_chunks" / f"{week}.parquet")
        before = {c: sorted(g["chunk_id"]) for c, g in stored.groupby("_container")}
        assert set(before) == set(containers)
        one = containers[-1]
        resync = dg.materialize(
            chain("slack"),
            instance=instance,
            resources=res,
            partition_key=week,
            run_config={"ops": {"slack_threads": {"config": {"containers": [one]}}}},
        )
        raw = resync.asset_materializations_for_node("slack_threads")[0].metadata
        assert raw["containers_covered"].value == 1 and raw["containers"].value == [one]
        chunks = resync.asset_materializations_for_node("slack_child_chunks")[0].metadata
        # Only the re-synced channel's documents went through the chain again.
        assert 0 < chunks["child_chunks"].value < sum(len(v) for v in before.values())
        after = pd.read_parquet(data / "parquet" / "slack_child_chunks" / f"{week}.parquet")
        assert {c: sorted(g["chunk_id"]) for c, g in after.groupby("_container")} == before
        assert whole.success and resync.success


def _previous_version(tmp_path: Path) -> Path:
    """The package as it was at PREVIOUS_VERSION, unpacked from the repository's history."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", PREVIOUS_VERSION, "rag_pipeline"],
        check=True,
        capture_output=True,
    ).stdout
    target = tmp_path / "previous"
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


@pytest.mark.slow  # two small indexes, one by each version (~1 min)
def test_a_folder_built_by_the_previous_version_upgrades_in_place(
    tmp_path: Path, slack_export: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_pipeline.cli import main

    previous = _previous_version(tmp_path)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "SLACK_", "JIRA_", "DAGSTER_"))}
    env.update(RAG_SLACK_EXPORT=str(slack_export), SLACK_TEAM_ID=TEAM, PYTHONPATH=str(previous))
    old = subprocess.run(
        [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
         "index", "--source", "slack", "--data-dir", str(data), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert old.returncode == 0, old.stderr[-3000:]
    built = json.loads(old.stdout)
    assert built["embeddings_computed"] > 0
    # The previous layout: one file per (day, channel).
    assert list((data / "parquet" / "slack_threads").glob("*/*.parquet"))
    queries = ("deploy", "postgres upgrade", "lunch")

    def results(version: Path | None) -> list[list[tuple[str, float]]]:
        """Each query's document ids and scores as that version's `search` gives them."""
        found = []
        for query in queries:
            argv = ["search", query, "--all-documents", "--json", "--data-dir", str(data)]
            done = subprocess.run(
                [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
                 *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                env={**env, "PYTHONPATH": str(version)} if version else {**env, "PYTHONPATH": str(REPO_ROOT)},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-2000:]
            found.append([(r["document_id"], round(r["score"], 5)) for r in json.loads(done.stdout)["results"]])
        return found

    # This version reads the folder as it is before upgrading it; the previous one found the same documents.
    before = results(None)
    assert [{d for d, _ in found} for found in results(previous)] == [{d for d, _ in found} for found in before]
    # `status` says which layout the folder holds and that a migration is pending.
    assert main(["status", "--json", "--data-dir", str(data)]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert (
        layout["version"] == 1 and layout["known_from"] == "files" and [m["target"] for m in layout["pending"]] == [2]
    )

    monkeypatch.setenv("RAG_SLACK_EXPORT", str(slack_export))
    monkeypatch.setenv("SLACK_TEAM_ID", TEAM)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    from rag_pipeline.runs.backfill import run_backfill

    summary = run_backfill(settings_for(data), sources=("slack",)).as_dict()
    # Upgraded in place: weekly files with each row's day and channel, nothing re-embedded, nothing lost.
    assert summary["migration"]["files_converted"] > 0 and summary["migration"]["week_files_written"] > 0
    assert summary["embeddings_computed"] == 0 and summary["documents"] == built["documents"]
    assert summary["points"] == built["points"]
    threads = data / "parquet" / "slack_threads"
    assert not list(threads.glob("*/*.parquet")) and list(threads.glob("*.parquet"))
    assert set(pd.concat(pd.read_parquet(p) for p in threads.glob("*.parquet"))["_container"]) >= {"C0PUB"}
    # Searches answer exactly as before the upgrade, and the folder records its layout and what the upgrade did.
    assert results(None) == before
    assert main(["status", "--json", "--data-dir", str(data)]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["version"] == 2 and layout["known_from"] == "record" and layout["pending"] == []
    (step,) = layout["history"]
    assert (step["from"], step["to"]) == (1, 2) and step["report"]["files_converted"] == summary["migration"][
        "files_converted"
    ]
    # Every week of the history is materialized (by the upgrade's record or the new run).
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(summary["dagster_home"])) as instance:
        materialized = instance.get_materialized_partitions(dg.AssetKey("slack_qdrant_points"))
    assert set(weeks_between(date(2024, 3, 1), datetime.now(UTC).date())) <= materialized
