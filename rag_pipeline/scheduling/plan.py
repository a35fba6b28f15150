"""The next sync runs of a source: one range run per container that is behind, from its watermark's day
through today, within the source's request budget.

- A container never synced gets its initial history (``initial_history_days``) as one range run.
- A container whose watermark is older than the latest cron tick is behind: its range starts on the day of
  ``watermark - settle`` (so the previous day is read again until the settle window after midnight has
  passed: late Slack replies, Jira's eventually consistent search) and ends today. A range longer than
  ``max_range_days`` is cut; the run makes good only through the end of its last day, so the container is
  still behind and its next range is planned as soon as this one succeeds (carried, never dropped).
- A container with a run in flight, or whose last run failed after the latest tick, waits (the failed one
  until the next tick, so a broken container does not hammer the API every minute).
- With a request budget (Slack's per-minute limits), the estimated requests of the runs planned since the
  latest tick count against ``requests_per_minute x minutes between ticks``; what does not fit is carried to
  the next tick, oldest watermark first so nothing starves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from rag_pipeline.scheduling.watermarks import ContainerState

# A channel or project with no run to learn from: one history page and a few thread reads per day.
DEFAULT_REQUESTS_PER_DAY = 2.0


@dataclass(frozen=True)
class SyncPolicy:
    """How far back and how much at a time a source syncs."""

    first_day: str  # the partitions' first day: nothing before it can be stored
    initial_history_days: int = 90
    settle: timedelta = timedelta(hours=2)
    max_range_days: int = 30
    requests_per_minute: int | None = None  # None: no budget


@dataclass(frozen=True)
class RangeRequest:
    """One range run to request for one container."""

    container: str
    start: date
    end: date
    sync_from: datetime | None  # the watermark it continues from (None: initial history)
    synced_through: datetime | None  # what the run makes good when it succeeds (None: a past range, nothing)
    reason: str  # "initial history" / "catch-up" / "tick"
    estimated_requests: int

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


@dataclass
class SyncPlan:
    """What to request now, what waits and why (for the sensor's tick description and ``status``)."""

    requests: list[RangeRequest] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # container -> why it is not requested now
    budget: int | None = None
    budget_spent: int = 0

    @property
    def carried(self) -> list[str]:
        return [c for c, why in self.waiting.items() if why.startswith("over the request budget")]


def day_of(instant: datetime) -> date:
    return instant.astimezone(UTC).date()


def end_of_day(day: date) -> datetime:
    """Midnight UTC after ``day``: a run whose range ends on ``day`` makes everything before it good."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)


def next_range(
    state: ContainerState, now: datetime, latest_tick: datetime, policy: SyncPolicy, next_tick: datetime | None = None
) -> RangeRequest | str:
    """The range run ``state``'s container needs now, or why it needs none ("tick": it missed only the latest
    tick; "catch-up": it missed more, e.g. the daemon was down)."""
    today = day_of(now)
    first = date.fromisoformat(policy.first_day)
    if state.in_flight is not None:
        return f"run {state.in_flight.run_id[:8]} in flight"
    if state.last_failure is not None and state.last_failure.planned_at >= latest_tick:
        return f"last run failed; retried after the next tick ({state.last_failure.error or 'no message'})"
    if state.watermark is None:
        start = max(first, today - timedelta(days=policy.initial_history_days - 1))
        return _request(state, start, today, now, "initial history", capped=False, policy=policy)
    if state.watermark >= latest_tick:
        return "up to date"
    start = max(first, day_of(state.watermark - policy.settle))
    interval = (next_tick - latest_tick) if next_tick is not None else timedelta(0)
    reason = "catch-up" if state.watermark < latest_tick - interval else "tick"
    return _request(state, start, today, now, reason, policy=policy)


def _request(
    state: ContainerState,
    start: date,
    end: date,
    now: datetime,
    reason: str,
    policy: SyncPolicy,
    capped: bool = True,
) -> RangeRequest:
    synced_through = now
    if capped and (end - start).days + 1 > policy.max_range_days:
        end = start + timedelta(days=policy.max_range_days - 1)
        synced_through = min(now, end_of_day(end))
    per_day = state.requests_per_day() or DEFAULT_REQUESTS_PER_DAY
    days = (end - start).days + 1
    return RangeRequest(
        container=state.container,
        start=start,
        end=end,
        sync_from=state.watermark,
        synced_through=synced_through,
        reason=reason,
        estimated_requests=max(1, math.ceil(per_day * days)),
    )


def plan_sync(
    states: Sequence[ContainerState],
    now: datetime,
    latest_tick: datetime,
    next_tick: datetime,
    policy: SyncPolicy,
    spent_since_tick: int = 0,
) -> SyncPlan:
    """Every container's next range run, within the request budget of the current tick window."""
    plan = SyncPlan()
    wanted: list[RangeRequest] = []
    for state in states:
        found = next_range(state, now, latest_tick, policy, next_tick)
        if isinstance(found, str):
            plan.waiting[state.container] = found
        else:
            wanted.append(found)
    # Oldest first: a container that never synced, then the one furthest behind.
    wanted.sort(key=lambda r: (r.sync_from is not None, r.sync_from or now, r.container))
    if policy.requests_per_minute is None:
        plan.requests = wanted
        return plan
    minutes = max(1.0, (next_tick - latest_tick).total_seconds() / 60)
    plan.budget = int(policy.requests_per_minute * minutes)
    plan.budget_spent = spent_since_tick
    for request in wanted:
        fits = plan.budget_spent + request.estimated_requests <= plan.budget
        # One run larger than a whole window still goes when the window is untouched, or it would never run.
        if fits or plan.budget_spent == 0:
            plan.requests.append(request)
            plan.budget_spent += request.estimated_requests
        else:
            plan.waiting[request.container] = (
                f"over the request budget of this tick ({plan.budget_spent}/{plan.budget} requests planned, "
                f"~{request.estimated_requests} more needed); carried to the next tick"
            )
    return plan
