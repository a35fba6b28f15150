"""The sync runs of a live source as the Dagster instance holds them, read into the planner's terms.

A sync run (requested by a source's sync sensor, or started by ``rag-pipeline sync``) covers every container
that was behind when it was planned, each from its own watermark: its raw asset's run config holds the plan
(per container: the days read, and ``synced_through``, the instant a success makes good). The watermark of a
container is therefore visible in the UI (the run's config; the run's tags give the source and counts) and
survives a lost sensor cursor. A container the run could not read is named in ``rag/failed_containers``: the
run succeeds for the others, and that container's part counts as failed.

Runs of earlier versions (one per container, with ``rag/container`` and ``rag/synced_through`` tags) are
still read, so a data folder's watermarks carry over to this version.

The sync sensor (``defs/sync/sensor.py``), ``rag-pipeline sync``, ``status``, the ingest metrics and retention read
them alike; a spec is read through :class:`~rag_pipeline.pipeline.sources.SourceNames` only.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.keys import raw_config, week_key
from rag_pipeline.pipeline.sources import SourceNames
from rag_pipeline.pipeline.tags import (
    API_CALLS_TAG,
    CONTAINER_COUNT_TAG,
    ESTIMATED_REQUESTS_TAG,
    FAILED_CONTAINERS_TAG,
    LEGACY_CONTAINER_TAG,
    LEGACY_SYNCED_THROUGH_TAG,
    PLANNED_AT_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    SOURCE_TAG,
)
from rag_pipeline.runs.dagster_private import cron_string_iterator, reverse_cron_string_iterator
from rag_pipeline.scheduling.plan import RangeRequest
from rag_pipeline.scheduling.watermarks import ContainerState, RunState, SyncRun, container_state

_IN_FLIGHT = {
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
    dg.DagsterRunStatus.MANAGED,
}
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
_RECENT_RUNS = 10
# Run records read per page where all are read.
_PAGE = 500
# Successful runs are read back page by page until every known container has its watermark.
_SUCCESS_PAGE = 50
_SUCCESS_PAGES = 20


def _iso(instant: datetime | None) -> str | None:
    return instant.astimezone(UTC).isoformat(timespec="seconds") if instant is not None else None


def sync_request(
    spec: SourceNames, requests: Sequence[RangeRequest], planned_at: datetime
) -> tuple[dict[str, str], dict[str, Any]]:
    """The tags and run config of one sync run covering ``requests`` (one per container): Dagster's partition
    range over their weeks, and the plan the raw asset reads and the planner reads back (``planned_at`` is the
    planner's clock, so a replayed or simulated schedule reads back its own times)."""
    start = min(r.start for r in requests)
    end = max(r.end for r in requests)
    plan = {
        r.container: {
            "first_day": r.start.isoformat(),
            "last_day": r.end.isoformat(),
            "synced_through": _iso(r.synced_through) if r.synced_through is not None else None,
            "sync_from": _iso(r.sync_from),
            "reason": r.reason,
            "estimated_requests": r.estimated_requests,
        }
        for r in requests
    }
    tags = {
        RANGE_START_TAG: week_key(start),
        RANGE_END_TAG: week_key(end),
        SOURCE_TAG: spec.api_tag,
        PLANNED_AT_TAG: _iso(planned_at) or "",
        CONTAINER_COUNT_TAG: str(len(plan)),
        ESTIMATED_REQUESTS_TAG: str(sum(r.estimated_requests for r in requests)),
    }
    return tags, {"ops": {spec.keys.raw: {"config": {"plan": plan}}}}


def _instant(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _state(status: dg.DagsterRunStatus) -> RunState | None:
    if status == dg.DagsterRunStatus.SUCCESS:
        return RunState.SUCCESS
    if status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED):
        return RunState.FAILURE
    return RunState.IN_FLIGHT if status in _IN_FLIGHT else None


def first_error_line(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """The first line of the first step failure of a run (else of the run failure)."""
    records = instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE})
    for record in sorted(records, key=lambda r: r.dagster_event is None or not r.dagster_event.is_step_failure):
        event = record.dagster_event
        if event is None:
            continue
        data = event.event_specific_data
        error = getattr(data, "error", None)
        message = (error.message if error is not None else None) or event.message or ""
        if message.strip():
            return message.strip().splitlines()[0][:300]
    return None


