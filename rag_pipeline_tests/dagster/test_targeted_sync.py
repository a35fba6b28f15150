"""A targeted sync as the events' jobs run it (``rag-pipeline sync --readable-only --run-tag``), on Jira against its
emulator: a project the API user cannot browse, named by a webhook, is skipped by name while the readable one is
synced (without ``readable_only`` the same selection fails whole), and the chain run carries the events' tags."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.runs.live_sync import run_sync
from rag_pipeline.sources.problems import SourceError
from rag_pipeline_tests.kit import jira_fixtures as F
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.pipeline import settings_for

TAGS = {"rag/trigger": "events", "rag/events": "jira:issue_updated x2", "rag/event_containers": "HID,OPS"}


@pytest.mark.slow  # 77 s on the loaded 2-core machine
def test_a_targeted_sync_skips_what_it_cannot_read_and_tags_its_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with JiraEmulator(F.crafted_site()) as emu:
        jira = JiraResource(url=emu.url, username="bot@example.com", api_token="jira-test-token",
                            site="jira.example.test", backoff_seconds=0)  # fmt: skip
        settings = settings_for(tmp_path)
        with pytest.raises(SourceError, match="HID"):
            run_sync(settings, "jira", "2024-03-01", "2024-03-31", containers=["OPS", "HID"], resource=jira)
        summary = run_sync(settings, "jira", "2024-03-01", "2024-03-31", containers=["OPS", "HID"], resource=jira,
                           reconcile=False, readable_only=True, run_tags=TAGS)  # fmt: skip
    assert summary.containers == ["OPS"] and summary.skipped == ["HID"] and not summary.failed
    assert summary.documents > 0 and summary.as_dict()["unreadable"] == ["HID"]
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"rag/trigger": "events"}))
    # Every chain run of the sync (a long range may take several) carries the events' tags beside the plan's own.
    assert runs and all({k: r.tags[k] for k in TAGS} == TAGS and r.tags["rag/containers"] == "1" for r in runs)
