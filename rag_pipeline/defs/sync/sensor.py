"""The sync that runs itself: one sensor per live source owns its sync runs, and an asset check shows gaps.

The sensor evaluates every minute (RUNNING by default where the source is configured and its switch is
on). Each evaluation reads every container's watermark from the instance's sync runs and requests one
range run of the source's whole chain per container that is behind (see :mod:`rag_pipeline.scheduling.plan`):
on the first evaluation of a fresh instance every container's initial history, after the daemon was down
past a cron tick the backlog from each watermark, otherwise one range per container per cron tick. The
cron only says when a container is behind; nothing waits for a tick to pass *between* two evaluations.
"""

import json
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.dagster_private import cron_string_iterator, reverse_cron_string_iterator
from rag_pipeline.defs.sync.runs import source_states, sync_tags
from rag_pipeline.scheduling.plan import SyncPlan, SyncPolicy, plan_sync

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def cron_window(cron: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest tick of ``cron`` at or before ``now`` and the next one after it (UTC)."""
    timestamp = now.timestamp()
    latest = next(reverse_cron_string_iterator(timestamp, cron, "UTC"))
    upcoming = next(cron_string_iterator(timestamp + 1e-6, cron, "UTC"))
    return latest.astimezone(UTC), upcoming.astimezone(UTC)


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
    spec: SourceSpec, cron: str, policy: SyncPolicy, clock: Clock = utc_now, minimum_interval_seconds: int = 30
) -> dg.SensorDefinition:
    """``<source>_sync_sensor``: the source's scheduled sync, RUNNING from the first start of the daemon."""
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
        description=f"Syncs every {spec.name} {spec.containers_label[:-1]} that is behind its cron `{cron}` (UTC): "
        f"one range run per container from its watermark's day (less a {policy.settle} settle window) through today, "
        f"at most {policy.max_range_days} days per run; a new one first gets {policy.initial_history_days} days of "
        "history. Watermarks are the `rag/synced_through` tags of its successful runs; the cursor shows them." + budget,
    )
    def sync_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        now = clock()
        plan, summary = plan_now(context.instance, spec, cron, policy, now)
        for request in plan.requests:
            context.log.info(
                f"{request.container}: {request.start}..{request.end} ({request.reason}, ~{request.estimated_requests} "
                "requests)"
            )
        for container, why in plan.waiting.items():
            if why != "up to date":
                context.log.info(f"{container}: {why}")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{spec.name}-sync:{r.container}:{r.start}:{r.end}:{r.synced_through.isoformat()}",
                    tags=sync_tags(spec, r, now),
                )
                for r in plan.requests
            ],
            cursor=json.dumps(summary, sort_keys=True),
            skip_reason=None if plan.requests else _description(plan, summary),
        )

    return sync_sensor


def missing_days(materialized: dict[str, set[str]], last_day: dict[str, str]) -> dict[str, list[str]]:
    """Per container, the days between its first materialized day and ``last_day`` that were never materialized."""
    gaps: dict[str, list[str]] = {}
    for container, days in materialized.items():
        if not days:
            continue
        first = datetime.fromisoformat(min(days)).date()
        last = datetime.fromisoformat(max(max(days), last_day.get(container, ""))).date()
        missing = [
            day.isoformat()
            for day in (first + timedelta(days=i) for i in range((last - first).days + 1))
            if day.isoformat() not in days
        ]
        if missing:
            gaps[container] = missing
    return gaps


def build_gap_check(spec: SourceSpec) -> dg.AssetChecksDefinition:
    """``no_missing_days`` on the raw asset: every day from a container's first synced day through its
    watermark has been materialized."""

    @dg.asset_check(
        asset=spec.keys.raw,
        name="no_missing_days",
        description="Fails when a channel/project has a day between its first synced day and its watermark that "
        "was never materialized (a sync that skipped a day, or a wiped partition). Runs with every sync run.",
    )
    def no_missing_days(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        states, _ = source_states(context.instance, spec)
        watermark_day = {s.container: s.watermark.date().isoformat() for s in states if s.watermark is not None}
        materialized: dict[str, set[str]] = defaultdict(set)
        for key in context.instance.get_materialized_partitions(dg.AssetKey(spec.keys.raw)):
            dims = spec.partitions.get_partition_key_from_str(key).keys_by_dimension
            container = next(v for k, v in dims.items() if k != "date")
            if container in watermark_day:
                materialized[container].add(dims["date"])
        gaps = missing_days(materialized, watermark_day)
        listed = {c: days[:20] + ([f"... {len(days) - 20} more"] if len(days) > 20 else []) for c, days in gaps.items()}
        return dg.AssetCheckResult(
            passed=not gaps,
            severity=dg.AssetCheckSeverity.ERROR,
            description=None
            if not gaps
            else f"{sum(len(d) for d in gaps.values())} missing day(s) in {len(gaps)} "
            f"{spec.containers_label}: " + "; ".join(f"{c}: {', '.join(d[:5])}" for c, d in sorted(gaps.items())),
            metadata={
                spec.containers_label: len(watermark_day),
                "missing_days": sum(len(d) for d in gaps.values()),
                "gaps": dg.MetadataValue.json(listed),
            },
        )

    return no_missing_days
