"""Where each live source's scheduled sync stands, per channel/project, from the Dagster instance: the
same watermarks the sync sensor plans from, so ``rag-pipeline status`` and the sensor's ticks agree."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.pipeline.sources import SourceNames
from rag_pipeline.runs.sync_runs import cron_window, source_states
from rag_pipeline.scheduling.plan import RangeRequest, SyncPolicy, day_of, next_range
from rag_pipeline.scheduling.watermarks import ContainerState, SyncRun


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


@dataclass
class ContainerStatus:
    """One channel/project: how far it is synced and what comes next."""

    container: str
    watermark: str | None
    behind_seconds: float | None  # now - watermark
    newest_source_timestamp: str | None
    sync_lag_max_seconds: float | None
    last_success: dict[str, Any] | None
    last_failure: dict[str, Any] | None
    in_flight: str | None
    next: str  # the range the sensor would request now, or why none
    days_to_fetch: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class SourceStatus:
    """One live source's sync: its switch, cron, next tick and containers."""

    source: str
    enabled: bool
    cron: str
    next_tick: str
    containers: list[ContainerStatus] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in self.__dict__.items() if k != "containers"},
            "containers": [c.as_dict() for c in self.containers],
        }


def _run(run: SyncRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "run_id": run.run_id,
        "days": f"{run.first_day}..{run.last_day}",
        "planned_at": _iso(run.planned_at),
        "finished_at": _iso(run.finished_at),
        **({"error": run.error} if run.error else {}),
    }


def _latest_raw_metadata(
    instance: dg.DagsterInstance, spec: SourceNames, state: ContainerState, read: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The raw asset's metadata from the container's last successful sync (lag, newest source timestamp: the
    run's, which covered this container among others). ``read`` keeps each run's, so hundreds of containers
    synced by the same run cost one lookup."""
    run = state.last_success
    if run is None:
        return {}
    if run.run_id not in read:
        found = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(spec.keys.raw), asset_partitions=[week_key(run.last_day)]),
            limit=20,
        ).records
        mine = [r for r in found if r.run_id == run.run_id] or found[:1]
        materialization = mine[0].asset_materialization if mine else None
        metadata = materialization.metadata if materialization else {}
        read[run.run_id] = {k: getattr(v, "value", v) for k, v in metadata.items()}
    return read[run.run_id]


def _days_to_fetch(state: ContainerState, upcoming: RangeRequest | str, now: datetime) -> int:
    """Days from where the container's next range starts through today (a capped range's backlog included)."""
    if isinstance(upcoming, RangeRequest):
        return (day_of(now) - upcoming.start).days + 1
    if upcoming == "up to date" or state.watermark is None:
        return 0
    return (day_of(now) - day_of(state.watermark)).days + 1


def source_status(
    instance: dg.DagsterInstance, spec: SourceNames, cron: str, policy: SyncPolicy, enabled: bool, now: datetime
) -> SourceStatus:
    """Every known container of ``spec``: watermark, lag, last runs and what the sensor would request now."""
    latest_tick, next_tick = cron_window(cron, now)
    states, _ = source_states(instance, spec, with_errors=True)
    status = SourceStatus(spec.name, enabled, cron, _iso(next_tick) or "")
    read: dict[str, dict[str, Any]] = {}
    for state in states:
        upcoming = next_range(state, now, latest_tick, policy, next_tick)
        metadata = _latest_raw_metadata(instance, spec, state, read)
        lag = metadata.get("sync_lag_max_seconds")
        status.containers.append(
            ContainerStatus(
                container=state.container,
                watermark=_iso(state.watermark),
                behind_seconds=round((now - state.watermark).total_seconds(), 1) if state.watermark else None,
                newest_source_timestamp=metadata.get("newest_source_timestamp"),
                sync_lag_max_seconds=float(lag) if isinstance(lag, int | float) else None,
                last_success=_run(state.last_success),
                last_failure=_run(state.last_failure),
                in_flight=state.in_flight.run_id if state.in_flight else None,
                next=f"{upcoming.start}..{upcoming.end} ({upcoming.reason})"
                if isinstance(upcoming, RangeRequest)
                else upcoming,
                days_to_fetch=_days_to_fetch(state, upcoming, now),
            )
        )
    return status
