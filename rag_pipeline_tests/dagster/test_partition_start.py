"""The partitions start where the data does (issue 68, item 4): after a first index the code location's partitions
begin at each source's first data week, so the UI's partition status (the asset status cache it reads) shows no
Missing week; older data arriving moves the start earlier and keeps every materialization already there."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.pipeline.keys import ChainKeys, week_key
from rag_pipeline.pipeline.partition_start import PARTITION_START_RECORD
from rag_pipeline.runs.backfill import run_backfill
from rag_pipeline.scheduling.coverage import weeks_between
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.pipeline import settings_for

SITE = "jira.appcelerator.org"
ISSUES = [
    jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="Build fails on Windows"),
    jira_issue("2", "AC-2", "2024-03-04T10:00:00.000+0000", description="Crash when opening a window"),
]
OLDER = jira_issue("3", "AC-3", "2023-06-07T10:00:00.000+0000", description="Installer hangs on macOS")


@pytest.fixture
def jira_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAG_JIRA_DUMP", str(write_jira_dump(tmp_path / "jira.jsonl.gz", ISSUES)))
    monkeypatch.setenv("JIRA_SITE", SITE)
    monkeypatch.delenv("RAG_PARTITION_START", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path / "data"


def _ui_status(instance: dg.DagsterInstance, defs: dg.Definitions, asset: str) -> tuple[list[str], set[str]]:
    """(the asset's partition keys, those the UI shows Missing): the status cache the UI's partition bar reads."""
    partitions = defs.resolve_assets_def(asset).partitions_def
    assert isinstance(partitions, dg.TimeWindowPartitionsDefinition)
    keys = partitions.get_partition_keys()
    cached = get_and_update_asset_status_cache_value(instance, dg.AssetKey(asset), partitions)
    assert cached is not None
    done = set(cached.deserialize_materialized_partition_subsets(partitions).get_partition_keys())
    return keys, set(keys) - done


# Two first-index runs of a small source and the code location loaded after each (~40 s).
@pytest.mark.slow
def test_partitions_start_at_the_first_data_week_and_move_earlier_with_older_data(
    jira_only: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(jira_only)
    # Before the first index nothing is recorded: every admitted week is open, as before.
    before = build_definitions(settings).resolve_assets_def("jira_issues").partitions_def
    assert isinstance(before, dg.TimeWindowPartitionsDefinition) and before.start.date() == date(2003, 12, 29)

    summary = run_backfill(settings, sources=("jira",))
    defs = build_definitions(settings)  # the webserver's and daemon's next load
    first = week_key("2024-03-01")
    keys = ChainKeys("jira", "jira_issues").all
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(summary.dagster_home)) as instance:
        for asset in keys:
            partitions, missing = _ui_status(instance, defs, asset)
            assert partitions[0] == first and partitions == weeks_between(date(2024, 3, 1), datetime.now(UTC).date())
            assert missing == set(), asset  # not one week Missing, before or after the first document
        materialized = {a: instance.get_materialized_partitions(dg.AssetKey(a)) for a in keys}
    record = json.loads((jira_only / PARTITION_START_RECORD).read_text())
    assert record["first_weeks"] == {"jira": first}
    with EdgeVectorStore(jira_only / "qdrant") as store:
        documents_before = set(store.indexed_documents())

    # An older export arrives: its first index moves the start earlier; nothing already there is lost.
    monkeypatch.setenv("RAG_JIRA_DUMP", str(write_jira_dump(tmp_path / "jira-older.jsonl.gz", [OLDER, *ISSUES])))
    summary = run_backfill(settings_for(jira_only), sources=("jira",))
    defs = build_definitions(settings_for(jira_only))
    older = week_key("2023-06-07")
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(summary.dagster_home)) as instance:
        for asset in keys:
            partitions, missing = _ui_status(instance, defs, asset)
            assert partitions[0] == older and missing == set(), asset
            assert materialized[asset] <= instance.get_materialized_partitions(dg.AssetKey(asset))
    record = json.loads((jira_only / PARTITION_START_RECORD).read_text())
    assert record["first_weeks"] == {"jira": older}
    assert [(h["from"], h["to"], h["why"]) for h in record["history"]] == [
        (None, first, "first data week"),
        (first, older, "older data arrived"),
    ]
    with EdgeVectorStore(jira_only / "qdrant") as store:
        assert set(store.indexed_documents()) == documents_before | {f"jira:{SITE}:3"}


def test_an_explicit_partition_start_wins_over_the_record(jira_only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = jira_only / "parquet" / "jira_child_chunks"
    folder.mkdir(parents=True)
    (folder / "2024-02-26.parquet").write_bytes(b"")  # a folder the first index wrote
    defs = build_definitions(settings_for(jira_only))
    assert defs.resolve_assets_def("jira_issues").partitions_def.start.date() == date(2024, 2, 26)  # type: ignore[union-attr]
    assert defs.resolve_assets_def("slack_threads").partitions_def.start.date() == date(2003, 12, 29)  # type: ignore[union-attr]
    monkeypatch.setenv("RAG_PARTITION_START", "2022-01-03")
    defs = build_definitions(settings_for(jira_only))
    for asset in ("jira_issues", "slack_threads", "mined_eval_sets"):
        assert defs.resolve_assets_def(asset).partitions_def.start.date() == date(2022, 1, 3)  # type: ignore[union-attr]


def test_a_new_sources_first_sync_stays_inside_the_partitions_its_steps_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the stack test: a new source's first scheduled sync is planned where nothing is recorded (every
    admitted week open); its first step writes the first week that held data, and the run's later steps, loading
    the code location afresh (a run worker, a Celery worker), must not find the partitions starting after the
    run's own range (Dagster refuses the run: "partition key range start … is before … start time")."""
    from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG
    from rag_pipeline_tests.kit import slack_fixtures as F
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
    from rag_pipeline_tests.kit.sync_harness import SyncHarness

    for name in ("JIRA_URL", "RAG_NOTIFY_SLACK_CHANNEL", "DAGSTER_HOME", "RAG_PARTITION_START", "RAG_JIRA_DUMP"):
        monkeypatch.delenv(name, raising=False)
    with SlackEmulator(F.crafted_workspace()) as emu, dg.instance_for_test() as instance:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test-token")
        monkeypatch.setenv("SLACK_API_BASE_URL", emu.base_url)
        settings = settings_for(tmp_path / "data")
        harness = SyncHarness(settings, "slack", instance, now=datetime.now(UTC))
        harness.discover()
        # The code location's own sensor (the daemon's), not the harness's fake-clock copy.
        data = harness._evaluate(harness.defs.resolve_sensor_def("slack_sync_sensor"))
        [request] = list(data.run_requests or [])
        start, end = request.tags[RANGE_START_TAG], request.tags[RANGE_END_TAG]
        assert start < end
        record = json.loads((tmp_path / "data" / PARTITION_START_RECORD).read_text())
        assert record["first_weeks"] == {"slack": start}  # recorded before the run was requested

        # The run's first step writes its first data week, after the planned start (the initial history was empty).
        children = settings.paths.parquet / ChainKeys("slack", "slack").children
        children.mkdir(parents=True)
        (children / f"{end}.parquet").write_bytes(b"")
        again = build_definitions(settings_for(tmp_path / "data"))  # a later step's process loads the location
        for asset in harness.spec.keys.all:
            partitions = again.resolve_assets_def(asset).partitions_def
            if isinstance(partitions, dg.TimeWindowPartitionsDefinition):
                assert partitions.get_first_partition_key() == start, asset
                assert partitions.get_partition_keys_in_range(dg.PartitionKeyRange(start, end))[0] == start
        assert json.loads((tmp_path / "data" / PARTITION_START_RECORD).read_text())["first_weeks"] == {"slack": start}
