"""The sync that runs itself: one sensor per live source owns its sync runs, and an asset check shows gaps.

The sensor evaluates every minute (RUNNING by default where the source is configured and its switch is
on). Each evaluation reads every container's watermark from the instance's sync runs, plans a range for each
container that is behind (see :mod:`rag_pipeline.scheduling.plan`): on the first evaluation of a fresh
instance every container's initial history, after the daemon was down past a cron tick the backlog from each
watermark, otherwise the days since the watermark) and requests **one** run of the source's whole chain that
covers them all, each container from its own watermark: the runs per tick do not grow with the number of
channels or projects. The cron only says when a container is behind; nothing waits for a tick to pass
*between* two evaluations.
"""

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import dagster as dg

from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.runs.sync_runs import cron_window, source_states, sync_request
from rag_pipeline.scheduling.coverage import weeks_between
from rag_pipeline.scheduling.pause import IngestionPause
from rag_pipeline.scheduling.plan import SyncPlan, SyncPolicy, plan_sync

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def plan_now(
    instance: dg.DagsterInstance, spec: SourceSpec, cron: str, policy: SyncPolicy, now: datetime
) -> tuple[SyncPlan, dict[str, Any]]:
    """The plan for ``now`` and a summary of every container's state (the sensor's cursor)."""
    latest_tick, next_tick = cron_window(cron, now)
    states, runs = source_states(instance, spec)
    spent = sum(r.estimated_requests or 0 for r in runs if r.planned_at >= latest_tick)
    plan = plan_sync(states, now, latest_tick, next_tick, policy, spent_since_tick=spent)
    summary = {
        "evaluated_at": now.isoformat(timespec="seconds"),
        "latest_tick": latest_tick.isoformat(timespec="seconds"),
        "next_tick": next_tick.isoformat(timespec="seconds"),
        "watermarks": {s.container: s.watermark.isoformat(timespec="seconds") if s.watermark else None for s in states},
        "requested": {r.container: f"{r.start}..{r.end} ({r.reason})" for r in plan.requests},
        "waiting": plan.waiting,
    }
    if plan.budget is not None:
        summary["request_budget"] = {"planned": plan.budget_spent, "per_tick": plan.budget}
    return plan, summary


