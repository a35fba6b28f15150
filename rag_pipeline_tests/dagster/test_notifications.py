"""Slack notifications of failed runs and failed evaluation checks, posted to the Slack emulator."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.evaluation.assets import REPORT_CHECKS
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.notifications import (
    SlackNotificationResource,
    eval_check_slack_notification_sensor,
    run_failure_slack_notification_sensor,
)
from rag_pipeline.notify.slack_notice import Notice
from rag_pipeline_tests.kit import jira_fixtures as JF
from rag_pipeline_tests.kit import pipeline
from rag_pipeline_tests.kit import slack_fixtures as SF
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import cell

TOKEN = "xoxb-test-token"
WEB = "http://dagster.example.test:3000"


@pytest.fixture
def slack():
    workspace = SF.crafted_workspace()
    workspace.scopes.add("chat:write")
    with SlackEmulator(workspace) as emu:
        yield emu


def _notifier(emu: SlackEmulator) -> SlackNotificationResource:
    return SlackNotificationResource(token=TOKEN, channel=SF.GENERAL_CHANNEL, base_url=emu.base_url, webserver_url=WEB)


def _posts(emu: SlackEmulator) -> list[dict]:
    return [dict(r.params) for r in emu.calls("chat.postMessage")]


def test_notice_text_and_blocks_are_bounded() -> None:
    notice = Notice("Run failed: x", {"Assets": "a"}, details=[f"line {i} " + "x" * 400 for i in range(15)], link=WEB)
    text = notice.text()
    assert text.count("\n") == 1 + 1 + 10 + 1 + 1 - 1  # title, field, 10 details, "... and 5 more", link
    assert "… and 5 more" in text and all(len(line) <= 300 for line in text.splitlines())
    kinds = [b["type"] for b in notice.blocks()]
    assert kinds == ["header", "section", "section", "context"]


def test_failed_run_is_posted_with_asset_partition_error_and_link(slack: SlackEmulator, tmp_path: Path) -> None:
    chain = pipeline.chain("jira")[:1]
    with JiraEmulator(JF.crafted_site()) as jira, dg.instance_for_test() as instance:
        resources = pipeline.resources(tmp_path, live=False)
        resources["jira_source"] = JiraResource(url=jira.url, username="bot@example.com", api_token="jira-test-token")
        instance.add_dynamic_partitions("jira_projects", ["OPS"])
        jira.inject("403", path="/search/jql")
        result = dg.materialize(
            chain,
            instance=instance,
            resources=resources,
            **cell("jira_issues", "OPS", "2024-03-04"),
            raise_on_error=False,
        )
        assert not result.success
        run = instance.get_run_by_id(result.run_id)
        failure = next(e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE")
        context = dg.build_run_status_sensor_context(
            sensor_name="run_failure_slack_notification_sensor",
            dagster_instance=instance,
            dagster_run=run,
            dagster_event=failure,
            resources={"slack_notifications": _notifier(slack)},
        ).for_run_failure()
        run_failure_slack_notification_sensor(context)
    [post] = _posts(slack)
    assert post["channel"] == SF.GENERAL_CHANNEL
    text = post["text"]
    assert "Run failed: __ephemeral_asset_job__" in text and "jira_issues" in text and "Partition: 2024-03-04" in text
    assert "Jira 403" in text and "project OPS" in text
    assert f"{WEB}/runs/{result.run_id}" in text
    assert "jira-test-token" not in json.dumps(post) and TOKEN not in json.dumps(post)
    assert json.loads(post["blocks"])[0]["text"]["text"].startswith("Run failed")


def test_a_plain_exception_is_posted_as_its_own_error_with_the_failed_asset(slack: SlackEmulator) -> None:
    @dg.asset
    def flaky_index() -> None:
        raise RuntimeError("Qdrant refused the write: disk full")

    with dg.instance_for_test() as instance:
        result = dg.materialize([flaky_index], instance=instance, raise_on_error=False)
        failure = next(e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE")
        context = dg.build_run_status_sensor_context(
            sensor_name="run_failure_slack_notification_sensor",
            dagster_instance=instance,
            dagster_run=instance.get_run_by_id(result.run_id),
            dagster_event=failure,
            resources={"slack_notifications": _notifier(slack)},
        ).for_run_failure()
        run_failure_slack_notification_sensor(context)
    [post] = _posts(slack)
    # The cause, not Dagster's "Error occurred while executing op" wrapper; the asset, though the run selected none.
    assert "flaky_index: RuntimeError: Qdrant refused the write: disk full" in post["text"]
    assert "Error occurred while executing" not in post["text"] and "Assets: flaky_index" in post["text"]


def test_failed_eval_checks_are_posted_once(slack: SlackEmulator) -> None:
    verdict = {"no_regression": True}

    # The report's checks as the evaluation emits them; the sensor reads them from the event log.
    @dg.asset(name="retrieval_eval_report", check_specs=REPORT_CHECKS)
    def report():
        yield dg.MaterializeResult(metadata={"eval_sets": 1})
        yield dg.AssetCheckResult(check_name="quality_floor", passed=True)
        yield dg.AssetCheckResult(
            check_name="no_regression",
            passed=verdict["no_regression"],
            metadata={"regressions": dg.MetadataValue.json(
                [] if verdict["no_regression"] else ["bundled_jira/hybrid: nDCG@10 0.512 → 0.431"])},
        )  # fmt: skip
        yield dg.AssetCheckResult(check_name="acl_no_leaks", passed=True, metadata={"leaks": 0})

    resources = {"slack_notifications": _notifier(slack)}
    with dg.instance_for_test() as instance:
        assert dg.materialize([report], instance=instance).success  # history before the sensor: not news

        def tick(cursor):
            ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
            result = eval_check_slack_notification_sensor(ctx)
            return ctx.cursor, result

        cursor, first = tick(None)
        assert isinstance(first, dg.SkipReason) and not _posts(slack)
        verdict["no_regression"] = False
        failed = dg.materialize([report], instance=instance)
        cursor, second = tick(cursor)
        cursor, third = tick(cursor)
    [post] = _posts(slack)
    assert second is None and isinstance(third, dg.SkipReason)  # posted once, not again
    text = post["text"]
    assert "Evaluation check failed: no_regression" in text and "retrieval_eval_report" in text
    assert "bundled_jira/hybrid: nDCG@10 0.512 → 0.431" in text and f"{WEB}/runs/{failed.run_id}" in text


def test_a_mass_access_change_is_posted(slack: SlackEmulator) -> None:
    """The access audit's failed check reaches the channel like an evaluation's, with its change lines."""

    @dg.asset(name="access_audit", check_specs=[dg.AssetCheckSpec("no_mass_access_change", asset="access_audit")])
    def audit():
        yield dg.MaterializeResult(metadata={"changes": 40})
        yield dg.AssetCheckResult(
            check_name="no_mass_access_change",
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"changes": ["2026-11-29T01:00:00Z slack carol@x (U0C) lost members of Slack workspace T"]},
        )

    resources = {"slack_notifications": _notifier(slack)}
    with dg.instance_for_test() as instance:
        ctx = dg.build_sensor_context(instance=instance, cursor=None, resources=resources)
        assert isinstance(eval_check_slack_notification_sensor(ctx), dg.SkipReason)
        failed = dg.materialize([audit], instance=instance)
        ctx = dg.build_sensor_context(instance=instance, cursor=ctx.cursor, resources=resources)
        assert eval_check_slack_notification_sensor(ctx) is None
    [post] = _posts(slack)
    assert "Access audit check failed: no_mass_access_change" in post["text"]
    assert "carol@x (U0C) lost members of Slack workspace T" in post["text"]
    assert f"{WEB}/runs/{failed.run_id}" in post["text"]


def test_notifications_are_off_unless_configured(monkeypatch) -> None:
    for name in ("RAG_NOTIFY_SLACK_CHANNEL", "RAG_NOTIFY_SLACK_TOKEN", "SLACK_BOT_TOKEN", "JIRA_URL"):
        monkeypatch.delenv(name, raising=False)
    names = {s.name for s in build_definitions(pipeline.settings_for()).sensors}
    assert "run_failure_slack_notification_sensor" not in names
    monkeypatch.setenv("RAG_NOTIFY_SLACK_CHANNEL", "#rag-alerts")
    monkeypatch.setenv("RAG_NOTIFY_SLACK_TOKEN", TOKEN)
    defs = build_definitions(pipeline.settings_for())
    dg.Definitions.validate_loadable(defs)
    names = {s.name for s in defs.sensors}
    assert {"run_failure_slack_notification_sensor", "eval_check_slack_notification_sensor"} <= names
    notifier = defs.resources["slack_notifications"]
    assert notifier.channel == "#rag-alerts" and isinstance(notifier.token, dg.EnvVar)
