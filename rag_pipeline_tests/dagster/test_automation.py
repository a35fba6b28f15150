"""Declarative automation, the eval-sets sensor and the policies, evaluated at chosen times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.evaluation.assets import eval_arm_names
from rag_pipeline_tests.kit.pipeline import settings_for

ARMS = eval_arm_names(None)


@pytest.fixture
def defs(monkeypatch) -> dg.Definitions:
    for name in ("SLACK_BOT_TOKEN", "JIRA_URL", "RAG_NOTIFY_SLACK_CHANNEL"):
        monkeypatch.delenv(name, raising=False)
    return build_definitions(settings_for())


def _requested(result, asset: str) -> set[str]:
    return {str(k) for k in result.get_requested_partitions(dg.AssetKey(asset))}


def test_raw_assets_wait_for_their_sync_sensor_downstream_is_eager_and_eval_daily(defs: dg.Definitions) -> None:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("slack_channels", ["C1", "C2"])
        instance.add_dynamic_partitions("jira_projects", ["P1"])
        first = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, evaluation_time=datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
        )
        assert first.total_requested == 0
        tick = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=first.cursor,
            evaluation_time=datetime(2026, 11, 21, 11, 0, 30, tzinfo=UTC),
        )  # fmt: skip
        # The raw assets have no cron condition any more: the sync sensors own their range runs.
        assert tick.total_requested == 0
        # A raw partition materialized by anything (a sync run, a hand materialization) is followed eagerly.
        instance.report_runless_asset_event(dg.AssetMaterialization("slack_threads", partition="2026-11-16"))
        eager = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=tick.cursor,
            evaluation_time=datetime(2026, 11, 21, 11, 20, tzinfo=UTC),
        )  # fmt: skip
        assert _requested(eager, "slack_parent_chunks") == {"2026-11-16"}
        assert _requested(eager, "slack_threads") == set() and _requested(eager, "jira_issues") == set()
        morning = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=eager.cursor,
            evaluation_time=datetime(2026, 11, 22, 6, 0, 30, tzinfo=UTC),
        )  # fmt: skip
        assert _requested(morning, "retrieval_eval") == set(ARMS)


def test_eval_sets_sensor_requests_every_arm_when_a_file_changes(defs, tmp_path: Path, monkeypatch) -> None:
    eval_dir = tmp_path / "eval_sets"
    (eval_dir / "jira").mkdir(parents=True)
    (eval_dir / "jira" / "queries.jsonl").write_text('{"id": "q1", "query": "crash on start"}\n')
    monkeypatch.setenv("RAG_EVAL_DIR", str(eval_dir))
    sensor = build_definitions(settings_for()).resolve_sensor_def("eval_sets_changed_sensor")
    with dg.instance_for_test() as instance:

        def tick(cursor: str | None):
            context = dg.build_sensor_context(instance=instance, cursor=cursor, repository_def=None)
            return sensor(context), context.cursor

        first, cursor = tick(None)
        assert isinstance(first, dg.SkipReason) and cursor
        same, cursor = tick(cursor)
        assert isinstance(same, dg.SkipReason)
        (eval_dir / "jira" / "queries.jsonl").write_text('{"id": "q1", "query": "crash on launch"}\n')
        changed, cursor = tick(cursor)
        # One run over every arm (a partition range): the arms of an eval set share their searches.
        [request] = changed.run_requests
        assert request.partition_key_range == dg.PartitionKeyRange(ARMS[0], ARMS[-1])
        assert request.tags["rag/eval_sets_changed"] == "jira/queries.jsonl"
        assert request.run_key
        again, cursor = tick(changed.cursor)
        assert isinstance(again, dg.SkipReason)
        (eval_dir / "new.jsonl").write_text("{}\n")  # an added file counts too
        added, _ = tick(cursor)
        assert all(r.tags["rag/eval_sets_changed"] == "new.jsonl" for r in added.run_requests)


def test_freshness_and_retry_policies(defs: dg.Definitions, monkeypatch) -> None:
    graph = defs.resolve_asset_graph()
    for raw in ("slack_threads", "jira_issues"):
        node = graph.get(dg.AssetKey(raw))
        assert node.freshness_policy.fail_window.to_timedelta() == timedelta(hours=26)
        assets_def = defs.resolve_assets_def(raw)
        assert assets_def.op.retry_policy is not None and assets_def.op.retry_policy.max_retries == 3
    for points in ("slack_qdrant_points", "jira_qdrant_points"):
        assert graph.get(dg.AssetKey(points)).freshness_policy is not None
    monkeypatch.setenv("JIRA_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("JIRA_USERNAME", "bot@example.com")
    monkeypatch.setenv("JIRA_API_TOKEN", "t")
    live = build_definitions(settings_for())
    assert live.resolve_assets_def("jira_reconciliation").op.retry_policy is not None


def test_assets_are_described_grouped_owned_and_linked_to_their_code(defs: dg.Definitions) -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.description and node.group_name and node.owners, key.to_user_string()
        assets_def = defs.resolve_assets_def(key)
        references = assets_def.specs_by_key[key].metadata["dagster/code_references"].code_references
        assert references and references[0].file_path.endswith(".py") and references[0].line_number > 0
