"""A simulated week of the unattended sync against the Slack and Jira emulators, tick by tick on a fake clock
(``kit/sync_week.py``): the real discovery sensors, sync sensors, gap checks and reconciliation jobs, every run they
request executed in-process, then the index compared with a fresh full sync of the same emulator state.

The week: messages, replies, root and reply edits, reply and root deletions and Jira creations and updates at
random instants (a third of them at 23:00-23:59:59), a 36-hour daemon outage, a channel and a project created
mid-week with 60 days of history, and Slack in the 15-per-page / 1-request-per-minute regime. Each source has its
own cron (Slack every 6 hours, Jira every 4) so the test also shows that each sensor keeps its own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.runs.dagster_private import SqlEventLogStorageTable
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit import sync_week as week
from rag_pipeline_tests.kit.sync_harness import SyncHarness

SCENARIO = week.Scenario(slack_cron="0 */6 * * *", jira_cron="0 */4 * * *")


def _hours_of(cron_hours: int, instants: list[datetime]) -> set[tuple[int, int]]:
    """The (hour modulo the cron's step, minute) pairs the instants fall on."""
    return {(t.hour % cron_hours, t.minute) for t in instants}


@pytest.mark.slow  # about four minutes: ~70 ticks with their runs, 14 reconciliations and a fresh sync
def test_a_simulated_week_misses_nothing_duplicates_nothing_and_keeps_every_budget(tmp_path: Path) -> None:
    world = week.World(SCENARIO)
    with (
        week.emulators(SCENARIO, world) as (slack, jira),
        dg.DagsterInstance.ephemeral() as instance,
    ):
        settings = Settings.from_env(week.scenario_env(SCENARIO, tmp_path / "data", slack, jira))
        assert settings.automation.sync("slack").requests_per_minute == 1  # the 15-per-page regime
        simulation = week.SyncWeek(SCENARIO, world, settings, instance, {"slack": slack, "jira": jira})
        result = simulation.run()

        # Every run the sensors asked for succeeded, and its gap check passed.
        assert result.runs and all(r.success for r in result.runs), [r for r in result.runs if not r.success]
        assert all(r.gap_check_passed for r in result.runs)
        assert all(r.success for r in result.reconciliations)
        reasons = {(r.source, r.container): set() for r in result.runs}
        for r in result.runs:
            reasons[(r.source, r.container)].add(r.reason)
        # The containers created mid-week started with their history; the outage was caught up.
        assert "initial history" in reasons[("slack", week.LAUNCH)]
        assert "initial history" in reasons[("jira", week.NEWP)]
        assert {"catch-up"} <= reasons[("slack", week.GENERAL)] and {"catch-up"} <= reasons[("jira", week.OPS)]
        # The new containers' history (60 days) was read: their oldest documents are in the index.
        history = [e for e in result.expectations if e.kind == "history" and e.container in (week.LAUNCH, week.NEWP)]
        assert len(history) == 20 and all(e.indexed_at is not None for e in history)

        # Each sensor kept its own cron: runs were planned only on its ticks (plus the evaluation's 30 s).
        slack_planned = [r.planned_at for r in result.runs_of("slack")]
        jira_planned = [r.planned_at for r in result.runs_of("jira")]
        assert _hours_of(6, slack_planned) == {(0, 0)}
        assert _hours_of(4, jira_planned) == {(0, 0)}
        assert any(t.hour % 6 for t in jira_planned)  # Jira ran between Slack's ticks

        # Budgets: what each Slack tick planned stayed within rpm x minutes of the tick window, and the calls
        # the emulator answered in a tick too (the planner's estimate is an upper bound here).
        budget = settings.automation.sync("slack").requests_per_minute * 6 * 60
        slack_tag = simulation.sources["slack"].harness.spec.api_tag
        windows = week.budget_windows(instance, slack_tag, SCENARIO.slack_cron)
        assert windows and all(estimated <= budget for _, _, estimated in windows), windows
        assert max(t.api_calls for t in result.ticks if t.source == "slack") <= budget

        # Lag: nothing was never indexed; outside the outage every change within 2 ticks of its source's cron,
        # and what waited through the outage within 3 ticks after it.
        for source in SCENARIO.sources:
            lag = week.lag_figures(result, source)
            assert lag["never_indexed"] == 0, lag["never_indexed_examples"]
            assert lag["synced_outside_outage"]["ticks"]["max"] <= 2, lag
            assert lag["outage"]["changes_waiting"] > 0
            assert lag["outage"]["ticks_after_outage_until_all_indexed"] <= 3, lag["outage"]
        late = [e for e in result.expectations if e.visible_at.hour == 23 and e.kind in ("root", "reply", "issue")]
        assert len(late) >= 5  # the instants the old "latest day" automation lost

        # The index equals a fresh full sync of the same final state.
        fresh = week.fresh_sync(SCENARIO, slack, jira, tmp_path / "fresh", SCENARIO.end + timedelta(minutes=1))
        for source in SCENARIO.sources:
            comparison = week.compare_indexes(settings, fresh, source)
            assert comparison.documents > 20
            assert (comparison.missing, comparison.extra, comparison.stale, comparison.duplicated) == (
                [],
                [],
                [],
                [],
            ), comparison.as_dict()

        # A week whose materializations are gone is a gap: the next sync run's check fails and names it. (OSS
        # event storage cannot wipe one partition: its rows are deleted from the event log table directly.)
        harness = SyncHarness(settings, "slack", instance, now=SCENARIO.end + timedelta(hours=2, seconds=30))
        harness.cursors = dict(simulation.sources["slack"].harness.cursors)
        lost_week = week_key((SCENARIO.start - timedelta(days=14)).date())  # inside the channels' history
        assert lost_week in instance.get_materialized_partitions(dg.AssetKey("slack_threads"))
        table = SqlEventLogStorageTable
        with instance.event_log_storage.index_connection() as conn:  # type: ignore[attr-defined]
            conn.execute(
                table.delete().where(
                    (table.c.asset_key == dg.AssetKey("slack_threads").to_string()) & (table.c.partition == lost_week)
                )
            )
        assert lost_week not in instance.get_materialized_partitions(dg.AssetKey("slack_threads"))
        requests = harness.plan()
        assert requests, "the tick after the week plans a run"
        runs = harness.execute(requests)
        checks = [c for c in runs[0].get_asset_check_evaluations() if c.check_name == "no_missing_days"]
        assert checks and not checks[0].passed
        assert lost_week in str(checks[0].description)
        assert datetime.now(UTC) > SCENARIO.end  # the week lay in the past, within the reconciliation's lookback
