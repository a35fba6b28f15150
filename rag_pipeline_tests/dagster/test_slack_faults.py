"""The live Slack connector stays bounded against a faulty Web API: repeated cursors, endless empty pages, a
silent server, a trickling one and exhausted budgets each fail their channel alone, quickly, naming the method
and the channel, while the other channels are read (real slack-sdk WebClient against the emulator).

Run with ``-s`` to print the measurements (requests made and seconds until each faulty read stopped)."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from rag_pipeline.connectors.slack.api import SlackApiReader, SlackSyncSettings, build_web_client
from rag_pipeline.connectors.slack.settings import SlackApiSettings
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.defs.slack.spec import slack_api_resource
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.runs.live_sync import run_sync
from rag_pipeline.settings import ApiLimits
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.paging import GuardTripped
from rag_pipeline.sources.source_read import SourceRead
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import settings_for

TOKEN = "xoxb-test-token"
MARCH = [f"2024-03-{d:02d}" for d in range(1, 13)]
GOOD = F.SHARED_CHANNEL
BAD = F.GENERAL_CHANNEL
PAGE_CAP = 20
TIMEOUT = 1


def _resource(emu: SlackEmulator, **limits: object) -> SlackResource:
    fields: dict[str, object] = {"page_cap": PAGE_CAP, "timeout_seconds": TIMEOUT, **limits}
    return SlackResource(token=TOKEN, base_url=emu.base_url, **fields)  # type: ignore[arg-type]


def _report(case: str, requests: int, seconds: float, guard: str, message: str) -> None:
    # One line per case, so `pytest -s` prints the measurement table of the faulty servers.
    print(f"\nMEASURE | {case} | {requests} | {seconds:.2f} | {guard} | {message}")


def _read_with_fault(emu: SlackEmulator, case: str, **limits: object) -> tuple[SourceRead, float]:
    started = time.monotonic()
    read = _resource(emu, **limits).read_partitions({BAD: MARCH, GOOD: MARCH})
    seconds = time.monotonic() - started
    bad_requests = sum(1 for r in emu.requests if r.params.get("channel") == BAD)
    _report(case, bad_requests, seconds, read.metadata["guards_tripped"].get(BAD, "-"), read.failed.get(BAD, "-"))
    return read, seconds


def _good_documents() -> set[str]:
    with SlackEmulator(F.crafted_workspace()) as emu:
        return {d.id for d in _resource(emu).read_partitions({GOOD: MARCH}).documents}


def _assert_bad_failed_alone(read: SourceRead, guard: str, endpoint: str) -> None:
    assert set(read.failed) == {BAD} and read.metadata["guards_tripped"] == {BAD: guard}
    message = read.failed[BAD]
    assert endpoint in message and f"#general ({BAD})" in message
    assert {d.container for d in read.documents} == {GOOD}  # the good channel is read whole
    assert {d.id for d in read.documents} == _good_documents()


@pytest.mark.parametrize("method", ["conversations.history", "conversations.replies"])
def test_repeated_cursor_stops_the_channel_alone(method: str) -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        emu.inject("repeat_cursor", method=method, channel=BAD, count=None)
        read, seconds = _read_with_fault(emu, f"repeat cursor {method}")
        faulty = [r for r in emu.calls(method) if r.params.get("channel") == BAD]
    _assert_bad_failed_alone(read, "repeated_cursor", method)
    assert "repeated the cursor" in read.failed[BAD] and "cmVwZWF0" in read.failed[BAD]
    assert len(faulty) == 2 and seconds < 5  # the second page already repeats the cursor


def test_repeated_cursor_in_discovery_names_the_listing() -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        emu.inject("repeat_cursor", method="conversations.list", count=None)
        reader = SlackApiReader(build_web_client(TOKEN, emu.base_url, stats=ApiStats()), SlackSyncSettings())
        started = time.monotonic()
        with pytest.raises(GuardTripped) as caught:
            reader.discover()
        seconds = time.monotonic() - started
        requests = len(emu.calls("conversations.list"))
    _report("repeat cursor conversations.list", requests, seconds, caught.value.guard, str(caught.value))
    assert caught.value.guard == "repeated_cursor" and requests == 2
    assert "conversations.list for the workspace" in str(caught.value)


@pytest.mark.parametrize(("page_cap", "guard"), [(PAGE_CAP, "page_cap"), (10_000, "empty_pages")])
def test_endless_empty_pages_stop_at_the_cap_or_the_empty_run(page_cap: int, guard: str) -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        emu.inject("empty_pages", method="conversations.history", channel=BAD, count=None)
        read, _ = _read_with_fault(emu, f"empty pages (page cap {page_cap})", page_cap=page_cap)
        faulty = [r for r in emu.calls("conversations.history") if r.params.get("channel") == BAD]
    _assert_bad_failed_alone(read, guard, "conversations.history")
    assert "last cursor" in read.failed[BAD]
    assert len(faulty) <= 3 * min(page_cap, 51)


@pytest.mark.parametrize("kind", ["silent", "trickle"])
def test_a_server_that_does_not_answer_in_time_fails_the_call(kind: str) -> None:
    with SlackEmulator(F.crafted_workspace(), trickle_interval=1.0) as emu:
        emu.inject(kind, method="conversations.history", channel=BAD, count=None)
        read, seconds = _read_with_fault(emu, f"{kind} server (timeout {TIMEOUT} s)")
        faulty = [r for r in emu.requests if r.method == "conversations.history" and r.params.get("channel") == BAD]
    _assert_bad_failed_alone(read, "timeout", "conversations.history")
    assert f"within {TIMEOUT} s" in read.failed[BAD]
    # One attempt (a read timeout is not retried as a dropped connection), ended by the timeout.
    assert len(faulty) == 1 and seconds <= 2 * TIMEOUT + 1


def test_request_budget_stops_a_long_read() -> None:
    with SlackEmulator(F.crafted_workspace(), max_limit=2) as emu:
        # 12 days x 2 requests: far below what #general needs at 2 messages a page, plenty for nothing else.
        emu.inject("500", method="conversations.history", channel=BAD, count=1)
        started = time.monotonic()
        read = _resource(emu, requests_per_partition=2, page_size=2).read_partitions({BAD: MARCH})
        seconds = time.monotonic() - started
    message = read.failed[BAD]
    _report("request budget 2/day x 12 days", read.metadata["api_calls"], seconds, "request_budget", message)
    assert read.metadata["guards_tripped"] == {BAD: "request_budget"}
    assert "more than 24 requests" in message and "RAG_API_REQUEST_BUDGET" in message and not read.documents


def test_time_budget_stops_a_slow_read() -> None:
    with SlackEmulator(F.crafted_workspace()) as emu:
        emu.inject("429", method="conversations.replies", channel=BAD, count=2, retry_after=1)
        started = time.monotonic()
        read = _resource(emu, seconds_per_partition=1).read_partitions({BAD: MARCH[:1]})
        seconds = time.monotonic() - started
    message = read.failed[BAD]
    _report("seconds budget 1 s x 1 day", read.metadata["api_calls"], seconds, "time_budget", message)
    assert read.metadata["guards_tripped"] == {BAD: "time_budget"} and "RAG_API_SECONDS_BUDGET" in message
    assert seconds < 5


def test_a_good_workspace_of_many_pages_is_untouched_by_the_guards() -> None:
    def read(**limits: object) -> tuple[SourceRead, list[tuple[str, str]]]:
        with SlackEmulator(F.crafted_workspace(), max_limit=2) as emu:
            out = _resource(emu, page_size=2, **limits).read_partitions({BAD: MARCH, GOOD: MARCH})
            return out, [(r.method, r.params.get("cursor", "")) for r in emu.requests]

    unbounded, unbounded_requests = read(page_cap=10**9, timeout_seconds=30)
    default = ApiLimits()
    bounded, bounded_requests = read(
        page_cap=default.page_cap,
        requests_per_partition=default.requests_per_partition,
        seconds_per_partition=default.seconds_per_partition,
    )
    assert not bounded.failed and bounded.metadata["guards_tripped"] == {}
    assert bounded_requests == unbounded_requests and len(bounded_requests) > 30  # same requests, many pages
    assert [d.id for d in bounded.documents] == [d.id for d in unbounded.documents]
    _report("good workspace, 2 per page", len(bounded_requests), 0.0, "-", "no guard tripped")


def test_limits_come_from_the_settings() -> None:
    limits = ApiLimits(timeout_seconds=7, page_cap=99, requests_per_partition=11, seconds_per_partition=13)
    resource = slack_api_resource(SlackApiSettings(), limits)
    assert (resource.timeout_seconds, resource.page_cap) == (7, 99)
    assert (resource.requests_per_partition, resource.seconds_per_partition) == (11, 13)
    assert resource.sync_settings().page_cap == 99


def test_sync_leaves_the_faulty_channel_unsynced_and_the_others_synced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with SlackEmulator(F.crafted_workspace()) as emu:
        emu.inject("repeat_cursor", method="conversations.history", channel=BAD, count=None)
        summary = run_sync(
            settings_for(tmp_path),
            "slack",
            MARCH[0],
            MARCH[-1],
            containers=["general", "partner-shared"],
            resource=_resource(emu),
            reconcile=False,
        )
    assert set(summary.failed) == {"general"} and "conversations.history" in summary.failed["general"]
    assert summary.documents == len(_good_documents())
    with dg.DagsterInstance.get() as instance:
        done = instance.get_materialized_partitions(dg.AssetKey("slack_threads"))
    assert done == {week_key(day) for day in MARCH}
    # The faulty channel's days stay unsynced: none of its rows was written, the good channel's all were.
    stored = pd.concat(pd.read_parquet(p) for p in (tmp_path / "parquet" / "slack_threads").glob("*.parquet"))
    assert set(stored["_container"]) == {GOOD} and len(stored) == summary.documents
