"""The scheduled sync on a fake clock: watermarks, the settle window across midnight, catch-up after an
outage, failures retried at the next tick, the gap check, per-source switches and crons."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.connectors.slack.threads import thread_document_id
from rag_pipeline.defs.chain.resources import qdrant_resource
from rag_pipeline.index.store import SearchFilter
from rag_pipeline.runs.sync_runs import source_states
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import settings_for
from rag_pipeline_tests.kit.sync_harness import SyncHarness, container_results, planned_ranges

TOKEN = "xoxb-test-token"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with SlackEmulator(F.crafted_workspace()) as emu:
        for name in ("JIRA_URL", "RAG_NOTIFY_SLACK_CHANNEL", "DAGSTER_HOME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
        monkeypatch.setenv("SLACK_API_BASE_URL", emu.base_url)
        monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
        yield emu


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _indexed(harness: SyncHarness, container: str | None = None) -> set[str]:
    qdrant = qdrant_resource(harness.settings)
    flt = SearchFilter(sources=("slack",), containers=(container,) if container else None)
    with qdrant.open() as store:
        return set(store.indexed_documents(flt))


def _ranges(requests: list[dg.RunRequest]) -> dict[str, tuple[str, str, str]]:
    # One run per source and tick, whatever the number of channels.
    assert len(requests) <= 1
    return planned_ranges(requests)


@pytest.mark.slow  # about a minute: runs in the slow suite (make test runs both)
def test_first_evaluation_requests_history_then_each_tick_reads_from_the_watermark(slack: SlackEmulator) -> None:
    with dg.instance_for_test() as instance:
        h = SyncHarness(settings_for(), "slack", instance, now=_at("2024-03-12 10:00:30"))
        h.discover()
        first = h.plan()
        # No cron tick needs to pass: every channel gets its initial history (90 days) at once.
        assert _ranges(first) == {
            c: ("2023-12-14", "2024-03-12", "initial history")
            for c in (F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL)
        }
        # Evaluated again before its runs exist, it asks for the same run keys, which the daemon launches once.
        assert [r.run_key for r in h.plan()] == [r.run_key for r in first]
        assert all(r.success for r in h.execute(first))
        assert h.plan() == []  # up to date until the next tick
        before = _indexed(h)
        assert before

        # A thread started at 23:30, after the day's last hourly tick, and quiet afterwards.
        late = F.march_ts(12, 23, 30)
        slack.workspace.post(F.GENERAL_CHANNEL, {"ts": late, "user": "U0ALICE001", "text": "late night deploy notes"})
        h.now = _at("2024-03-13 00:00:30")
        after_midnight = h.plan()
        # The previous day stays in the range until the settle window (2 h) after midnight has passed.
        assert _ranges(after_midnight)[F.GENERAL_CHANNEL] == ("2024-03-12", "2024-03-13", "catch-up")
        assert all(r.success for r in h.execute(after_midnight))
        assert thread_document_id(F.CRAFTED_TEAM, F.GENERAL_CHANNEL, late) in _indexed(h, F.GENERAL_CHANNEL)
        for hour in ("01", "02"):
            h.now = _at(f"2024-03-13 {hour}:00:30")
            requests = h.plan()
            assert _ranges(requests)[F.GENERAL_CHANNEL] == ("2024-03-12", "2024-03-13", "tick")
            assert all(r.success for r in h.execute(requests))
        h.now = _at("2024-03-13 03:00:30")  # the watermark (02:00:30) is past the settle window: only today
        assert _ranges(h.plan())[F.GENERAL_CHANNEL] == ("2024-03-13", "2024-03-13", "tick")


@pytest.mark.slow  # about a minute: runs in the slow suite (make test runs both)
def test_outage_catch_up_is_capped_carried_and_failures_wait_for_the_next_tick(
    slack: SlackEmulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLACK_INITIAL_HISTORY_DAYS", "3")
    monkeypatch.setenv("RAG_SYNC_MAX_RANGE_DAYS", "4")
    monkeypatch.setenv("SLACK_SYNC_CRON", "0 */6 * * *")
    with dg.instance_for_test() as instance:
        h = SyncHarness(settings_for(), "slack", instance, now=_at("2024-03-01 07:00:00"))
        h.discover()
        assert all(r.success for r in h.execute(h.plan()))
        assert _ranges(h.plan()) == {}
        # The daemon was down for 10 days: the backlog comes in ranges of at most 4 days, one after another.
        h.now = _at("2024-03-11 07:00:00")
        seen = []
        for _ in range(5):
            requests = h.plan()
            if not requests:
                break
            seen.append(_ranges(requests)[F.GENERAL_CHANNEL])
            assert all(r.success for r in h.execute(requests))
        # Each range starts on the day of the last one's end less the settle window (one day read twice per range).
        assert seen == [
            ("2024-03-01", "2024-03-04", "catch-up"),
            ("2024-03-04", "2024-03-07", "catch-up"),
            ("2024-03-07", "2024-03-10", "catch-up"),
            ("2024-03-10", "2024-03-11", "tick"),  # made good through 03-11 00:00, which only missed the 06:00 tick
        ]
        states = {s.container: s for s in source_states(instance, h.spec)[0]}
        assert states[F.GENERAL_CHANNEL].watermark == _at("2024-03-11 07:00:00")
        # Every thread of #general started through the last synced day is indexed, although no tick ran in the
        # outage (the emulator has no clock: what it holds for 03-11 after 07:00 is read too).
        slack.workspace.write_export(tmp_path / "export")
        exported = SlackExportReader(tmp_path / "export", F.CRAFTED_TEAM, slack.workspace.domain).read().documents
        general = {d.id for d in exported if d.container == F.GENERAL_CHANNEL and d.created < _at("2024-03-12 00:00")}
        assert len(general) > 10 and _indexed(h, F.GENERAL_CHANNEL) == general

        # A channel that fails is not retried every minute: it waits for the next tick, its watermark unmoved.
        slack.inject("repeat_cursor", method="conversations.history", count=None, channel=F.SHARED_CHANNEL)
        h.now = _at("2024-03-11 12:00:30")
        requests = h.plan()
        results = container_results(instance, h.execute(requests))
        assert results[F.SHARED_CHANNEL] is False and results[F.GENERAL_CHANNEL] is True
        h.now = _at("2024-03-11 12:05:00")
        assert _ranges(h.plan()) == {}
        failing = {s.container: s for s in source_states(instance, h.spec, with_errors=True)[0]}[F.SHARED_CHANNEL]
        assert failing.watermark == _at("2024-03-11 07:00:00") and failing.last_failure is not None
        slack.clear_faults()
        h.now = _at("2024-03-11 18:00:30")
        assert set(_ranges(h.plan())) == {F.GENERAL_CHANNEL, F.SHARED_CHANNEL, F.PRIVATE_CHANNEL}
