"""The sync runs of a live source as the Dagster instance holds them, read into the planner's terms.

Every sync run (requested by a source's sync sensor, or started by ``rag-pipeline sync``) carries its
source, container and range as tags, and the instant it makes good when it succeeds
(``rag/synced_through``); the watermark of a container is therefore visible in the UI (filter the runs by
``rag/container``) and survives a lost sensor cursor.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from rag_pipeline.defs.chain.partitions import container_dimension
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.scheduling.plan import RangeRequest
from rag_pipeline.scheduling.watermarks import ContainerState, RunState, SyncRun, container_state

SOURCE_TAG = "rag/source"
CONTAINER_TAG = "rag/container"
SYNCED_THROUGH_TAG = "rag/synced_through"
SYNC_FROM_TAG = "rag/sync_from"
SYNC_REASON_TAG = "rag/sync_reason"
PLANNED_AT_TAG = "rag/planned_at"
ESTIMATED_REQUESTS_TAG = "rag/estimated_requests"
API_CALLS_TAG = "rag/api_calls"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

_IN_FLIGHT = {
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
    dg.DagsterRunStatus.MANAGED,
}
_RECENT_RUNS = 10


def sync_tags(spec: SourceSpec, request: RangeRequest, planned_at: datetime) -> dict[str, str]:
    """The tags of a range run for one container: Dagster's partition range plus what the planner reads back
    (``planned_at`` is the planner's clock, so a replayed or simulated schedule reads back its own times)."""
    start = spec_key(spec, request.start.isoformat(), request.container)
    end = spec_key(spec, request.end.isoformat(), request.container)
    tags = {
        RANGE_START_TAG: start,
        RANGE_END_TAG: end,
        SOURCE_TAG: spec.api_tag,
        CONTAINER_TAG: request.container,
        SYNCED_THROUGH_TAG: request.synced_through.astimezone(UTC).isoformat(timespec="seconds"),
        SYNC_REASON_TAG: request.reason,
        PLANNED_AT_TAG: planned_at.astimezone(UTC).isoformat(timespec="seconds"),
        ESTIMATED_REQUESTS_TAG: str(request.estimated_requests),
    }
    if request.sync_from is not None:
        tags[SYNC_FROM_TAG] = request.sync_from.astimezone(UTC).isoformat(timespec="seconds")
    return tags


def spec_key(spec: SourceSpec, day: str, container: str) -> str:
    return str(dg.MultiPartitionKey({"date": day, container_dimension(spec.partitions): container}))


def _instant(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _day_of_key(spec: SourceSpec, key: str) -> str:
    return spec.partitions.get_partition_key_from_str(key).keys_by_dimension["date"]


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


def sync_run(spec: SourceSpec, record: dg.RunRecord, instance: dg.DagsterInstance | None = None) -> SyncRun | None:
    """A run record as the planner sees it (None for runs without a sync range)."""
    tags = record.dagster_run.tags
    state = _state(record.dagster_run.status)
    container, start, end = tags.get(CONTAINER_TAG), tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if state is None or not (container and start and end):
        return None
    planned = _instant(tags.get(PLANNED_AT_TAG)) or record.create_timestamp.replace(
        tzinfo=record.create_timestamp.tzinfo or UTC
    )
    finished = record.end_time
    calls = tags.get(API_CALLS_TAG)
    estimate = tags.get(ESTIMATED_REQUESTS_TAG)
    return SyncRun(
        run_id=record.dagster_run.run_id,
        container=container,
        state=state,
        first_day=_day_of_key(spec, start),
        last_day=_day_of_key(spec, end),
        planned_at=planned,
        synced_through=_instant(tags.get(SYNCED_THROUGH_TAG)),
        finished_at=datetime.fromtimestamp(finished, UTC) if finished else None,
        error=first_error_line(instance, record.dagster_run.run_id)
        if instance is not None and state is RunState.FAILURE
        else None,
        api_calls=int(calls) if calls and calls.isdigit() else None,
        estimated_requests=int(estimate) if estimate and estimate.isdigit() else None,
    )


def container_runs(
    instance: dg.DagsterInstance, spec: SourceSpec, container: str, with_errors: bool = False
) -> list[SyncRun]:
    """The recent sync runs of a container plus its latest successful ones (the watermark survives a streak
    of failures longer than the recent window)."""
    tags = {SOURCE_TAG: spec.api_tag, CONTAINER_TAG: container}
    recent = instance.get_run_records(dg.RunsFilter(tags=tags), limit=_RECENT_RUNS)
    succeeded = instance.get_run_records(
        dg.RunsFilter(tags=tags, statuses=[dg.DagsterRunStatus.SUCCESS]), limit=_RECENT_RUNS
    )
    seen: dict[str, dg.RunRecord] = {r.dagster_run.run_id: r for r in [*recent, *succeeded]}
    runs = [sync_run(spec, r, instance if with_errors else None) for r in seen.values()]
    return [r for r in runs if r is not None]


def source_states(
    instance: dg.DagsterInstance, spec: SourceSpec, with_errors: bool = False
) -> tuple[list[ContainerState], list[SyncRun]]:
    """Every known container's state, and every run read for it."""
    states, runs = [], []
    for container in sorted(instance.get_dynamic_partitions(spec.containers_name)):
        mine = container_runs(instance, spec, container, with_errors)
        states.append(container_state(container, mine))
        runs.extend(mine)
    return states, runs