def _plan_of(spec: SourceNames, run: dg.DagsterRun) -> dict[str, dict[str, Any]]:
    plan = raw_config(run.run_config, spec.keys.raw).get("plan") or {}
    return {str(c): dict(p) for c, p in plan.items() if isinstance(p, dict)}


def _legacy_day(key: str) -> str:
    """The day of a ``day|container`` partition key of an earlier version (either order)."""
    return next(part for part in key.split("|") if len(part) == 10 and part[4] == "-" and part[7] == "-")


def sync_runs(spec: SourceNames, record: dg.RunRecord, instance: dg.DagsterInstance | None = None) -> list[SyncRun]:
    """A run record as the planner sees it: one :class:`SyncRun` per container it covers (none for a run that
    is not a sync run)."""
    run = record.dagster_run
    tags = run.tags
    state = _state(run.status)
    if state is None:
        return []
    planned = _instant(tags.get(PLANNED_AT_TAG)) or record.create_timestamp.replace(
        tzinfo=record.create_timestamp.tzinfo or UTC
    )
    finished = datetime.fromtimestamp(record.end_time, UTC) if record.end_time else None
    calls = tags.get(API_CALLS_TAG)
    api_calls = int(calls) if calls and calls.isdigit() else None
    error = first_error_line(instance, run.run_id) if instance is not None and state is RunState.FAILURE else None
    plan = _plan_of(spec, run)
    if not plan and tags.get(LEGACY_CONTAINER_TAG) and tags.get(RANGE_START_TAG) and tags.get(RANGE_END_TAG):
        estimate = tags.get(ESTIMATED_REQUESTS_TAG)
        plan = {
            tags[LEGACY_CONTAINER_TAG]: {
                "first_day": _legacy_day(tags[RANGE_START_TAG]),
                "last_day": _legacy_day(tags[RANGE_END_TAG]),
                "synced_through": tags.get(LEGACY_SYNCED_THROUGH_TAG),
                "estimated_requests": int(estimate) if estimate and estimate.isdigit() else None,
            }
        }
    failed: dict[str, str] = json.loads(tags.get(FAILED_CONTAINERS_TAG) or "{}")
    total = sum(int(p.get("estimated_requests") or 0) for p in plan.values()) or 1
    out = []
    for container, part in sorted(plan.items()):
        mine = RunState.FAILURE if state is RunState.SUCCESS and container in failed else state
        estimate = part.get("estimated_requests")
        out.append(
            SyncRun(
                run_id=run.run_id,
                container=container,
                state=mine,
                first_day=str(part["first_day"]),
                last_day=str(part["last_day"]),
                planned_at=planned,
                synced_through=_instant(part.get("synced_through")),
                finished_at=finished,
                error=failed.get(container) or error,
                # The run's calls shared by the containers in proportion to their estimates (Slack's budget
                # plans each container's next range from its requests per day).
                api_calls=round(api_calls * int(estimate or 0) / total) if api_calls is not None else None,
                estimated_requests=int(estimate) if estimate is not None else None,
            )
        )
    return out


def source_runs(
    instance: dg.DagsterInstance, spec: SourceNames, containers: Sequence[str], with_errors: bool = False
) -> list[SyncRun]:
    """The recent sync runs of a source, plus its successful ones back until every container in
    ``containers`` has its latest success (the watermark survives a streak of failures). Each run record is
    read into its containers' parts once."""
    tags = {SOURCE_TAG: spec.api_tag}
    parts: dict[str, list[SyncRun]] = {}

    def read(records: Sequence[dg.RunRecord]) -> None:
        for record in records:
            if record.dagster_run.run_id not in parts:
                parts[record.dagster_run.run_id] = sync_runs(spec, record, instance if with_errors else None)

    read(instance.get_run_records(dg.RunsFilter(tags=tags), limit=_RECENT_RUNS))
    waiting = set(containers)
    cursor = None
    for _ in range(_SUCCESS_PAGES):
        page = instance.get_run_records(
            dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=_SUCCESS_PAGE, cursor=cursor
        )
        read(page)
        for record in page:
            waiting -= {
                r.container
                for r in parts[record.dagster_run.run_id]
                if r.state is RunState.SUCCESS and r.synced_through is not None
            }
        if not waiting or len(page) < _SUCCESS_PAGE:
            break
        cursor = page[-1].dagster_run.run_id
    return [run for runs in parts.values() for run in runs]