def _description(plan: SyncPlan, summary: dict[str, Any]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for why in plan.waiting.values():
        counts[why.split(";")[0].split(" (")[0]] += 1
    waiting = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
    return f"nothing to request ({waiting or 'no containers yet'}); next tick {summary['next_tick']}"


def build_sync_sensor(
    spec: SourceSpec,
    cron: str,
    policy: SyncPolicy,
    clock: Clock = utc_now,
    minimum_interval_seconds: int = 30,
    paused: Callable[[], IngestionPause | None] = lambda: None,
    planned: Callable[[date], None] = lambda _first_day: None,
) -> dg.SensorDefinition:
    """``<source>_sync_sensor``: the source's scheduled sync, RUNNING from the first start of the daemon; each tick
    skips while ``paused()`` names a pause (scheduling/pause.py), keeping its cursor. ``planned(first_day)`` is told
    the first day of each run before it is requested (the code location records the partitions' start there:
    pipeline/partition_start.py's ``record_planned_start``)."""
    budget = (
        f" Slack's request budget: {policy.requests_per_minute} requests/minute between ticks; what does not fit "
        "is carried to the next tick."
        if policy.requests_per_minute
        else ""
    )

    @dg.sensor(
        name=f"{spec.name}_sync_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        asset_selection=list(spec.keys.all),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Syncs every {spec.name} {spec.containers_label[:-1]} that is behind its cron `{cron}` (UTC) in "
        f"one run per tick: each container from its watermark's day (less a {policy.settle} settle window) through "
        "today, "
        f"at most {policy.max_range_days} days per run; a new one first gets {policy.initial_history_days} days of "
        "history. Watermarks are the `rag/synced_through` tags of its successful runs; the cursor shows them." + budget,
    )
    def sync_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        pause = paused()
        if pause is not None:  # nothing is planned, so nothing is skipped for good: watermarks stay where they are
            return dg.SensorResult(skip_reason=pause.describe())
        now = clock()
        plan, summary = plan_now(context.instance, spec, cron, policy, now)
        for request in plan.requests:
            context.log.debug(
                f"{request.container}: {request.start}..{request.end} ({request.reason}, ~{request.estimated_requests} "
                "requests)"
            )
        if plan.requests:
            context.log.info(
                f"one run for {len(plan.requests)} {spec.containers_label}: "
                f"{min(r.start for r in plan.requests)}..{max(r.end for r in plan.requests)}"
            )
        for container, why in plan.waiting.items():
            if why != "up to date":
                context.log.info(f"{container}: {why}")
        requests = []
        if plan.requests:
            planned(min(r.start for r in plan.requests))
            tags, run_config = sync_request(spec, plan.requests, now)
            digest = hashlib.sha256(json.dumps(run_config, sort_keys=True).encode()).hexdigest()[:16]
            requests.append(
                dg.RunRequest(run_key=f"{spec.name}-sync:{now.isoformat()}:{digest}", tags=tags, run_config=run_config)
            )
        return dg.SensorResult(
            run_requests=requests,
            cursor=json.dumps(summary, sort_keys=True),
            skip_reason=None if plan.requests else _description(plan, summary),
        )

    return sync_sensor


def missing_weeks(materialized: set[str], first_week: str, last_week: str) -> list[str]:
    """The weeks from ``first_week`` through ``last_week`` that were never materialized."""
    first, last = datetime.fromisoformat(first_week).date(), datetime.fromisoformat(last_week).date()
    return [week for week in weeks_between(first, last) if week not in materialized]


def build_gap_check(spec: SourceSpec) -> dg.AssetChecksDefinition:
    """``no_missing_days`` on the raw asset: every week from the first synced day through the newest watermark
    has been materialized."""

    @dg.asset_check(
        asset=spec.keys.raw,
        name="no_missing_days",
        description="Fails when a week between the first synced day and the newest watermark was never "
        "materialized (a sync that skipped days, or a wiped partition). Runs with every sync run.",
    )
    def no_missing_days(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        states, _ = source_states(context.instance, spec)
        synced = [s for s in states if s.watermark is not None and s.first_synced_day is not None]
        if not synced:
            return dg.AssetCheckResult(passed=True, metadata={spec.containers_label: 0, "missing_weeks": 0})
        first = week_key(min(s.first_synced_day for s in synced if s.first_synced_day))
        last = week_key(max(s.watermark for s in synced if s.watermark).date())
        materialized = set(context.instance.get_materialized_partitions(dg.AssetKey(spec.keys.raw)))
        gaps = missing_weeks(materialized, first, last)
        return dg.AssetCheckResult(
            passed=not gaps,
            severity=dg.AssetCheckSeverity.ERROR,
            description=None if not gaps else f"{len(gaps)} week(s) never materialized: {', '.join(gaps[:5])}",
            metadata={
                spec.containers_label: len(synced),
                "missing_weeks": len(gaps),
                "gaps": dg.MetadataValue.json(gaps[:20]),
            },
        )

    return no_missing_days


def build_lag_check(
    spec: SourceSpec, cron: str, policy: SyncPolicy, clock: Clock = utc_now
) -> dg.AssetChecksDefinition:
    """``containers_within_lag`` on the raw asset: every known container's watermark is at most two cron
    intervals plus the settle window old (a container that fails alone, or is carried tick after tick,
    shows here while the others keep syncing)."""

    @dg.asset_check(
        asset=spec.keys.raw,
        name="containers_within_lag",
        description=f"Fails when a {spec.containers_label[:-1]}'s watermark is older than two intervals of the cron "
        f"`{cron}` plus the settle window, or it was never synced: per-container freshness. Runs with every sync run.",
    )
    def containers_within_lag(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        now = clock()
        latest, upcoming = cron_window(cron, now)
        bound = 2 * (upcoming - latest) + policy.settle
        states, _ = source_states(context.instance, spec)
        behind = {
            s.container: "never synced"
            if s.watermark is None
            else f"{(now - s.watermark).total_seconds() / 3600:.1f} h"
            for s in states
            if s.watermark is None or now - s.watermark > bound
        }
        return dg.AssetCheckResult(
            passed=not behind,
            severity=dg.AssetCheckSeverity.WARN,
            description=None
            if not behind
            else f"{len(behind)} of {len(states)} {spec.containers_label} behind {bound}: "
            + ", ".join(f"{c} ({why})" for c, why in sorted(behind.items())[:10]),
            metadata={
                spec.containers_label: len(states),
                "behind": len(behind),
                "bound_hours": round(bound.total_seconds() / 3600, 2),
                "behind_list": dg.MetadataValue.json(dict(sorted(behind.items())[:50])),
            },
        )

    return containers_within_lag
