"""The sync planner on its own: initial history, settle window, caps, waiting runs and the request budget."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from rag_pipeline.scheduling.plan import RangeRequest, SyncPolicy, next_range, plan_sync
from rag_pipeline.scheduling.watermarks import RunState, SyncRun, container_state

NOW = datetime(2026, 11, 10, 10, 0, 30, tzinfo=UTC)
TICK, NEXT = datetime(2026, 11, 10, 10, tzinfo=UTC), datetime(2026, 11, 10, 11, tzinfo=UTC)
POLICY = SyncPolicy(first_day="2026-09-01", initial_history_days=90, max_range_days=30)


def _run(container: str, state: RunState, planned: datetime, through: datetime | None, calls: int | None = None,
         first: str = "2026-11-01", last: str = "2026-11-10", estimate: int | None = None) -> SyncRun:  # fmt: skip
    return SyncRun(f"run-{container}-{planned:%d%H%M}-{state.value}", container, state, first, last, planned,
                   through, api_calls=calls, estimated_requests=estimate)  # fmt: skip


def test_initial_history_is_one_uncapped_range_clipped_to_the_first_partition_day() -> None:
    found = next_range(container_state("C1", []), NOW, TICK, POLICY, NEXT)
    assert isinstance(found, RangeRequest)
    # 90 days back would be 2026-08-13, before the partitions start.
    assert (found.start, found.end, found.reason, found.synced_through) == (
        date(2026, 9, 1),
        date(2026, 11, 10),
        "initial history",
        NOW,
    )


def test_watermark_rules_settle_cap_in_flight_and_failures() -> None:
    ok = _run("C1", RunState.SUCCESS, NOW - timedelta(hours=10), datetime(2026, 11, 10, 0, 30, tzinfo=UTC))
    found = next_range(container_state("C1", [ok]), NOW, TICK, POLICY, NEXT)
    assert isinstance(found, RangeRequest) and found.start == date(2026, 11, 9)  # 00:30 less 2 h: yesterday
    assert found.reason == "catch-up" and found.sync_from == ok.synced_through
    old = _run("C1", RunState.SUCCESS, NOW, datetime(2026, 9, 5, 12, tzinfo=UTC))
    capped = next_range(container_state("C1", [old]), NOW, TICK, POLICY, NEXT)
    assert isinstance(capped, RangeRequest) and (capped.start, capped.end) == (date(2026, 9, 5), date(2026, 10, 4))
    assert capped.synced_through == datetime(2026, 10, 5, tzinfo=UTC)  # good only through its last day
    fresh = _run("C1", RunState.SUCCESS, NOW, TICK + timedelta(seconds=5))
    assert next_range(container_state("C1", [fresh]), NOW, TICK, POLICY, NEXT) == "up to date"
    flying = _run("C1", RunState.IN_FLIGHT, NOW, NOW)
    assert str(next_range(container_state("C1", [ok, flying]), NOW, TICK, POLICY, NEXT)).endswith("in flight")
    failed = _run("C1", RunState.FAILURE, TICK + timedelta(seconds=10), NOW)
    waits = next_range(container_state("C1", [ok, failed]), NOW, TICK, POLICY, NEXT)
    assert isinstance(waits, str) and waits.startswith("last run failed")
    # At the next tick it is tried again, from the unmoved watermark.
    later = next_range(container_state("C1", [ok, failed]), NEXT + timedelta(seconds=30), NEXT, POLICY)
    assert isinstance(later, RangeRequest) and later.sync_from == ok.synced_through
    # Dagster's run retry keeps the tags: its success clears the failure it retried.
    retried = _run("C1", RunState.SUCCESS, failed.planned_at, NOW)
    assert container_state("C1", [ok, failed, retried]).last_failure is None
    # Many failures never lose the watermark: it comes from the successful runs only.
    assert container_state("C1", [ok, failed, failed]).watermark == ok.synced_through


def test_request_budget_carries_what_does_not_fit_oldest_first() -> None:
    policy = SyncPolicy(first_day="2026-09-01", requests_per_minute=1)  # 60 requests per hourly window
    states = [
        container_state(
            c,
            [
                _run(
                    c,
                    RunState.SUCCESS,
                    NOW - timedelta(hours=h),
                    NOW - timedelta(hours=h),
                    calls=20,
                    first="2026-11-10",
                    last="2026-11-10",
                )
            ],
        )
        for c, h in (("A", 3), ("B", 5), ("C", 2), ("D", 4))
    ]
    plan = plan_sync(states, NOW, TICK, NEXT, policy)
    assert plan.budget == 60
    # 20 requests/day x 1 day each: three fit, the newest watermark (C) waits for the next tick.
    assert [r.container for r in plan.requests] == ["B", "D", "A"]
    assert plan.carried == ["C"] and plan.budget_spent == 60
    # Requests planned earlier in the same window count: with 50 of 60 spent, no 20-request range fits.
    assert [r.container for r in plan_sync(states, NOW, TICK, NEXT, policy, spent_since_tick=50).requests] == []
    # A single range larger than a whole window still goes when the window is untouched.
    big = [container_state("X", [])]
    assert [r.container for r in plan_sync(big, NOW, TICK, NEXT, policy).requests] == ["X"]