def source_states(
    instance: dg.DagsterInstance, spec: SourceNames, with_errors: bool = False
) -> tuple[list[ContainerState], list[SyncRun]]:
    """Every known container's state, and every run read for it."""
    containers = sorted(instance.get_dynamic_partitions(spec.containers_name))
    runs = source_runs(instance, spec, containers, with_errors)
    by_container: dict[str, list[SyncRun]] = {}
    for run in runs:
        by_container.setdefault(run.container, []).append(run)
    states = [container_state(c, by_container.get(c, [])) for c in containers]
    return states, [r for r in runs if r.container in set(containers)]


def container_runs(
    instance: dg.DagsterInstance, spec: SourceNames, container: str, with_errors: bool = False
) -> list[SyncRun]:
    """The sync runs read for one container (its part of each)."""
    return [r for r in source_runs(instance, spec, [container], with_errors) if r.container == container]


def cron_window(cron: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest tick of ``cron`` at or before ``now`` and the next one after it (UTC)."""
    timestamp = now.timestamp()
    latest = next(reverse_cron_string_iterator(timestamp, cron, "UTC"))
    upcoming = next(cron_string_iterator(timestamp + 1e-6, cron, "UTC"))
    return latest.astimezone(UTC), upcoming.astimezone(UTC)


def all_run_records(instance: dg.DagsterInstance, filters: dg.RunsFilter) -> Iterator[dg.RunRecord]:
    """Every run record ``filters`` selects, read page by page."""
    cursor = None
    while True:
        page = instance.get_run_records(filters, limit=_PAGE, cursor=cursor)
        yield from page
        if len(page) < _PAGE:
            return
        cursor = page[-1].dagster_run.run_id


def watermark_runs(
    instance: dg.DagsterInstance, candidates: Sequence[dg.RunRecord], specs: Sequence[SourceNames]
) -> dict[str, str]:
    """Retention's question to the sync runs (``RunKeeper`` in ``runs/retention.py``): run id -> why it is kept, for
    the sync runs the planner's state of each container of ``specs`` (every source) is made of. Sync runs of a
    source this version does not know are kept whole."""
    by_tag = {spec.api_tag: spec for spec in specs}
    offline = {spec.name for spec in specs}
    keep: dict[str, str] = {}
    # run id -> (source, role) -> containers
    roles: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for _key, values in instance.get_run_tags(tag_keys=[SOURCE_TAG]):
        for value in sorted(values):
            spec = by_tag.get(value)
            if spec is None:
                if value not in offline:
                    # A source this version cannot read (a plugin since removed): its runs' plans are not ours to
                    # interpret, so none of its runs is deleted.
                    for record in all_run_records(instance, dg.RunsFilter(tags={SOURCE_TAG: value})):
                        keep[record.dagster_run.run_id] = (
                            f"a sync run of {value!r}, a source this version does not know"
                        )
                continue
            parts: list[SyncRun] = []
            for record in all_run_records(instance, dg.RunsFilter(tags={SOURCE_TAG: value}, statuses=list(FINISHED))):
                parts.extend(sync_runs(spec, record))
            by_container: dict[str, list[SyncRun]] = defaultdict(list)
            for part in parts:
                by_container[part.container].append(part)
            for container, runs in sorted(by_container.items()):
                for run_id, role in _state_runs(container, runs):
                    roles[run_id][(spec.name, role)].append(container)
    for run_id, held in roles.items():
        keep[run_id] = "; ".join(
            f"{role} of {source} {_some(containers)}" for (source, role), containers in sorted(held.items())
        )
    return keep


def _some(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c and 4 more``."""
    listed = ", ".join(names[:shown])
    return f"{listed} and {len(names) - shown} more" if len(names) > shown else listed


def _state_runs(container: str, runs: Sequence[SyncRun]) -> list[tuple[str, str]]:
    """The runs a container's state is made of (:func:`container_state`), each with its role."""
    state = container_state(container, runs)
    out: list[tuple[str, str]] = []
    marked = [r for r in runs if r.state is RunState.SUCCESS and r.synced_through is not None]
    if state.watermark is not None:
        newest = max((r for r in marked if r.synced_through == state.watermark), key=lambda r: r.planned_at)
        out.append((newest.run_id, "the watermark"))
    if state.last_success is not None:
        out.append((state.last_success.run_id, "the last success"))
    if state.last_failure is not None:
        out.append((state.last_failure.run_id, "the last failure"))
    if state.first_synced_day is not None:
        first = min((r for r in marked if r.first_day == state.first_synced_day), key=lambda r: r.planned_at)
        out.append((first.run_id, "the first synced day"))
    return out
